"""lucidrains/vit-pytorch, vit_pytorch/deepvit.py (``Attention`` of ``DeepViT``, re-attention; file as of commit
b80676e, 2025): pre-norm, ``to_qkv(x).chunk(3, dim=-1)``, ``rearrange(t, 'b n (h d) -> b h n d')``, ``einsum('b h
i d, b h j d -> b h i j')`` scaled, softmax over the keys; then the re-attention of Zhou et al. 2021: the heads'
maps mixed on purpose by a learned ``H x H`` matrix, ``einsum('b h i j, h g -> b g i j', attn,
self.reattn_weights)``, and a ``LayerNorm(heads)`` over the heads (``Rearrange('b h i j -> b i j h')``, the norm,
``Rearrange('b i j h -> b h i j')``); ``einsum('b h i j, b h j d -> b h i d')`` with the values, heads merged
``'b h n d -> b n (h d)'``, ``to_out``.

Bugs: ``softmax-over-queries``: ``dots.softmax(dim=-2)`` (each key's column normalised over the queries, the slip
of a hand-written axis index); ``norm-back-transposed``: the re-attention norm written with ``permute`` and the way
back permuted as ``permute(0, 3, 2, 1)`` where ``permute(0, 3, 1, 2)`` undoes ``permute(0, 2, 3, 1)`` (the shape
``[b, h, j, i]`` still fits, the maps come back transposed: each query reads the column of the key)."""

import sys

import torch
from einops import rearrange
from torch import einsum, nn


class ReAttention(nn.Module):
    def __init__(self, dim, heads=8, dim_head=8, bug=""):
        super().__init__()
        inner_dim = dim_head * heads
        self.heads, self.bug = heads, bug
        self.scale = dim_head ** -0.5
        self.norm = nn.LayerNorm(dim)
        self.to_qkv = nn.Linear(dim, inner_dim * 3, bias=False)
        self.reattn_weights = nn.Parameter(torch.randn(heads, heads))
        self.reattn_ln = nn.LayerNorm(heads)
        self.to_out = nn.Linear(inner_dim, dim)

    def reattn_norm(self, attn):
        attn = attn.permute(0, 2, 3, 1)                                              # (b, i, j, h)
        attn = self.reattn_ln(attn)
        if self.bug == "norm-back-transposed":
            return attn.permute(0, 3, 2, 1)                                          # (b, h, j, i)
        return attn.permute(0, 3, 1, 2)                                              # (b, h, i, j)

    def forward(self, x):
        h = self.heads
        x = self.norm(x)
        qkv = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=h) for t in qkv)           # (b, h, n, d) each
        dots = einsum("b h i d, b h j d -> b h i j", q, k) * self.scale              # (b, h, n, n)
        attn = dots.softmax(dim=-2 if self.bug == "softmax-over-queries" else -1)
        attn = einsum("b h i j, h g -> b g i j", attn, self.reattn_weights)          # (b, h, n, n), heads mixed
        attn = self.reattn_norm(attn)
        out = einsum("b h i j, b h j d -> b h i d", attn, v)                         # (b, h, n, d)
        out = rearrange(out, "b h n d -> b n (h d)")                                 # (b, n, h·d)
        return self.to_out(out)


BUGS = ("softmax-over-queries", "norm-back-transposed")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return ReAttention(D, heads=H, dim_head=D // H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
