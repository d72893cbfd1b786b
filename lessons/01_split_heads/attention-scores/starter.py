"""Exercise attention-scores: q [B, H, T, d_k], k [B, H, T, d_k] -> scores [B, H, T, T]."""

import math

import torch


def attention_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    d_k = q.shape[-1]
    k_t = k.transpose(1, 2)                        # (B, H, d_k, T)?
    return q @ k_t / math.sqrt(d_k)                # (B, H, T, T)
