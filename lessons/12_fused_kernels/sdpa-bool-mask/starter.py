"""Exercise sdpa-bool-mask: q, k, v [B, H, T, d_k], pad [B, T] (True = padding) -> [B, H, T, d_k]."""

import torch
import torch.nn.functional as F


def padded_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
    mask = pad[:, None, None, :]                           # (B, 1, 1, T_k): the padding keys
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, T, d_k)
