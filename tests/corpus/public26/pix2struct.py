"""huggingface/transformers, src/transformers/models/pix2struct/modeling_pix2struct.py (v4.40,
``Pix2StructVisionEmbeddings``, ``Pix2StructVisionAttention``, ``Pix2StructVisionModel.forward``): variable-resolution
patches arrive flattened ``(B, T, 2 + P)``, their first two features the patch's row and column ids; the patch
features projected by ``patch_projection``; ``row_embedder(row_indices)`` and ``column_embedder(col_indices)`` added;
the attention mask made from the patches (``flattened_patches.sum(-1) != 0``: an all-zero patch is padding); the
T5-style attention without scaling: ``query``/``key``/``value`` each ``view(B, -1, H, d).transpose(1, 2)``;
``scores = matmul(q, k.transpose(3, 2))``; a zero ``position_bias`` plus the mask ``(1 - mask[:, None, None, :]) *
finfo.min``; ``softmax(scores.float(), dim=-1)``; ``matmul`` with v, ``transpose(1, 2).contiguous().view(B, -1,
D)``, ``output``.

Bugs: ``mask-after-softmax``: the position bias (the padding mask) added to the probabilities after the softmax
(the slip of ports that move the bias below the normalisation: padded patches keep their weight and the rows no
longer sum to one where the bias is added); ``mask-on-queries``: the mask widened ``mask[:, None, :, None]``
(padding set on the query rows, the padded keys still read by every patch)."""

import sys

import torch
from torch import nn


class Pix2StructVisionEmbeddings(nn.Module):
    def __init__(self, patch_dim, dim, seq_len):
        super().__init__()
        self.patch_projection = nn.Linear(patch_dim, dim)
        self.row_embedder = nn.Embedding(seq_len, dim)
        self.column_embedder = nn.Embedding(seq_len, dim)

    def forward(self, flattened_patches):                                           # (B, T, 2 + P)
        row_indices = flattened_patches[:, :, 0].long()
        col_indices = flattened_patches[:, :, 1].long()
        flattened_patches = flattened_patches[:, :, 2:]
        embeddings = self.patch_projection(flattened_patches)
        embeddings = embeddings + self.row_embedder(row_indices) + self.column_embedder(col_indices)
        return embeddings


class Pix2StructVisionAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.n_heads, self.key_value_proj_dim, self.bug = heads, dim // heads, bug
        self.query = nn.Linear(dim, dim, bias=False)
        self.key = nn.Linear(dim, dim, bias=False)
        self.value = nn.Linear(dim, dim, bias=False)
        self.output = nn.Linear(dim, dim, bias=False)

    def forward(self, hidden_states, attention_mask):
        batch_size, seq_length = hidden_states.shape[:2]

        def to_projection_shape(states):
            return states.contiguous().view(batch_size, -1, self.n_heads, self.key_value_proj_dim).transpose(1, 2)

        query_states = to_projection_shape(self.query(hidden_states))
        key_states = to_projection_shape(self.key(hidden_states))
        value_states = to_projection_shape(self.value(hidden_states))
        scores = torch.matmul(query_states, key_states.transpose(3, 2))
        position_bias = torch.zeros((1, self.n_heads, seq_length, seq_length), dtype=scores.dtype)
        if self.bug == "mask-on-queries":
            extended = attention_mask[:, None, :, None]
        else:
            extended = attention_mask[:, None, None, :]
        position_bias = position_bias + (1 - extended.to(scores.dtype)) * torch.finfo(scores.dtype).min
        if self.bug == "mask-after-softmax":
            attn_weights = nn.functional.softmax(scores.float(), dim=-1).type_as(scores)
            attn_weights = attn_weights + position_bias.clamp(min=-1.0)
        else:
            scores = scores + position_bias
            attn_weights = nn.functional.softmax(scores.float(), dim=-1).type_as(scores)
        attn_output = torch.matmul(attn_weights, value_states)
        inner_dim = self.n_heads * self.key_value_proj_dim
        attn_output = attn_output.transpose(1, 2).contiguous().view(batch_size, -1, inner_dim)
        return self.output(attn_output)


class Pix2StructVisionModel(nn.Module):
    def __init__(self, patch_dim, dim, heads, seq_len, bug=""):
        super().__init__()
        self.embeddings = Pix2StructVisionEmbeddings(patch_dim, dim, seq_len)
        self.pre_attention_layer_norm = nn.LayerNorm(dim)
        self.attention = Pix2StructVisionAttention(dim, heads, bug)

    def forward(self, flattened_patches):
        attention_mask = (flattened_patches.sum(dim=-1) != 0).float()               # (B, T)
        hidden_states = self.embeddings(flattened_patches)
        return hidden_states + self.attention(self.pre_attention_layer_norm(hidden_states), attention_mask)


BUGS = ("mask-after-softmax", "mask-on-queries")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 P=12",)


def patches(B, T, P, columns=3):
    """Patches of a ``rows x columns`` grid, row-major, ids from 1; the second image's last row padding."""
    torch.manual_seed(0)
    flat = torch.randn(B, T, 2 + P)
    ids = torch.arange(T)
    flat[:, :, 0], flat[:, :, 1] = (ids // columns + 1).float(), (ids % columns + 1).float()
    flat[1, T - columns:] = 0.0
    return flat


def build(bug="", B=2, T=6, D=32, H=4, P=12):
    torch.manual_seed(0)
    return Pix2StructVisionModel(P, D, H, T + 2, bug).eval(), (patches(B, T, P),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
