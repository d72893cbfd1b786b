"""torch's nn.MultiheadAttention with batch_first=False (the default), correctly fed [T, B, D]."""

import torch
from torch import nn

SIZES = [
    {"B": 2, "T": 6, "D": 32, "H": 4},
    {"B": 4, "T": 4, "D": 16, "H": 4},   # B == T == H == d_k
    {"B": 3, "T": 5, "D": 10, "H": 2},   # T == d_k
]
NAMES = ("T B D",)


class Block(nn.Module):
    def __init__(self, d_model, heads):
        super().__init__()
        self.mha = nn.MultiheadAttention(d_model, heads)
        self.ff = nn.Linear(d_model, d_model)

    def forward(self, x):
        y, weights = self.mha(x, x, x)                                           # (T, B, D), (B, T, T)
        out = self.ff(y)                                                         # (T, B, D) [out]
        first_query = weights[:, 0, :]                                           # (B, T) [first_query]
        return out, first_query


def build(dims):
    torch.manual_seed(0)
    return Block(dims["D"], dims["H"]).eval(), (torch.randn(dims["T"], dims["B"], dims["D"]),)
