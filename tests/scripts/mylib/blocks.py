"""Library code: splits and merges heads (used by tests/app/test_runner.py through two_parts.py)."""

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, heads: int):
        super().__init__()
        self.heads = heads

    def forward(self, x):
        B, T, D = x.shape                                                  # (B, T, D)
        h = x.view(B, T, self.heads, D // self.heads).transpose(1, 2)      # (B, H, T, d_k)
        return h.transpose(1, 2).reshape(B, T, D)                          # (B, T, D)
