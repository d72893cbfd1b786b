"""Adds a [T, T] mask built for the wrong length to [B, H, T, T] scores (used by tests/app/test_runner.py)."""

import torch

B, T, H, d_k = 2, 6, 8, 64
q = torch.randn(B, T, H * d_k).view(B, T, H, d_k).transpose(1, 2)   # (B, H, T, d_k)
scores = q @ q.transpose(-2, -1)                                     # (B, H, T, T)
mask = torch.zeros(T - 1, T - 1)                                     # (T-1, T-1): wrong length
scores = scores + mask                                               # fails: 6 vs 5
