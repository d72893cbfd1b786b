"""Om-Alve/smolGPT issue #22 ("question for Rotary class"): after ``q = q.view(B, T, n_head, C // n_head).transpose(1,
2)``, q is ``[batch_size, n_heads, seq_length, head_dim]``, yet the ``Rotary`` module (modded-nanogpt's, written
for ``[B, T, n_head, head_dim]``) takes ``seq_len = x.shape[1]`` and returns ``cos[None, :, None, :]``: on
head-first q and k its table is built for ``n_head`` positions and lined up with the heads, so each head is
turned by its head index and every token of a head by the same angle. The reporter's reading: take the
length from ``q.shape[2]``, or rotate before the transpose, as modded-nanogpt does.

The idiom (modded-nanogpt's): ``Rotary(dim)`` caching ``outer(arange(seq_len), inv_freq)``'s cos and sin,
``apply_rotary_emb`` on halves (``y1 = x1·cos + x2·sin``, ``y2 = −x1·sin + x2·cos``, ``cat([y1, y2], 3)``),
``c_attn`` to q, k, v, ``F.scaled_dot_product_attention(is_causal=True)``, ``c_proj``.

Bug (argument): ``rotary-after-transpose``: the rotation applied to head-first q and k."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("rotary-after-transpose",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class Rotary(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)))

    def forward(self, x):
        seq_len = x.shape[1]
        t = torch.arange(seq_len).float()
        freqs = torch.outer(t, self.inv_freq)
        return freqs.cos()[None, :, None, :], freqs.sin()[None, :, None, :]   # [1, len, 1, d/2]


def apply_rotary_emb(x, cos, sin):
    d = x.shape[3] // 2
    x1, x2 = x[..., :d], x[..., d:]
    y1 = x1 * cos + x2 * sin
    y2 = x1 * (-sin) + x2 * cos
    return torch.cat([y1, y2], 3)                                           # [rope]


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, bug=""):
        super().__init__()
        self.n_head, self.bug = n_head, bug
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=False)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=False)
        self.rotary = Rotary(n_embd // n_head)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head)                     # (B, T, nh, hs)
        k = k.view(B, T, self.n_head, C // self.n_head)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)     # (B, nh, T, hs)
        if self.bug == "rotary-after-transpose":
            q, k = q.transpose(1, 2), k.transpose(1, 2)                     # (B, nh, T, hs)
            cos, sin = self.rotary(q)
            q, k = apply_rotary_emb(q, cos, sin), apply_rotary_emb(k, cos, sin)
        else:
            cos, sin = self.rotary(q)
            q, k = apply_rotary_emb(q, cos, sin), apply_rotary_emb(k, cos, sin)
            q, k = q.transpose(1, 2), k.transpose(1, 2)                     # (B, nh, T, hs)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)         # (B, nh, T, hs)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return CausalSelfAttention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
