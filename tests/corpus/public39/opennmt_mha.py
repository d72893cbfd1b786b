"""OpenNMT/OpenNMT-py, onmt/modules/multi_headed_attn.py (v3.4, ``MultiHeadedAttention``) with the encoder layer of
onmt/encoders/transformer.py (``TransformerEncoderLayer``): three ``nn.Linear`` of ``model_dim``, the nested
helpers ``shape`` (``x.view(B, -1, H, d).transpose(1, 2)``) and ``unshape`` (``x.transpose(1, 2).contiguous()
.view(B, -1, H * d)``), the query scaled before the product (``query / math.sqrt(dim_per_head)``), the padding
mask ``[B, 1, T_k]`` (``~sequence_mask(src_len).unsqueeze(1)``) ``unsqueeze(1)``-ed over the heads and filled with
``-1e18``, ``softmax(scores.float(), dim=-1)``, dropout, ``final_linear``; pre-norm layer with a residual.

Bugs: ``unshape-without-transpose``: ``unshape`` written as ``x.contiguous().view(B, -1, H * d)`` (the
transpose back forgotten: heads and tokens mixed; the slip of readers porting the helper, cf. OpenNMT-py
discussions of custom attention layers); ``mask-unsqueezed-last``: the ``[B, 1, T_k]`` pad mask unsqueezed at
``-1`` (``[B, 1, T_k, 1]``) so it masks query rows instead of key columns (broadcasts only where T_q = T_k, as in
self-attention: the natural slip)."""

import math
import sys

import torch
from torch import nn


def sequence_mask(lengths, max_len):
    return torch.arange(0, max_len, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)


class MultiHeadedAttention(nn.Module):
    def __init__(self, head_count, model_dim, dropout=0.0, bug=""):
        super().__init__()
        self.dim_per_head = model_dim // head_count
        self.head_count, self.model_dim, self.bug = head_count, model_dim, bug
        self.linear_keys = nn.Linear(model_dim, model_dim)
        self.linear_values = nn.Linear(model_dim, model_dim)
        self.linear_query = nn.Linear(model_dim, model_dim)
        self.softmax = nn.Softmax(dim=-1)
        self.dropout = nn.Dropout(dropout)
        self.final_linear = nn.Linear(model_dim, model_dim)

    def forward(self, key, value, query, mask=None):
        batch_size = key.size(0)
        dim_per_head, head_count = self.dim_per_head, self.head_count

        def shape(x):
            return x.view(batch_size, -1, head_count, dim_per_head).transpose(1, 2)

        def unshape(x):
            if self.bug == "unshape-without-transpose":
                return x.contiguous().view(batch_size, -1, head_count * dim_per_head)
            return x.transpose(1, 2).contiguous().view(batch_size, -1, head_count * dim_per_head)

        key = shape(self.linear_keys(key))
        value = shape(self.linear_values(value))
        query = shape(self.linear_query(query))
        query = query / math.sqrt(dim_per_head)
        scores = torch.matmul(query, key.transpose(2, 3))
        if mask is not None:
            mask = mask.unsqueeze(-1) if self.bug == "mask-unsqueezed-last" else mask.unsqueeze(1)
            scores = scores.masked_fill(mask, -1e18)
        attn = self.softmax(scores.float()).to(query.dtype)
        drop_attn = self.dropout(attn)
        context = unshape(torch.matmul(drop_attn, value))
        return self.final_linear(context)


class TransformerEncoderLayer(nn.Module):
    def __init__(self, d_model, heads, bug=""):
        super().__init__()
        self.self_attn = MultiHeadedAttention(heads, d_model, bug=bug)
        self.layer_norm = nn.LayerNorm(d_model, eps=1e-6)

    def forward(self, inputs, mask):
        input_norm = self.layer_norm(inputs)
        context = self.self_attn(input_norm, input_norm, input_norm, mask=mask)
        return context + inputs


class Encoder(nn.Module):
    def __init__(self, d_model, heads, bug=""):
        super().__init__()
        self.layer = TransformerEncoderLayer(d_model, heads, bug)

    def forward(self, src, src_len):
        mask = ~sequence_mask(src_len, src.size(1)).unsqueeze(1)   # [B, 1, T]
        return self.layer(src, mask)


BUGS = ("unshape-without-transpose", "mask-unsqueezed-last")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    model = Encoder(D, H, bug).eval()
    return model, (torch.randn(B, T, D), torch.tensor([T - 2 * (i % 2) for i in range(B)]))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
