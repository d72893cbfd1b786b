"""The Annotated Transformer's MultiHeadedAttention: clones of four linears, masked_fill(-1e9), dropout."""

import copy
import math

import torch
from torch import nn

SIZES = [
    {"B": 2, "T": 6, "D": 32, "H": 4},
    {"B": 2, "T": 8, "D": 64, "H": 8},   # T == H == d_k
    {"B": 3, "T": 3, "D": 12, "H": 4},   # B == T == d_k
]


def clones(module, N):
    return nn.ModuleList([copy.deepcopy(module) for _ in range(N)])


def attention(query, key, value, mask=None, dropout=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)      # (B, H, T, T) [scores]
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)                         # (B, H, T, T) [masked]
    p_attn = scores.softmax(dim=-1)                                          # (B, H, T, T)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn                               # (B, H, T, d_k) [context]


class MultiHeadedAttention(nn.Module):
    def __init__(self, h, d_model, dropout=0.1):
        super().__init__()
        assert d_model % h == 0
        self.d_k = d_model // h
        self.h = h
        self.linears = clones(nn.Linear(d_model, d_model), 4)
        self.attn = None
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        if mask is not None:
            mask = mask.unsqueeze(1)                                         # (B, 1, 1, T): same mask, all heads
        nbatches = query.size(0)
        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)      # 3 x (B, H, T, d_k) [heads]
            for lin, x in zip(self.linears, (query, key, value))
        ]
        x, self.attn = attention(query, key, value, mask=mask, dropout=self.dropout)
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)  # (B, T, D) [merged]
        del query, key, value
        return self.linears[-1](x)                                           # (B, T, D)


def build(dims):
    torch.manual_seed(0)
    B, T = dims["B"], dims["T"]
    x = torch.randn(B, T, dims["D"])
    src_mask = torch.ones(B, 1, T, dtype=torch.long)                        # (B, 1, T): 1 keep, 0 pad
    src_mask[-1, :, T - 1:] = 0                                             # the last sequence is padded
    return MultiHeadedAttention(dims["H"], dims["D"]).eval(), (x, x, x, src_mask)
