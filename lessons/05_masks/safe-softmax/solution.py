"""Reference solution for safe-softmax."""

import torch


def safe_padded_weights(scores: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    pad = ~keep[:, None, None, :]                          # (B, 1, 1, T_k)
    masked = scores.masked_fill(pad, float("-inf"))        # (B, H, T, T_k)
    weights = torch.softmax(masked, dim=-1)                # (B, H, T, T_k)
    return weights.masked_fill(pad, 0.0)                   # (B, H, T, T_k)
