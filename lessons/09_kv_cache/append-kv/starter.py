"""Exercise append-kv: cache [B, H_kv, T, d_k] + step [B, H_kv, 1, d_k] -> [B, H_kv, T+1, d_k]."""

import torch


def append_kv(cache: torch.Tensor, step: torch.Tensor) -> torch.Tensor:
    return torch.cat([cache, step], dim=1)                 # (B, H_kv, T+1, d_k)?
