"""Names its input explicitly with shapetrace.name, so T = H = 8 is not ambiguous (tests/app/test_runner.py)."""

import shapetrace
import torch

B, T, H, d_k = 2, 8, 8, 8
x = shapetrace.name(torch.randn(B, T, H * d_k), "B T D")              # (B, T, D)
q = x.view(B, T, H, d_k).transpose(1, 2)                               # (B, H, T, d_k)
scores = q @ q.transpose(-2, -1)                                       # (B, H, T, T)
