"""A whole nn.TransformerEncoderLayer, batch-first (used by tests/engine/test_thirdparty.py)."""

import torch
from torch import nn

torch.manual_seed(0)
layer = nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=1024, batch_first=True).eval()
with torch.no_grad():
    out = layer(torch.randn(2, 6, 512))                                  # (B, T, D)
print(tuple(out.shape))
