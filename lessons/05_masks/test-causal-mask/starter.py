"""Exercise test-causal-mask: write a test that catches a wrong causal mask.

check() receives one implementation and must raise (an assert is enough) when it is wrong.
This one checks the shape and that each row sums to 1. Run `shapetrace exercise check test-causal-mask`.
"""

import torch


def check(causal_weights):
    scores = torch.randn(2, 3, 5, 5)               # (B, H, T, T_k)
    w = causal_weights(scores)
    assert w.shape == scores.shape, f"weights have shape {tuple(w.shape)}"
    assert torch.allclose(w.sum(-1), torch.ones(2, 3, 5)), "rows do not sum to 1"
