"""Heads split and merged with permute(0, 2, 1, 3) (used by tests/engine/test_thirdparty.py)."""

import torch
from torch import nn


class PermuteAttention(nn.Module):
    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.h, self.d = heads, d_model // heads
        self.q, self.k, self.v = (nn.Linear(d_model, d_model) for _ in range(3))

    def heads(self, t):
        B, T, _ = t.shape                                                    # (B, T, D)
        return t.reshape(B, T, self.h, self.d).permute(0, 2, 1, 3)           # (B, H, T, d_k)

    def forward(self, x):
        B, T, D = x.shape                                                    # (B, T, D)
        q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))
        scores = torch.matmul(q, k.permute(0, 1, 3, 2)) / self.d ** 0.5      # (B, H, T, T)
        out = torch.matmul(scores.softmax(-1), v)                            # (B, H, T, d_k)
        return out.permute(0, 2, 1, 3).reshape(B, T, D)                      # (B, T, D)


if __name__ == "__main__":
    print(PermuteAttention(512, 8)(torch.randn(2, 6, 512)).shape)
