"""Exercise causal-mask: scores [B, H, T, T] -> causal softmax weights."""

import torch


def causal_weights(scores: torch.Tensor) -> torch.Tensor:
    T = scores.shape[-1]
    future = torch.ones(T, T, dtype=torch.bool).triu(1)   # (T, T_k)
    scores.masked_fill_(future, float("-inf"))            # (B, H, T, T_k)
    return torch.softmax(scores, dim=-1)                  # (B, H, T, T_k)
