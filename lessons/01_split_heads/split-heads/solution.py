"""Reference solution for split-heads."""

import torch


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    B, T, D = x.shape                              # (B, T, D)
    d_k = D // heads
    x = x.view(B, T, heads, d_k)                   # (B, T, H, d_k)
    return x.transpose(1, 2)                       # (B, H, T, d_k)
