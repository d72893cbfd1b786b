"""Reference solution for causal-mask."""

import torch


def causal_weights(scores: torch.Tensor) -> torch.Tensor:
    T = scores.shape[-1]
    future = torch.ones(T, T, dtype=torch.bool).triu(1)   # (T, T_k)
    masked = scores.masked_fill(future, float("-inf"))    # (B, H, T, T_k)
    return torch.softmax(masked, dim=-1)                  # (B, H, T, T_k)
