"""Comfy-Org/ComfyUI pull request #15698 ("Prs/ace graphs", merged; review thread on comfy/text_encoders/llama.py,
coderabbitai: "Use per-row cache lengths for decode RoPE positions. ... The default ``position_ids`` still use
scalar ``past_len``. ``past_len`` is the padded batch width, but ... ``FixedKV.seqlen`` [stores] each row's valid
prompt length. For rows with different valid prompt lengths, the cache write uses the per-row position while RoPE
uses the padded width. This misaligns query and key positions and changes decode output."; proposed fix: derive
the decode positions from ``FixedKV.seqlen``): a one-token decode step over a fixed-size cache after a padded
prefill rotated each row's new token at the batch's padded width, not at the row's own length.

The idiom: ComfyUI's llama text encoder (``q_proj``/``k_proj``/``v_proj``/``o_proj`` without bias, ``view``/
``transpose`` to heads, ``precompute_freqs_cis``-style ``cos``/``sin`` from ``position_ids`` with
``rotate_half``), a ``FixedKV`` cache ``[B, H, S_max, d]`` with each row's valid length ``seqlen`` ``[B]``: the
step's key and value written at ``seqlen[b]`` (``scatter`` along the positions), the keys up to it attended,
``sdpa``-style scores scaled by ``1/sqrt(d)``.

Bug (positions): ``padded-width-positions``: ``position_ids = arange(past_len, past_len + seq_len)`` with
``past_len`` the prompt's padded width, for ``seqlen[:, None] + arange(seq_len)``."""

import math
import sys

import torch
from torch import nn

BUGS = ("padded-width-positions",)
TWINS = ()
DIMS = ("B=2 T=1 D=32 H=4 S=10",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4 S=12"}   # (a cache long enough for four steps after the prompts)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class Llama2Attention(nn.Module):
    def __init__(self, hidden_size, num_heads, bug="", theta=10000.0):
        super().__init__()
        self.bug = bug
        self.num_heads, self.head_dim = num_heads, hidden_size // num_heads
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.register_buffer("inv_freq", 1.0 / theta ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))

    def rope(self, position_ids):
        freqs = position_ids[..., None].float() * self.inv_freq                         # (B, T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().unsqueeze(1), emb.sin().unsqueeze(1)                           # (B, 1, T, d)

    def forward(self, x, k_cache, v_cache, seqlen, past_len):
        B, seq_len, _ = x.shape
        if self.bug == "padded-width-positions":
            position_ids = torch.arange(past_len, past_len + seq_len).unsqueeze(0).expand(B, -1)
        else:
            position_ids = seqlen[:, None] + torch.arange(seq_len)                      # (B, T)
        q = self.q_proj(x).view(B, seq_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, seq_len, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, seq_len, self.num_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rope(position_ids)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        slot = (seqlen[:, None] + torch.arange(seq_len))[:, None, :, None]              # (B, 1, T, 1)
        slot = slot.expand(-1, self.num_heads, -1, self.head_dim)
        k_cache = k_cache.scatter(2, slot, k)                                           # (B, H, S, d)
        v_cache = v_cache.scatter(2, slot, v)
        keep = torch.arange(k_cache.shape[2])[None, :] < (seqlen + seq_len)[:, None]    # (B, S)
        scores = torch.matmul(q, k_cache.transpose(-1, -2)) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(~keep[:, None, None, :], float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, v_cache).transpose(1, 2).reshape(B, seq_len, -1)
        return self.o_proj(out)


def build(bug="", B=2, T=1, D=32, H=4, S=10):
    torch.manual_seed(0)
    d = D // H
    seqlen = S - 2 - T - torch.tensor([0, 2, 1, 0][:B])                                # each row's prompt length
    past_len = int(seqlen.max())                                                        # the prefill's padded width
    valid = (torch.arange(S)[None, :] < seqlen[:, None])[:, None, :, None]
    k_cache = torch.randn(B, H, S, d) * valid
    v_cache = torch.randn(B, H, S, d) * valid
    return Llama2Attention(D, H, bug=bug).eval(), (torch.randn(B, T, D), k_cache, v_cache, seqlen, past_len)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
