"""Exercise cross-scores: q [B, T_q, D], k [B, T_k, D] -> scores [B, H, T_q, T_k]."""

import math

import torch


def cross_scores(q: torch.Tensor, k: torch.Tensor, heads: int) -> torch.Tensor:
    B, T_q, D = q.shape                                    # (B, T_q, D)
    T_k, d_k = k.shape[1], D // heads
    q_h = q.view(B, T_q, heads, d_k).transpose(1, 2)       # (B, H, T_q, d_k)
    k_h = k.view(B, T_k, heads, d_k).transpose(1, 2)       # (B, H, T_k, d_k)
    return k_h @ q_h.transpose(-2, -1) / math.sqrt(d_k)    # (B, H, T_q, T_k)?
