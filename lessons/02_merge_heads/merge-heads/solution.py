"""Reference solution for merge-heads."""

import torch


def merge_heads(y: torch.Tensor) -> torch.Tensor:
    B, H, T, d_k = y.shape                         # (B, H, T, d_k)
    y = y.transpose(1, 2)                          # (B, T, H, d_k)
    y = y.contiguous()                             # (B, T, H, d_k), copied
    return y.view(B, T, H * d_k)                   # (B, T, D)
