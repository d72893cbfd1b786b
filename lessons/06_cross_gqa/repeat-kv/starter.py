"""Exercise repeat-kv: [B, H_kv, T, d_k] -> [B, H_kv * n_rep, T, d_k]."""

import torch


def repeat_kv(kv: torch.Tensor, n_rep: int) -> torch.Tensor:
    return kv.repeat(1, n_rep, 1, 1)                       # (B, H, T, d_k)?
