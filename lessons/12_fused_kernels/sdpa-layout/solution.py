"""Reference solution for sdpa-layout."""

import torch
import torch.nn.functional as F


def fused_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    q = q.transpose(1, 2)                                  # (B, H, T, d_k)
    k = k.transpose(1, 2)                                  # (B, H, T_k, d_k)
    v = v.transpose(1, 2)                                  # (B, H, T_k, d_k)
    out = F.scaled_dot_product_attention(q, k, v)          # (B, H, T, d_k)
    return out.transpose(1, 2)                             # (B, T, H, d_k)
