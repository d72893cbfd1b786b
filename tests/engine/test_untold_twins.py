"""A softmax along one of two token axes of one name that no product told apart
(shapetrace/engine/untold_twins.py): ``einsum("bthd,bshd->bhst", q, k)`` (public18 phi2's ``scores-transposed``)
and Keras's ``einsum("aecd,abcd->acbe", key, query)`` are one computation with the projections' roles
exchanged; with the einsum's axes left ``query-or-key`` where its operands' order and layout disagree, the
softmax over their last axis is not checked by names: ``?``, never ``✓``. On 51f5266 the first read ``✗
softmax-wrong-axis`` (and Keras's correct layer the same, a false error); with the einsum fix alone it read
``✓`` (this test fails on both). The usual ``bhts`` scores stay ``✓``."""

from __future__ import annotations

import torch

import shapetrace


def _verdict(scores_eq):
    x = torch.randn(2, 5, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=5 D=8 H=2") as t:
        shapetrace.name(x, "B T D")
        q = x.view(2, 5, 2, 4)                                          # (B, T, H, d_k)
        k = (x * 2).view(2, 5, 2, 4)                                    # (B, T, H, d_k)
        attn = torch.einsum(scores_eq, q, k).softmax(dim=-1)            # (B, H, T, T)
        torch.einsum("bhts,bshd->bthd", attn, q)                        # (B, T, H, d_k)
    return t.report().verdict.line[0], [d.kind for d in t.diagnostics if d.severity == "error"]


def test_softmax_over_scores_whose_keys_no_product_told_is_unsure():
    assert _verdict("bthd,bshd->bhst") == ("?", [])


def test_usual_scores_stay_checked():
    assert _verdict("bthd,bshd->bhts") == ("✓", [])
