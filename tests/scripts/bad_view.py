"""Merges heads with view on a transposed tensor: torch refuses (used by tests/app/test_runner.py)."""

import torch

B, T, H, d_k = 2, 6, 8, 64
y = torch.randn(B, H, T, d_k)                # (B, H, T, d_k), e.g. weights @ v
shapetrace_name = "B H T d_k"
try:
    import shapetrace
    shapetrace.name(y, shapetrace_name)
except ImportError:
    pass
merged = y.transpose(1, 2).view(B, T, H * d_k)   # (B, T, D): fails, not contiguous
