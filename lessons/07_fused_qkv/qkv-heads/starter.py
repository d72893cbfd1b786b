"""Exercise qkv-heads: [B, T, 3*D] -> [3, B, H, T, d_k]."""

import torch


def split_qkv(qkv: torch.Tensor, heads: int) -> torch.Tensor:
    B, T, D3 = qkv.shape                                   # (B, T, 3*D)
    d_k = D3 // 3 // heads
    parts = qkv.reshape(B, T, heads, 3, d_k)               # (B, T, H, 3, d_k)?
    return parts.permute(3, 0, 2, 1, 4)                    # (3, B, H, T, d_k)
