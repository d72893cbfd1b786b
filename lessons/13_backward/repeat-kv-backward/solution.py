"""Reference solution for repeat-kv-backward."""

import torch


def repeat_kv_backward(dy, n_rep):
    B, H, T, d_k = dy.shape                                # (B, H, T, d_k): H = H_kv · n_rep
    dy = dy.view(B, H // n_rep, n_rep, T, d_k)             # (B, H_kv, n_rep, T, d_k)
    return dy.sum(dim=2)                                   # (B, H_kv, T, d_k): a sum over n_rep
