"""Reference solution for sdpa-bool-mask."""

import torch
import torch.nn.functional as F


def padded_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
    attend = ~pad[:, None, None, :]                        # (B, 1, 1, T_k): True = attend, SDPA's polarity
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attend)  # (B, H, T, d_k)
