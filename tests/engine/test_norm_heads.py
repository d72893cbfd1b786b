"""A norm across the heads of each token (shapetrace/engine/rules/norm_heads.py): KellerJordan/modded-nanogpt
normalises q and k per head, ``F.rms_norm(x, (x.size(-1),))``; with the normalised shape taken as the last two
sizes, ``x.shape[-2:]`` on ``[B, T, H, d_k]``, each token is normalised across all its heads
(tests/corpus/public14/modded_nanogpt.py, norm-over-heads). The same numbers as a norm over D before the split
(OLMo 2's q/k norm), so a note that leaves ``?``: on 01c874a, once the file's rotary table had its names, the bug
was ``✓``."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

import shapetrace


def _normed(shape_of):
    q = torch.randn(2, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(q, "B T D")
        heads = q.view(2, 6, 4, 8)                                                 # (B, T, H, d_k)
        F.rms_norm(heads, shape_of(heads))
    return t


def test_a_norm_across_the_heads_is_a_note_that_leaves_the_verdict_unproven():
    t = _normed(lambda x: x.shape[-2:])
    assert [(d.severity, d.kind) for d in t.diagnostics] == [("note", "norm-across-heads")]
    assert t.diagnostics[0].message == (
        "rms_norm #1 normalises [B=2, T=6, H=4, d_k=8] along H, d_k together: one norm across the 4 heads of each "
        "token, not one per head. A norm over D before the split computes the same (OLMo 2's q/k norm); a per-head "
        "norm takes the last axis alone.")
    assert t.report().verdict.mark == "?"


@pytest.mark.parametrize("shape_of", [lambda x: (x.size(-1),), lambda x: x.shape[-1:]])
def test_a_norm_per_head_is_silent(shape_of):
    t = _normed(shape_of)
    assert [d.kind for d in t.diagnostics] == []
    assert t.report().verdict.mark == "✓"
