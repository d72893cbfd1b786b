"""ALiBi attention (Press et al.): no position embedding, a per-head linear bias added to the scores."""

import math

import torch
from torch import nn

SIZES = [
    {"B": 2, "T": 6, "D": 32, "H": 4},
    {"B": 2, "T": 8, "D": 64, "H": 8},   # T == H == d_k
    {"B": 4, "T": 4, "D": 8, "H": 2},    # B == T == d_k
]


def alibi_slopes(n_heads: int) -> torch.Tensor:
    start = 2 ** (-8 / n_heads)
    return torch.tensor([start ** (i + 1) for i in range(n_heads)])


class AlibiAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.h, self.d = n_heads, d_model // n_heads
        self.q, self.k, self.v, self.o = (nn.Linear(d_model, d_model) for _ in range(4))
        self.register_buffer("slopes", alibi_slopes(n_heads), persistent=False)

    def forward(self, x):
        B, T, D = x.shape                                                        # (B, T, D)
        q = self.q(x).view(B, T, self.h, self.d).transpose(1, 2)                 # (B, H, T, d_k) [q]
        k = self.k(x).view(B, T, self.h, self.d).transpose(1, 2)                 # (B, H, T, d_k) [k]
        v = self.v(x).view(B, T, self.h, self.d).transpose(1, 2)                 # (B, H, T, d_k) [v]
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d)                     # (B, H, T, T) [scores]
        pos = torch.arange(T)
        distance = (pos[None, :] - pos[:, None]).float()                         # (T, T): j - i
        bias = self.slopes.view(self.h, 1, 1) * distance                         # (H, T, T)
        scores = scores + bias                                                   # (B, H, T, T)
        future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)      # (T, T)
        scores = scores.masked_fill(future, float("-inf"))                       # (B, H, T, T) [masked]
        y = scores.softmax(dim=-1) @ v                                           # (B, H, T, d_k) [y]
        y = y.transpose(1, 2).contiguous().view(B, T, D)                         # (B, T, D) [merged]
        return self.o(y)                                                         # (B, T, D)


def build(dims):
    torch.manual_seed(0)
    return AlibiAttention(dims["D"], dims["H"]).eval(), (torch.randn(dims["B"], dims["T"], dims["D"]),)
