"""A student's own multi-head attention, the textbook way (used by tests/app/test_runner.py)."""

import math
import sys

import torch
from torch import nn


class MyAttention(nn.Module):
    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.heads, self.d_k = heads, d_model // heads
        self.q, self.k, self.v, self.o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x):
        B, T, D = x.shape                                                  # (B, T, D)
        q = self.q(x).view(B, T, self.heads, self.d_k).transpose(1, 2)     # (B, H, T, d_k)
        k = self.k(x).view(B, T, self.heads, self.d_k).transpose(1, 2)     # (B, H, T, d_k)
        v = self.v(x).view(B, T, self.heads, self.d_k).transpose(1, 2)     # (B, H, T, d_k)
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.d_k), dim=-1)  # (B, H, T, T)
        y = (w @ v).transpose(1, 2).contiguous().view(B, T, D)             # (B, T, D)
        return self.o(y)                                                   # (B, T, D)


if __name__ == "__main__":
    B, T, D, H = (int(a) for a in sys.argv[1:5]) if len(sys.argv) > 4 else (2, 6, 512, 8)
    torch.manual_seed(0)
    model = MyAttention(D, H)
    print("output shape", tuple(model(torch.randn(B, T, D)).shape))   # (B, T, D)
