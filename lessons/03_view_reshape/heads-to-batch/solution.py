"""Reference solution for heads-to-batch."""

import torch


def heads_to_batch(y: torch.Tensor) -> torch.Tensor:
    B, H, T, d_k = y.shape                         # (B, H, T, d_k)
    return y.view(B * H, T, d_k)                   # (B*H, T, d_k)
