"""Exercise padding-mask: scores [B, H, T, T], keep [B, T] -> weights."""

import torch


def padded_weights(scores: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    pad = ~keep[:, None, :, None]                          # (B, 1, T, 1)
    masked = scores.masked_fill(pad, float("-inf"))        # (B, H, T, T_k)
    return torch.softmax(masked, dim=-1)                   # (B, H, T, T_k)
