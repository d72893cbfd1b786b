"""openai/sparse_attention, ``attention.py`` (2019, ``get_attn_mask``, ``split_heads``/``merge_heads`` and
``attention_impl``, the dense reference of Child et al.'s Sparse Transformer, here in PyTorch as its ports write
it): ``split_heads`` views ``(B, T, H, d)`` and permutes to ``(B, H, T, d)``; ``w = q @ k^T * d ** -0.5``; the
mask from ``get_attn_mask``: ``'local'`` a causal band of ``local_attn_ctx`` tokens, ``'strided'`` the causal
positions a multiple of the stride back, ``q = z + x``, ``k = z + y`` (``x = arange(n)[:, None]``, ``y = x.T``),
``(q >= k) & ((q - k) % stride == 0)``; ``w = w * mask + -1e9 * (1 - mask)``; ``softmax(dim=-1)``; ``w @ v``;
``merge_heads``. Two layers: layer 0 local, layer 1 strided (the factorised pattern), each with a residual.

Bugs: ``strided-rows-columns-swapped``: ``q = z + y``, ``k = z + x`` (the query positions taken from the row
vector: the mask is the transpose, each query sees the positions after it, the slip of ports that build the
``(n, 1)`` and ``(1, n)`` grids the other way round); ``merge-without-permute``: ``merge_heads`` as
``a.reshape(B, T, D)`` straight from ``(B, H, T, d)`` (the permute back forgotten: heads and tokens mix)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


def get_attn_mask(n, attn_mode, local_attn_ctx, bug=""):
    if attn_mode == "local":
        b = torch.tril(torch.ones(n, n))
        b = torch.triu(b, diagonal=-(local_attn_ctx - 1))
    else:
        x = torch.arange(n).view(n, 1)
        y = x.t()
        z = torch.zeros(n, n, dtype=torch.long)
        q, k = (z + y, z + x) if bug == "strided-rows-columns-swapped" else (z + x, z + y)
        b = ((q >= k) & (torch.remainder(q - k, local_attn_ctx) == 0)).float()
    return b.view(1, 1, n, n)


class SparseAttention(nn.Module):
    def __init__(self, dim, heads, attn_mode, local_attn_ctx, bug=""):
        super().__init__()
        self.heads, self.attn_mode, self.ctx, self.bug = heads, attn_mode, local_attn_ctx, bug
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def split_heads(self, x):
        B, T, D = x.shape
        return x.view(B, T, self.heads, D // self.heads).permute(0, 2, 1, 3)

    def merge_heads(self, x):
        B, H, T, d = x.shape
        if self.bug == "merge-without-permute":
            return x.reshape(B, T, H * d)
        return x.permute(0, 2, 1, 3).contiguous().view(B, T, H * d)

    def forward(self, x):
        q, k, v = (self.split_heads(t) for t in self.qkv(x).chunk(3, dim=-1))
        n = x.shape[1]
        mask = get_attn_mask(n, self.attn_mode, self.ctx, self.bug)
        w = torch.matmul(q, k.transpose(-2, -1)) * q.shape[-1] ** -0.5
        w = w * mask + -1e9 * (1 - mask)
        w = F.softmax(w, dim=-1)
        a = self.merge_heads(torch.matmul(w, v))
        return x + self.proj(a)


class SparseTransformer(nn.Module):
    def __init__(self, dim, heads, stride, bug=""):
        super().__init__()
        self.layers = nn.ModuleList([SparseAttention(dim, heads, "local", stride, bug),
                                     SparseAttention(dim, heads, "strided", stride, bug)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


BUGS = ("strided-rows-columns-swapped", "merge-without-permute")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
EQUAL = {"B=2 T=6 D=32 H=4": "B=4 T=4 D=32 H=4"}


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return SparseTransformer(D, H, stride=2, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
