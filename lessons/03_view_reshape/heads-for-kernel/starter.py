"""Exercise heads-for-kernel: [B, T, D] -> contiguous [B, H, T, d_k]."""

import torch


def heads_for_kernel(x: torch.Tensor, heads: int) -> torch.Tensor:
    B, T, D = x.shape                              # (B, T, D)
    q = x.view(B, T, heads, D // heads)            # (B, T, H, d_k)
    return q.transpose(1, 2)                       # (B, H, T, d_k)
