"""Exercise head-backward: one head's dq, dk, dv from dY, by hand.

The forward was  y = softmax(q @ kᵀ / √d_k) @ v,  q [T, d_k], k and v [T_k, d_k].
Given q, k, v and dy = dL/dy [T, d_k], return (dq, dk, dv), each with its tensor's shape.
Run `shapetrace exercise check head-backward`: it compares them with autograd's on random sizes.
"""

import math

import torch


def head_backward(q, k, v, dy):
    d_k = q.shape[-1]
    s = q @ k.transpose(-2, -1) / math.sqrt(d_k)           # (T, T_k)
    p = torch.softmax(s, dim=-1)                           # (T, T_k)
    dv = p.transpose(-2, -1) @ dy                          # (T_k, d_k)
    dp = dy @ v.transpose(-2, -1)                          # (T, T_k)
    ds = p * dp / math.sqrt(d_k)                           # (T, T_k)? the grad through the softmax
    dq = ds @ k                                            # (T, d_k)
    dk = ds.transpose(-2, -1) @ q                          # (T_k, d_k)
    return dq, dk, dv
