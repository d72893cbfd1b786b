"""Exercise safe-softmax: like padding-mask, but never NaN."""

import torch


def safe_padded_weights(scores: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    pad = ~keep[:, None, None, :]                          # (B, 1, 1, T_k)
    masked = scores.masked_fill(pad, float("-inf"))        # (B, H, T, T_k)
    return torch.softmax(masked, dim=-1)                   # (B, H, T, T_k)
