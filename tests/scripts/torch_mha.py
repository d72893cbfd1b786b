"""torch's own nn.MultiheadAttention, seq-first and batch-first (used by tests/engine/test_thirdparty.py)."""

import sys

import torch
from torch import nn

batch_first = "--batch-first" in sys.argv
mha = nn.MultiheadAttention(512, 8, batch_first=batch_first).eval()
x = torch.randn(2, 6, 512) if batch_first else torch.randn(6, 2, 512)   # (B, T, D) or (T, B, D)
with torch.no_grad():
    y, weights = mha(x, x, x)                                             # y like x; weights (B, T, T)
print(tuple(y.shape), tuple(weights.shape))
