"""F.scaled_dot_product_attention on heads split by view + transpose (used by tests/engine/test_thirdparty.py)."""

import torch
from torch.nn import functional as F

B, T, H, d_k = 2, 6, 8, 64
q, k, v = (torch.randn(B, T, H * d_k).view(B, T, H, d_k).transpose(1, 2) for _ in range(3))  # (B, H, T, d_k)
y = F.scaled_dot_product_attention(q, k, v, is_causal=True)              # (B, H, T, d_k)
out = y.transpose(1, 2).reshape(B, T, H * d_k)                           # (B, T, D)
print(tuple(out.shape))
