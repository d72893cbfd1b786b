"""Reference solution for head-backward."""

import math

import torch


def head_backward(q, k, v, dy):
    d_k = q.shape[-1]
    s = q @ k.transpose(-2, -1) / math.sqrt(d_k)           # (T, T_k): the forward's scores
    p = torch.softmax(s, dim=-1)                           # (T, T_k): its weights, kept by autograd
    dv = p.transpose(-2, -1) @ dy                          # (T_k, d_k) = (T_k, T) @ (T, d_k)
    dp = dy @ v.transpose(-2, -1)                          # (T, T_k) = (T, d_k) @ (d_k, T_k)
    row = (dp * p).sum(dim=-1, keepdim=True)               # (T, 1): the row term
    ds = p * (dp - row) / math.sqrt(d_k)                   # (T, T_k): through softmax, scale
    dq = ds @ k                                            # (T, d_k) = (T, T_k) @ (T_k, d_k)
    dk = ds.transpose(-2, -1) @ q                          # (T_k, d_k) = (T_k, T) @ (T, d_k)
    return dq, dk, dv
