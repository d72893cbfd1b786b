"""A training-style loop that never ends (used by tests/cli/test_trace_limits.py and the README)."""

import torch

w = torch.randn(512, 512)
x = torch.randn(2, 6, 512)
while True:  # a training loop that never ends
    y = (x @ w).view(2, 6, 8, 64).transpose(1, 2)  # (B, H, T, d_k)
