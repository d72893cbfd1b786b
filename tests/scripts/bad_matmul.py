"""Forgets to transpose k: q @ k multiplies [T, d_k] by [T, d_k] (used by tests/app/test_runner.py)."""

import torch

B, T, H, d_k = 2, 6, 8, 64
q = torch.randn(B, T, H * d_k).view(B, T, H, d_k).transpose(1, 2)   # (B, H, T, d_k)
k = torch.randn(B, T, H * d_k).view(B, T, H, d_k).transpose(1, 2)   # (B, H, T, d_k)
scores = q @ k                                                       # fails: d_k vs T
