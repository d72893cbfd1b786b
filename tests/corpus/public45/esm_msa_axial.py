"""facebookresearch/esm, esm/axial_attention.py (``RowSelfAttention``, ``ColumnSelfAttention``, commit 04ada61)
and esm/modules.py (``AxialTransformerLayer``): the MSA Transformer's input ``x`` is ``(R, C, B, D)`` (R aligned
rows, C columns = residues, batch third); row attention is *tied*: ``q``/``k`` viewed ``(R, C, B, H, d)``, ``q *=
scaling`` with ``align_scaling = head_dim ** -0.5 / sqrt(num_rows)``, padded positions zeroed by ``q *= 1 -
mask.permute(1, 2, 0).unsqueeze(3).unsqueeze(4)``, one map for all rows ``einsum("rinhd,rjnhd->hnij")`` (summed
over r), ``masked_fill(mask[:, 0].unsqueeze(0).unsqueeze(2), -10000)``, ``softmax(-1)``, ``einsum("hnij,rjnhd->
rinhd", probs, v)``, ``view(R, C, B, D)``, ``out_proj``; column attention ``einsum("icnhd,jcnhd->hcnij")``, the
mask ``permute(2, 0, 1).unsqueeze(0).unsqueeze(3)``, ``einsum("hcnij,jcnhd->icnhd")``. Here R is S (rows), C is T
(residues).

Bugs: ``update-over-queries``: the row update ``einsum("hnij,rinhd->rjnhd", probs, v)`` (i and j swapped on v and
the output: each output column sums the probabilities over its *queries*; C = C, so every shape agrees);
``column-mask-permuted``: the column attention's key mask ``permute(2, 0, 1)`` written ``permute(1, 0, 2)``
``(R, B, C)`` then viewed into ``(1, C, B, 1, R)`` by ``reshape`` (the padding of another residue and batch
masks each key row)."""

import sys

import torch
from torch import nn


class RowSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def align_scaling(self, q):
        return self.scaling / q.size(0) ** 0.5

    def forward(self, x, padding_mask):                                             # (R, C, B, D), (B, R, C)
        num_rows, num_cols, batch_size, embed_dim = x.size()
        q = self.q_proj(x).view(num_rows, num_cols, batch_size, self.num_heads, self.head_dim)  # (R, C, B, H, d)
        k = self.k_proj(x).view(num_rows, num_cols, batch_size, self.num_heads, self.head_dim)  # (R, C, B, H, d)
        q = q * self.align_scaling(x)
        q = q * (1 - padding_mask.permute(1, 2, 0).unsqueeze(3).unsqueeze(4).to(q))  # (R, C, B, 1, 1)
        attn_weights = torch.einsum("rinhd,rjnhd->hnij", q, k)                       # (H, B, C, C)
        attn_weights = attn_weights.masked_fill(padding_mask[:, 0].unsqueeze(0).unsqueeze(2).bool(), -10000)
        attn_probs = attn_weights.softmax(-1)
        v = self.v_proj(x).view(num_rows, num_cols, batch_size, self.num_heads, self.head_dim)  # (R, C, B, H, d)
        if self.bug == "update-over-queries":
            context = torch.einsum("hnij,rinhd->rjnhd", attn_probs, v)               # (R, C, B, H, d)
        else:
            context = torch.einsum("hnij,rjnhd->rinhd", attn_probs, v)               # (R, C, B, H, d)
        context = context.contiguous().view(num_rows, num_cols, batch_size, embed_dim)  # (R, C, B, D)
        return self.out_proj(context)


class ColumnSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x, padding_mask):                                             # (R, C, B, D), (B, R, C)
        num_rows, num_cols, batch_size, embed_dim = x.size()
        q = self.q_proj(x).view(num_rows, num_cols, batch_size, self.num_heads, self.head_dim)  # (R, C, B, H, d)
        k = self.k_proj(x).view(num_rows, num_cols, batch_size, self.num_heads, self.head_dim)  # (R, C, B, H, d)
        v = self.v_proj(x).view(num_rows, num_cols, batch_size, self.num_heads, self.head_dim)  # (R, C, B, H, d)
        q = q * self.scaling
        attn_weights = torch.einsum("icnhd,jcnhd->hcnij", q, k)                      # (H, C, B, R, R)
        if self.bug == "column-mask-permuted":
            key_mask = padding_mask.permute(1, 0, 2).reshape(1, num_cols, batch_size, 1, num_rows)  # (1, C, B, 1, R)
        else:
            key_mask = padding_mask.permute(2, 0, 1).unsqueeze(0).unsqueeze(3)      # (1, C, B, 1, R)
        attn_weights = attn_weights.masked_fill(key_mask.bool(), -10000)
        attn_probs = attn_weights.softmax(-1)
        context = torch.einsum("hcnij,jcnhd->icnhd", attn_probs, v)                  # (R, C, B, H, d)
        context = context.contiguous().view(num_rows, num_cols, batch_size, embed_dim)  # (R, C, B, D)
        return self.out_proj(context)


class AxialLayer(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.row = RowSelfAttention(dim, heads, bug)
        self.col = ColumnSelfAttention(dim, heads, bug)
        self.norm_row, self.norm_col = nn.LayerNorm(dim), nn.LayerNorm(dim)

    def forward(self, tokens, padding_mask):                                        # (B, R, C, D), (B, R, C)
        x = tokens.permute(1, 2, 0, 3)                                               # (R, C, B, D)
        x = x + self.row(self.norm_row(x), padding_mask)
        x = x + self.col(self.norm_col(x), padding_mask)
        return x.permute(2, 0, 1, 3)                                                 # (B, R, C, D)


BUGS = ("update-over-queries", "column-mask-permuted")
TWINS = ()
DIMS = ("B=2 S=3 T=5 D=32 H=4",)
EQUAL = {"B=2 S=3 T=5 D=32 H=4": "B=4 S=4 T=4 D=32 H=4"}


def build(bug="", B=2, S=3, T=5, D=32, H=4):
    torch.manual_seed(0)
    padding_mask = torch.zeros(B, S, T)
    padding_mask[-1, :, -1] = 1.0                                                   # the last batch's residue padded
    return AxialLayer(D, H, bug).eval(), (torch.randn(B, S, T, D), padding_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
