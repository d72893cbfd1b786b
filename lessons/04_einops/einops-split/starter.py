"""Exercise einops-split: [B, T, D] -> [B, H, T, d_k] with einops."""

import torch
from einops import rearrange


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    return rearrange(x, "b t (d h) -> b h t d", h=heads)  # (B, H, T, d_k)?
