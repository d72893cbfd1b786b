"""Reference solution for qkv-heads."""

import torch


def split_qkv(qkv: torch.Tensor, heads: int) -> torch.Tensor:
    B, T, D3 = qkv.shape                                   # (B, T, 3*D)
    d_k = D3 // 3 // heads
    parts = qkv.reshape(B, T, 3, heads, d_k)               # (B, T, 3, H, d_k)
    return parts.permute(2, 0, 3, 1, 4)                    # (3, B, H, T, d_k)
