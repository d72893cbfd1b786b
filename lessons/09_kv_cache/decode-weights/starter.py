"""Exercise decode-weights: q [B, H, 1, d_k], k [B, H, T+1, d_k] -> weights [B, H, 1, T+1]."""

import math

import torch


def decode_weights(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    S = k.shape[-2]                                        # T+1 keys: the cache and the new one
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, 1, T+1)
    causal = torch.ones(S, S, dtype=torch.bool).tril()[:1]  # (1, T+1): the causal mask for one query
    scores = scores.masked_fill(~causal, float("-inf"))    # (B, H, 1, T+1)
    return torch.softmax(scores, dim=-1)                   # (B, H, 1, T+1)
