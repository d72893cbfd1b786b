"""engine/infer/corrections.py: an ambiguous input's guess yields to a use, never to a use made from itself.

At B = T = S = 4 a sequence-first ``[T, B, D]`` input fits ``[B, T, D]`` too. A later broadcast may decide the
guess (a fresh mask lined up with the scores), but a residual ``tgt + f(tgt)`` does not: the names of ``f(tgt)``
came from ``tgt``'s own guess and the other inputs' guesses. On f1b5d62 the residual pinned the input with those
names, so the input left the readings of equal sizes (:mod:`shapetrace.engine.readings`) and DAB-DETR's correct
cross-attention (tests/corpus/public40/dab_detr_cross.py, four sequence-first inputs) was ``✗`` with
``join-mismatch``, ``attends-over-batch`` and ``batch-mismatch`` at equal sizes (both tests below fail there).
"""

from __future__ import annotations

import torch

import shapetrace
from shapetrace.engine.infer.corrections import corrections
from tests.corpus.helpers import traced_build, verdict_line
from tests.corpus.public40 import dab_detr_cross


def test_a_sum_does_not_pin_the_input_its_other_operand_was_made_from():
    """``x + x.transpose(0, 1)`` at B = T: the transpose's names are the guess's own, swapped; on f1b5d62 they
    pinned ``x`` as ``[T, B, D]``."""
    with torch.no_grad(), shapetrace.trace(dims="B=4 T=4 D=32") as t:
        x = torch.randn(4, 4, 32)
        _ = x + x.transpose(0, 1)
    inference = t._inferred()
    entered = [n for n, facts in enumerate(inference.capture.nodes) if facts.entered and not facts.parameter]
    assert entered and entered[0] in inference.ambiguous
    assert entered[0] not in corrections(inference)


def test_dab_detr_correct_cross_attention_is_not_an_error_at_equal_sizes():
    t = traced_build(dab_detr_cross, "", "B=4 T=4 S=4 D=32 H=4")
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == []
    assert verdict_line(t).startswith("? nothing was checked: no axis could be named")
