"""somepago/saint, models/model.py and models/pretrainmodel.py (``Attention``, ``RowColTransformer`` with
``style='colrow'``): tabular rows of ``n`` features embedded ``(B, n, d)``; a column (self) attention over the
features of each row, then the intersample (row) attention where the rows of the batch attend to each other BY
DESIGN: ``rearrange(x, 'b n d -> 1 b (n d)')``, an ``Attention(dim=n * d)``, and ``rearrange(x, '1 b (n d) -> b
n d', n=n)``; ``Attention``: ``to_qkv`` Linear(dim, 3 * inner, bias=False), ``chunk(3, dim=-1)``,
``rearrange(t, 'b n (h d) -> b h n d', h=heads)``, ``einsum('b h i d, b h j d -> b h i j') * scale``, softmax,
``einsum('b h i j, b h j d -> b h i d')``, ``rearrange(out, 'b h n d -> b n (h d)')``, ``to_out``.

Bugs (argument): ``back-rearrange-swapped``: the intersample output put back with ``'1 b (d n) -> b n d'`` (the
features' order read the other way round, each feature a stride-``n`` pick of the row). A twin,
``col-heads-merged-first``: the column attention's output merged ``'b h n d -> b n (d h)'`` (a fixed permutation
of the features ``to_out`` reads: consistent on weights learnt so, see phi2_mixformer.py)."""

import sys

import torch
from einops import rearrange
from torch import einsum, nn


class Attention(nn.Module):
    def __init__(self, dim, heads=4, dim_head=8, bug=""):
        super().__init__()
        inner_dim = dim_head * heads
        self.heads, self.scale, self.bug = heads, dim_head**-0.5, bug
        self.to_qkv = nn.Linear(dim, inner_dim * 3, bias=False)
        self.to_out = nn.Linear(inner_dim, dim)

    def forward(self, x):
        h = self.heads
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=h) for t in (q, k, v))
        sim = einsum("b h i d, b h j d -> b h i j", q, k) * self.scale
        attn = sim.softmax(dim=-1)
        out = einsum("b h i j, b h j d -> b h i d", attn, v)
        if self.bug == "col-heads-merged-first":
            out = rearrange(out, "b h n d -> b n (d h)", h=h)
        else:
            out = rearrange(out, "b h n d -> b n (h d)", h=h)
        return self.to_out(out)


class RowColTransformer(nn.Module):
    def __init__(self, dim, nfeats, heads, bug=""):
        super().__init__()
        self.bug = bug
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim * nfeats)
        self.col_attn = Attention(dim, heads, dim // heads, bug)
        self.row_attn = Attention(dim * nfeats, heads, dim // heads)

    def forward(self, x):                                                          # (B, n, d)
        _, n, _ = x.shape
        x = x + self.col_attn(self.norm1(x))
        x = rearrange(x, "b n d -> 1 b (n d)")
        x = x + self.row_attn(self.norm2(x))
        if self.bug == "back-rearrange-swapped":
            return rearrange(x, "1 b (d n) -> b n d", n=n)
        return rearrange(x, "1 b (n d) -> b n d", n=n)


BUGS = ("back-rearrange-swapped",)
TWINS = ("col-heads-merged-first",)
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return RowColTransformer(D, T, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
