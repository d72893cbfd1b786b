"""Qualcomm-AI-research/geometric-algebra-transformer PR #8 ("Fix layernorm bug in baseline transformer"): the
baseline transformer's ``BaselineLayerNorm`` called ``F.layer_norm(x, normalized_shape=x.shape[1:])``, which
normalises over every axis but the first, ``(T, D)`` for a ``(B, T, D)`` batch of tokens: one mean and variance
per sample rather than per token. The fix: ``normalized_shape=x.shape[-1:]``.

The idiom: a pre-norm encoder block over a batch of items (no mask: every token sees every token), multi-head
attention with one packed ``Linear(D, 3D)``, ``rearrange``-style ``reshape(B, T, 3, H, d).permute(2, 0, 3, 1,
4)``, ``F.scaled_dot_product_attention``, and the baseline's functional layer norm before attention and MLP.

Bug (argument): ``norm-over-tokens``: ``normalized_shape=x.shape[1:]``."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("norm-over-tokens",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class BaselineLayerNorm(nn.Module):
    def __init__(self, bug=""):
        super().__init__()
        self.bug = bug

    def forward(self, x):                                                              # (B, T, D)
        shape = x.shape[1:] if self.bug == "norm-over-tokens" else x.shape[-1:]
        return F.layer_norm(x, normalized_shape=shape)                                 # (B, T, D)


class SelfAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        qkv = self.qkv(x).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)  # (3, B, H, T, d)
        q, k, v = qkv[0], qkv[1], qkv[2]
        out = F.scaled_dot_product_attention(q, k, v)                                  # (B, H, T, d)
        return self.out(out.transpose(1, 2).reshape(b, t, d))                         # (B, T, D)


class BaselineBlock(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.norm = BaselineLayerNorm(bug)
        self.attn = SelfAttention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.norm(x))
        return x + self.mlp(self.norm(x))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return BaselineBlock(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
