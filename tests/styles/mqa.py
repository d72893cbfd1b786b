"""Multi-query attention: H query heads, one shared key/value head broadcast over them."""

import math

import torch
from torch import nn

SIZES = [
    {"B": 2, "T": 6, "D": 32, "H": 4},
    {"B": 2, "T": 8, "D": 64, "H": 8},   # T == H == d_k
    {"B": 2, "T": 4, "D": 8, "H": 2},    # T == d_k
]


class MultiQueryAttention(nn.Module):
    def __init__(self, d_model: int, n_head: int):
        super().__init__()
        self.n_head, self.d_head = n_head, d_model // n_head
        self.wq = nn.Linear(d_model, d_model)
        self.wkv = nn.Linear(d_model, 2 * self.d_head)   # one key head and one value head
        self.wo = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, T, D = x.shape                                                        # (B, T, D)
        q = self.wq(x).view(B, T, self.n_head, self.d_head).transpose(1, 2)      # (B, H, T, d_k) [q]
        k, v = self.wkv(x).split(self.d_head, dim=-1)                            # 2 x (B, T, d_k) [kv]
        k = k.unsqueeze(1)                                                       # (B, ?, T, d_k) [k]
        v = v.unsqueeze(1)                                                       # (B, ?, T, d_k) [v]
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)                # (B, H, T, T) [scores]
        weights = scores.softmax(dim=-1)                                         # (B, H, T, T)
        y = weights @ v                                                          # (B, H, T, d_k) [y]
        y = y.transpose(1, 2).reshape(B, T, D)                                   # (B, T, D) [merged]
        return self.wo(y)                                                        # (B, T, D)


def build(dims):
    torch.manual_seed(0)
    return MultiQueryAttention(dims["D"], dims["H"]).eval(), (torch.randn(dims["B"], dims["T"], dims["D"]),)
