"""raiyanyahya/how-to-train-your-gpt issue #6 ("Chapter 4 – Positional Encoding (RoPE): ``rotate_half`` uses
``split-half`` convention but ``emb`` uses ``adjacent-pair`` convention", fixed by PR #7): the angle table
was built ``freqs.repeat_interleave(2, dim=-1)`` (``[θ0, θ0, θ1, θ1, …]``: features 2i and 2i+1 share a
frequency), while ``rotate_half`` split the head at its middle (``cat([-x2, x1])``: feature i paired with
i + d/2), so each pair was rotated by two different angles and ``q·k`` no longer depended on the relative
position alone. The fix rotates adjacent pairs: ``stack([-x[..., 1::2], x[..., ::2]], -1).flatten(-2)``.

The book's idiom: a ``RotaryEmbedding`` module holding ``inv_freq``, ``outer(arange(T), inv_freq)``,
``repeat_interleave(2)``, ``cos``/``sin`` as ``(1, 1, T, d)``, ``q * cos + rotate_half(q) * sin`` on
``(B, H, T, d)`` heads, scores ``q @ k^T / sqrt(d)``, a causal ``masked_fill``, ``softmax(dim=-1)``.

Bug (argument): ``rotate-half``: the split-half rotation on the interleaved table."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("rotate-half",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat([-x2, x1], dim=-1)


def rotate_every_two(x):
    return torch.stack([-x[..., 1::2], x[..., ::2]], dim=-1).flatten(-2)        # (..., d)


class RotaryEmbedding(nn.Module):
    def __init__(self, head_dim, base=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim))

    def forward(self, seq_len):
        t = torch.arange(seq_len, dtype=torch.float32)
        freqs = torch.outer(t, self.inv_freq)                                  # (T, d/2)
        emb = freqs.repeat_interleave(2, dim=-1)                               # (T, d): θ0 θ0 θ1 θ1 ...
        return emb.cos()[None, None], emb.sin()[None, None]                    # (1, 1, T, d)


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, bug=""):
        super().__init__()
        self.n_heads, self.head_dim, self.bug = n_heads, d_model // n_heads, bug
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.proj = nn.Linear(d_model, d_model, bias=False)
        self.rope = RotaryEmbedding(self.head_dim)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)          # (B, H, T, d)
        k = k.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        v = v.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rope(T)
        rotate = rotate_half if self.bug == "rotate-half" else rotate_every_two
        q = q * cos + rotate(q) * sin                                          # [rope]
        k = k * cos + rotate(k) * sin                                          # [rope]
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)             # (B, H, T, T)
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf"))
        y = F.softmax(att, dim=-1) @ v                                         # (B, H, T, d)
        y = y.transpose(1, 2).contiguous().view(B, T, C)                       # (B, T, C)
        return self.proj(y)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return CausalSelfAttention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
