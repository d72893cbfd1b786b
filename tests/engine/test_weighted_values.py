"""shapetrace/engine/rules/weighted_values.py: attention weights that weigh the values by their query axis.

On f714c55 (main) both slips below were ``✓`` (the einsum: Grok-1's ``"...hHTt,...Thd->...thHd"`` written for
``"...hHtT,..."``, tests/corpus/public16/grok1_softcap.py values-by-queries) or ``?`` (the transposed weights:
"not proven: #3 transpose moves two axes both named T past each other"); each is now ``✗ values-by-queries``."""

from __future__ import annotations

import pytest
import torch

import shapetrace

DIMS = "B=2 T=6 D=32 H=4"


def _traced(combine):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 6, 8) for _ in range(3))
    with shapetrace.trace(dims=DIMS) as t:
        for x in (q, k, v):
            shapetrace.name(x, "B H T d_k")
        w = (q @ k.transpose(-1, -2)).softmax(-1)                          # (B, H, T_q, T_k)
        combine(w, v)
    return t


def _errors(t):
    return [(d.kind, d.event) for d in t.diagnostics if d.severity == "error"]


@pytest.mark.parametrize("combine", [
    lambda w, v: w.transpose(-1, -2) @ v,                                  # bug: weights transposed
    lambda w, v: torch.einsum("bhts,bhtd->bhsd", w, v),                    # bug: contracts the query letter
], ids=["matmul-transposed", "einsum-query-letter"])
def test_weights_summed_over_their_queries_are_an_error(combine):
    t = _traced(combine)
    assert _errors(t) == [("values-by-queries", len(t.events) - 1)]
    message = next(d.message for d in t.diagnostics if d.kind == "values-by-queries")
    assert "over their query axis (axis " in message and "keeps their key axis (axis " in message


@pytest.mark.parametrize("combine", [
    lambda w, v: w @ v,
    lambda w, v: torch.einsum("bhts,bhsd->bhtd", w, v),
], ids=["matmul", "einsum"])
def test_weights_summed_over_their_keys_are_checked_and_pass(combine):
    t = _traced(combine)
    assert _errors(t) == []
    assert t.report().verdict.line.startswith("✓ checked all 4 ops")
