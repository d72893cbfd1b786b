"""Exercise sdpa-layout: q, k, v [B, T, H, d_k] -> attention output [B, T, H, d_k] through SDPA."""

import torch
import torch.nn.functional as F


def fused_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v)         # (B, T, H, d_k)?
