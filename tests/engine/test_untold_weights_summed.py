"""Weights normalised along one of two token axes that no product told apart, then summed along the other
(shapetrace/engine/rules/weights.py, ``weights_summed_elsewhere``). Keras's ``MultiHeadAttention``
(keras/src/layers/attention/multi_head_attention.py, ``_compute_attention``: ``einsum("aecd,abcd->acbe", key,
query)``, softmax over the last axis, ``einsum("acbe,aecd->abcd", weights, value)``) splits its heads with einsums
against bare kernels ``[D, H, d_k]``, so the heads are never named and the scores' two ``T`` axes carry no query
or key role. A combination that contracts the axis the softmax did not normalise is wrong whichever axis the keys
are; on f946d52 it was ``?`` (the values, with no named features, were not recognised as values). The values are
now recognised by a kept unnamed axis of a size none of the weights' axes has; an equal size decides nothing."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import shapetrace


class KerasStyle(nn.Module):
    """Keras's attention in torch: projections by einsum against ``[D, H, d_k]`` kernels."""

    def __init__(self, D: int, H: int, combine: str):
        super().__init__()
        self.q, self.k, self.v = (nn.Parameter(torch.randn(D, H, D // H) / D ** 0.5) for _ in range(3))
        self.o = nn.Parameter(torch.randn(H, D // H, D) / D ** 0.5)
        self.combine = combine

    def forward(self, x):
        q = torch.einsum("abc,cde->abde", x, self.q)                    # (B, T, H, d_k)
        k = torch.einsum("abc,cde->abde", x, self.k)                    # (B, S, H, d_k)
        v = torch.einsum("abc,cde->abde", x, self.v)                    # (B, S, H, d_k)
        scores = torch.einsum("aecd,abcd->acbe", k, q)                  # (B, H, T, S)
        weights = scores.softmax(dim=-1)                                # (B, H, T, S)
        out = torch.einsum(self.combine, weights, v)                    # (B, T, H, d_k)
        return torch.einsum("abcd,cde->abe", out, self.o)               # (B, T, D)


RIGHT = "acbe,aecd->abcd"        # contracts e, the axis the softmax normalised
CROSSED = "acbe,abcd->aecd"      # contracts b: weights summed along the axis they were not normalised over


def _traced(combine: str, B: int, T: int, D: int, H: int):
    x = torch.randn(B, T, D)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        KerasStyle(D, H, combine)(x)
    return t


def test_weights_summed_along_the_other_untold_axis_are_an_error():
    B, T, D, H = 2, 6, 32, 4
    t = _traced(CROSSED, B, T, D, H)
    assert [(d.severity, d.kind, d.event) for d in t.diagnostics if d.severity != "note"] == \
        [("error", "softmax-wrong-axis", 4)]
    assert t.diagnostics[0].message == (
        f"softmax #4 normalises [B={B}, {H}, T={T}, T={T}] over axis 3 (T, {T} entries), but einsum #5 sums the "
        f"weighted values over another axis of them (axis 2, T, {T} entries) and keeps that one apart (axis 3, T, "
        f"{T} entries): each weighted sum runs over weights that do not sum to 1 along it.")
    assert t.report().verdict.mark == "✗"


def test_at_equal_sizes_the_crossed_sum_is_not_proven():
    """B = T = H = 4: the input ``[4, 4, 32]`` reads ``[B, T, D]`` or ``[T, B, D]``, and under the second reading
    the normalised axis is the batch's (another rule's, which says nothing here): a finding one reading makes and
    another does not is withheld, ``?``, never ``✓``."""
    t = _traced(CROSSED, 4, 4, 32, 4)
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []
    assert "a finding rests on the order of equal sizes" in t.report().verdict.line
    assert t.report().verdict.mark == "?"


@pytest.mark.parametrize(("B", "T", "D", "H"), [(2, 6, 32, 4), (4, 4, 32, 4)])
def test_weights_summed_along_their_own_axis_are_silent(B, T, D, H):
    t = _traced(RIGHT, B, T, D, H)
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []
    assert t.report().verdict.mark == "?"   # (which T axis holds the keys is still not told)


def test_values_as_wide_as_the_tokens_prove_nothing():
    """d_k = T = 8: the values' kept axis is as long as the weights' own, so it cannot tell values from a second
    matrix of weights (Nyströmformer's ``kernel @ pinv(kernel)``): no finding, ``?`` rather than ``✗``."""
    t = _traced(CROSSED, 2, 8, 32, 4)
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []
    assert t.report().verdict.mark == "?"
