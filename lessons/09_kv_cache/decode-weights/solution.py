"""Reference solution for decode-weights."""

import math

import torch


def decode_weights(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, 1, T+1)
    return torch.softmax(scores, dim=-1)                   # (B, H, 1, T+1): the newest token sees every key
