"""Runs two ops, then raises a plain Python error (used by tests/app/test_runner.py)."""

import torch

x = torch.randn(2, 6, 512).view(2, 6, 8, 64)                           # (B, T, H, d_k)
y = x.transpose(1, 2)                                                  # (B, H, T, d_k)
raise ValueError("boom: the script gave up")
