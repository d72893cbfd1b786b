"""Reference solution for apply-rope."""

import torch


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    cos = cos[None, None]                                  # (1, 1, T, d_k): lined up with the tokens of x
    sin = sin[None, None]                                  # (1, 1, T, d_k)
    x1, x2 = x.chunk(2, dim=-1)                            # (B, H, T, d_k/2) each
    rotated = torch.cat([-x2, x1], dim=-1)                 # (B, H, T, d_k)
    return x * cos + rotated * sin                         # (B, H, T, d_k)
