"""Reference solution for apply-rope."""

import torch


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)                            # (B, H, T, d_k/2) each
    rotated = torch.cat([-x2, x1], dim=-1)                 # (B, H, T, d_k)
    return x * cos + rotated * sin                         # (B, H, T, d_k): (T, d_k) lines up with T, d_k
