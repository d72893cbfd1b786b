"""Reference solution for attention-scores."""

import math

import torch


def attention_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    d_k = q.shape[-1]
    k_t = k.transpose(-2, -1)                      # (B, H, d_k, T)
    return q @ k_t / math.sqrt(d_k)                # (B, H, T, T)
