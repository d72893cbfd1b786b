"""lucidrains/alphafold2, alphafold2_pytorch/alphafold2.py (``Attention`` with ``gating=True``, ``AxialAttention``
with ``accept_edges=True``, ``PairwiseAttentionBlock``'s ``triangle_attention_outgoing`` /
``triangle_attention_ingoing``, commit 931466e): the pair representation ``x`` ``(b, h, w, d)`` (here h = w = T
residues) and its mask ``(b, h, w)``; ``norm``; row attention folds ``'b h w d -> (b h) w d'``, column attention
``'b h w d -> (b w) h d'`` (the mask the same way), and each unfolds with its own ``output_fold_eq``; the edges (the
pair itself) become one bias per head, ``Linear(dim, heads)`` and ``Rearrange('b i j h -> b h i j')``, tiled over
the fold by ``repeat(attn_bias, 'b h i j -> (b x) h i j', x=axial_dim)``; ``Attention``: ``to_q``, ``to_kv`` chunked,
``rearrange(t, 'b n (h d) -> b h n d')``, ``q * scale``, ``einsum('b h i d, b h j d -> b h i j')``, the bias added,
``mask[:, None, :, None] * mask[:, None, None, :]`` filled with ``-finfo.max``, ``softmax(dim=-1)``, ``einsum('b h i
j, b h j d -> b h i d')``, ``rearrange(out, 'b h n d -> b n (h d)')``, ``out * gating(x).sigmoid()``, ``to_out``.
(The file's ``init_zero_(to_out)`` and the gate's constant init are left to PyTorch's defaults: zeroed, the block
would be an identity.)

Bugs: ``ingoing-folded-back-as-rows``: the column attention unfolds with the row's ``'(b h) w d -> b h w d'`` (the
pair is square, so ``((b w), h, d)`` reads as ``((b h), w, d)`` and the update lands transposed: the update of
edge (i, j) added to edge (j, i)); ``edges-repeat-outer``: ``repeat(attn_bias, 'b h i j -> (x b) h i j')`` while
the input was folded batch-major ``(b h)`` / ``(b w)``: the rows of structure 0 read structure ``(r mod b)``'s
bias; ``gate-split-d-h``: the gate applied per head before the merge, split ``'b n (d h) -> b h n d'`` (the
merge is ``(h d)``: head h, feature k gated by feature ``k·H + h`` of the gate). Twin: ``gate-before-merge``: the
gate split ``'b n (h d) -> b h n d'`` and applied before the merge (the same numbers)."""

import sys

import torch
from einops import rearrange, repeat
from einops.layers.torch import Rearrange
from torch import einsum, nn


def exists(val):
    return val is not None


class Attention(nn.Module):
    def __init__(self, dim, heads=8, dim_head=64, bug=""):
        super().__init__()
        inner_dim = dim_head * heads
        self.heads, self.scale, self.bug = heads, dim_head ** -0.5, bug
        self.to_q = nn.Linear(dim, inner_dim, bias=False)
        self.to_kv = nn.Linear(dim, inner_dim * 2, bias=False)
        self.to_out = nn.Linear(inner_dim, dim)
        self.gating = nn.Linear(dim, inner_dim)

    def forward(self, x, mask=None, attn_bias=None):
        h = self.heads
        q, k, v = (self.to_q(x), *self.to_kv(x).chunk(2, dim=-1))
        q, k, v = map(lambda t: rearrange(t, "b n (h d) -> b h n d", h=h), (q, k, v))   # (b·x, H, n, d_k)
        q = q * self.scale
        dots = einsum("b h i d, b h j d -> b h i j", q, k)                          # (b·x, H, n, n)
        if exists(attn_bias):
            dots = dots + attn_bias
        if exists(mask):
            mask_value = -torch.finfo(dots.dtype).max
            mask = mask[:, None, :, None] * mask[:, None, None, :]                   # (b·x, 1, n, n)
            dots = dots.masked_fill(~mask, mask_value)
        attn = dots.softmax(dim=-1)
        out = einsum("b h i j, b h j d -> b h i d", attn, v)                         # (b·x, H, n, d_k)
        gates = self.gating(x)
        if self.bug == "gate-split-d-h":
            out = out * rearrange(gates, "b n (d h) -> b h n d", h=h).sigmoid()      # (b·x, H, n, d_k)
            return self.to_out(rearrange(out, "b h n d -> b n (h d)"))
        if self.bug == "gate-before-merge":
            out = out * rearrange(gates, "b n (h d) -> b h n d", h=h).sigmoid()      # (b·x, H, n, d_k)
            return self.to_out(rearrange(out, "b h n d -> b n (h d)"))
        out = rearrange(out, "b h n d -> b n (h d)")                                 # (b·x, n, D)
        out = out * gates.sigmoid()
        return self.to_out(out)


