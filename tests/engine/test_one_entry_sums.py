"""A softmax written by hand along an axis of one entry (shapetrace/engine/rules/one_entry_sums.py):
``exp(s) / exp(s).sum(dim=-1, keepdim=True)`` on ``Dense(1)``'s ``(B, T, 1)`` scores makes every weight 1
(keras-team/keras-io pull request #1904, tests/corpus/reports30/kerasio_temporal_softmax.py). ``✓`` on main
5afe940 (no finding: only ``F.softmax`` was read for its axis); the twin that sums over the tokens stays silent,
and a kept sum of one entry that is never combined back (a squeeze written as a sum) is not judged. At
distinct sizes and at B = T = 4: names decide, never sizes."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import shapetrace

SIZES = [(3, 6), (4, 4)]


def _pool(x, dim):
    e = torch.exp(nn.Linear(x.shape[-1], 1)(x))                         # (B, T, 1)
    weights = e / e.sum(dim=dim, keepdim=True)                          # (B, T, 1)
    return (weights * x).sum(dim=1)                                     # (B, D)


def _traced(fn, B, T, D=8):
    x = torch.randn(B, T, D)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={D}") as t:
        shapetrace.name(x, "B T D")
        fn(x)
    return t


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_a_hand_written_softmax_over_one_entry_is_an_error(B, T):
    t = _traced(lambda x: _pool(x, -1), B, T)
    assert [(d.severity, d.kind, d.event) for d in t.diagnostics if d.severity != "note"] == [
        ("error", "softmax-over-one-entry", 1)]
    assert t.diagnostics[0].message.startswith(
        f"sum #1 reduces along axis 2 (no name, one entry) of [B={B}, T={T}, 1], and its result is combined back "
        "with the values it came from (#2 reads it): a normalisation over one entry makes every weight 1")
    assert t.report().verdict.mark == "✗"


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_a_hand_written_softmax_over_the_tokens_is_silent(B, T):
    t = _traced(lambda x: _pool(x, 1), B, T)
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []


def test_a_kept_sum_of_one_entry_read_on_its_own_is_silent():
    """``s.sum(-1, keepdim=True)`` never combined with anything: nothing is normalised by it."""
    t = _traced(lambda x: nn.Linear(8, 1)(x).sum(dim=-1, keepdim=True).softmax(dim=1), 3, 6)
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []
