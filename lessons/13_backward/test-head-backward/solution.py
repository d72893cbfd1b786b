"""Reference solution for test-head-backward."""

import math

import torch


def check(head_backward):
    T, T_k, d_k = 5, 7, 4                                  # d_k > 1: a missing 1/√d_k shows
    q = torch.randn(T, d_k)                                # (T, d_k)
    k, v = torch.randn(T_k, d_k), torch.randn(T_k, d_k)    # (T_k, d_k) each
    dy = torch.randn(T, d_k)                               # (T, d_k)
    with torch.enable_grad():                              # the checker runs check() under no_grad
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        a, b, c = leaves
        y = torch.softmax(a @ b.transpose(-2, -1) / math.sqrt(d_k), dim=-1) @ c  # (T, d_k)
        want = torch.autograd.grad(y, leaves, dy)
    got = head_backward(q, k, v, dy)
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        torch.testing.assert_close(g, w, msg=f"{name} differs from autograd's")
