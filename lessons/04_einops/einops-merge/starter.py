"""Exercise einops-merge: [B, H, T, d_k] -> [B, T, D] with einops."""

import torch
from einops import rearrange


def merge_heads(y: torch.Tensor) -> torch.Tensor:
    return rearrange(y, "b h t d -> b t (d h)")    # (B, T, D)?
