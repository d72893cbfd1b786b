"""Reference solution for decode-weights."""

import math

import torch


def decode_weights(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)      # (B, H, 1, T+1)
    # no mask: the one query is the newest token, and the causal mask's last row hides nothing
    return torch.softmax(scores, dim=-1)                   # (B, H, 1, T+1)
