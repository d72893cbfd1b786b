"""Reference solution for test-causal-mask."""

import torch


def check(causal_weights):
    B, H, T = 2, 3, 5
    scores = torch.randn(B, H, T, T)               # (B, H, T, T_k)
    w = causal_weights(scores)
    assert w.shape == (B, H, T, T), f"weights have shape {tuple(w.shape)}"
    assert not w.isnan().any(), "some weights are NaN"
    for i in range(T):
        for j in range(T):
            if j > i:
                assert (w[..., i, j] == 0).all(), f"query {i} attends to the later key {j}"
            else:
                assert (w[..., i, j] > 0).all(), f"query {i} cannot see key {j}"
    assert torch.allclose(w.sum(-1), torch.ones(B, H, T)), "rows do not sum to 1"
