"""Reference solution for repeat-kv."""

import torch


def repeat_kv(kv: torch.Tensor, n_rep: int) -> torch.Tensor:
    B, H_kv, T, d_k = kv.shape                             # (B, H_kv, T, d_k)
    kv = kv[:, :, None]                                    # (B, H_kv, 1, T, d_k)
    kv = kv.expand(B, H_kv, n_rep, T, d_k)                 # (B, H_kv, n_rep, T, d_k), stride 0
    return kv.reshape(B, H_kv * n_rep, T, d_k)             # (B, H, T, d_k), copied
