"""Exercise apply-rope: x [B, H, T, d_k], cos and sin [T, d_k] -> x rotated, [B, H, T, d_k]."""

import torch


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    cos = cos[:, None, :]                                  # (T, 1, d_k): one row per position, for every head
    sin = sin[:, None, :]                                  # (T, 1, d_k)
    x1, x2 = x.chunk(2, dim=-1)                            # (B, H, T, d_k/2) each
    rotated = torch.cat([-x2, x1], dim=-1)                 # (B, H, T, d_k)
    return x * cos + rotated * sin                         # (B, H, T, d_k)