class AxialAttention(nn.Module):
    def __init__(self, dim, heads, dim_head, row_attn=True, col_attn=True, accept_edges=False, bug=""):
        super().__init__()
        self.row_attn, self.col_attn, self.bug = row_attn, col_attn, bug
        self.norm = nn.LayerNorm(dim)
        self.attn = Attention(dim=dim, heads=heads, dim_head=dim_head, bug=bug)
        self.edges_to_attn_bias = nn.Sequential(
            nn.Linear(dim, heads, bias=False),
            Rearrange("b i j h -> b h i j"),
        ) if accept_edges else None

    def forward(self, x, edges=None, mask=None):
        b, h, w, d = x.shape
        x = self.norm(x)
        if self.col_attn:
            axial_dim = w
            mask_fold_axial_eq = "b h w -> (b w) h"
            input_fold_eq = "b h w d -> (b w) h d"
            output_fold_eq = "(b w) h d -> b h w d"
            if self.bug == "ingoing-folded-back-as-rows":
                output_fold_eq = "(b h) w d -> b h w d"
        else:
            axial_dim = h
            mask_fold_axial_eq = "b h w -> (b h) w"
            input_fold_eq = "b h w d -> (b h) w d"
            output_fold_eq = "(b h) w d -> b h w d"
        x = rearrange(x, input_fold_eq)                                              # (b·x, n, d)
        if exists(mask):
            mask = rearrange(mask, mask_fold_axial_eq)                               # (b·x, n)
        attn_bias = None
        if exists(self.edges_to_attn_bias) and exists(edges):
            attn_bias = self.edges_to_attn_bias(edges)                               # (b, H, i, j)
            if self.bug == "edges-repeat-outer":
                attn_bias = repeat(attn_bias, "b h i j -> (x b) h i j", x=axial_dim)
            else:
                attn_bias = repeat(attn_bias, "b h i j -> (b x) h i j", x=axial_dim)   # (b·x, H, i, j)
        out = self.attn(x, mask=mask, attn_bias=attn_bias)
        return rearrange(out, output_fold_eq, h=h, w=w)                              # (b, h, w, d)


class PairwiseAttentionBlock(nn.Module):
    def __init__(self, dim, heads, dim_head, bug=""):
        super().__init__()
        self.triangle_attention_outgoing = AxialAttention(dim, heads, dim_head, row_attn=True, col_attn=False,
                                                          accept_edges=True, bug=bug)
        self.triangle_attention_ingoing = AxialAttention(dim, heads, dim_head, row_attn=False, col_attn=True,
                                                         accept_edges=True, bug=bug)

    def forward(self, x, mask=None):
        x = self.triangle_attention_outgoing(x, edges=x, mask=mask) + x
        return self.triangle_attention_ingoing(x, edges=x, mask=mask) + x


BUGS = ("ingoing-folded-back-as-rows", "edges-repeat-outer", "gate-split-d-h")
TWINS = ("gate-before-merge",)
DIMS = ("B=2 T=5 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


def build(bug="", B=2, T=5, D=32, H=4):  # noqa: N803
    """The pair representation of ``B`` structures of ``T`` residues at width ``D``; the last structure's last
    two residues padded (the pair mask the outer product of the residue mask, as ``Alphafold2.forward``'s)."""
    torch.manual_seed(0)
    seq_mask = torch.ones(B, T, dtype=torch.bool)
    seq_mask[-1, -2:] = False
    mask = seq_mask[:, :, None] & seq_mask[:, None, :]                               # (B, T, T)
    return PairwiseAttentionBlock(D, H, D // H, bug).eval(), (torch.randn(B, T, T, D), mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
