"""A product by a matrix of module parameters projects the features of its first operand (``x @ self.weight.T``,
transformers' FalconLinear); it is never the scores ``q @ kᵀ`` of an attention, whatever its query axis is named.

lib18: Falcon's decode step (one new token, ``[B, 1, D]``, its length-1 axis unnamed) read the fused q/k/v
projection ``[2, 1, 3·D]`` as scores over features (a false ``attends-over-features``); a prompt (``[B, T, D]``)
was silent only because its rows were named tokens."""

from __future__ import annotations

import torch
from torch import nn

import shapetrace

DIMS = {"B": 2, "T": 3, "D": 8, "H": 2}


class FusedProjection(nn.Module):
    """FalconLinear's way: a bare parameter matrix multiplied in with ``@``."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(24, 8))

    def forward(self, x):
        return x @ self.weight.T                      # (B, 1, 3·D)


def _kinds(fn, x):
    with torch.no_grad(), shapetrace.trace(dims=DIMS) as t:
        fn(x)
    return [(d.severity, d.kind) for d in t.diagnostics if d.severity in ("error", "warning")]


def test_a_parameter_product_on_one_new_token_is_a_projection():
    """Fails on main 51f5266: ``[('error', 'attends-over-features')]``."""
    assert _kinds(FusedProjection(), torch.randn(2, 1, 8)) == []
    assert _kinds(FusedProjection(), torch.randn(2, 3, 8)) == []      # the prompt: silent before too


def test_scores_over_features_between_activations_still_error():
    """The twin: the same one-token query multiplied by a features-by-features product of activations (keys
    summed over their tokens, ``kᵀ k``) is not a projection, and its key axis is still features."""
    q_proj, k_proj = nn.Linear(8, 8), nn.Linear(8, 8)

    def scores(x):
        q, k = q_proj(x), k_proj(x)                   # (B, 1, D)
        return (q @ (k.transpose(-2, -1) @ k)).softmax(-1)   # (B, 1, D): a softmax over features
    assert ("error", "attends-over-features") in _kinds(scores, torch.randn(2, 1, 8))
