"""Reference solution for einops-split."""

import torch
from einops import rearrange


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    return rearrange(x, "b t (h d) -> b h t d", h=heads)  # (B, H, T, d_k)
