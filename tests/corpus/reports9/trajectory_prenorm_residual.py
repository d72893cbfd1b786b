"""Howuhh/faster-trajectory-transformer issue #3 ("pre-norm bug in transformer block", labelled bug, the
author's own report): the GPT block wrote ``norm_x = norm(x); x = norm_x + attn(norm_x)``, so the residual
stream carried the *normalised* input instead of the raw one (minGPT: ``x + attn(ln_1(x))``): each block
re-normalised the residual and the pre-norm design was lost.

The idiom (minGPT): a causal self-attention with ``c_attn`` (``Linear(D, 3D)``) ``split`` into q, k, v,
``view(B, T, H, d).transpose(1, 2)``, the ``tril`` buffer mask, ``softmax(-1)``, then the MLP block.

Twin (argument): ``residual-from-norm``: ``norm_x + attn(norm_x)``. A twin, not a bug the trace could show:
the ops and their names are those of a correct model that normalises before a block which adds its own input
(BERT's embedding ``LayerNorm`` followed by the first layer's ``x + attn(x)``); which tensor the residual should
carry is a design choice no axis, mask or dependency decides."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ()
TWINS = ("residual-from-norm",)
DIMS = ("B=2 T=6 D=32 H=4",)


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, heads, max_len=16):
        super().__init__()
        self.heads = heads
        self.c_attn, self.c_proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.register_buffer("bias", torch.tril(torch.ones(max_len, max_len)).view(1, 1, max_len, max_len))

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)                  # (B, H, T, d)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / k.size(-1) ** 0.5)                    # (B, H, T, T)
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v                                                  # (B, H, T, d)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))               # (B, T, D)


class Block(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.bug = bug
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        norm_x = self.norm1(x)
        x = (norm_x if self.bug == "residual-from-norm" else x) + self.attn(norm_x)
        return x + self.mlp(self.norm2(x))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Block(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
