"""A tensor the model was given that none of its ops read (shapetrace/engine/unread.py,
rules/unread.py): an ``input-unread`` note, and ``?`` where the run was otherwise ``✓``.

Fails on main (46d9423.. 8110233): fairseq issue #318's decoder layer that never hands the encoder's padding
mask to its encoder attention was ``✓ checked all 34 ops`` there (tests/corpus/reports2/fairseq_cross_padding)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

import shapetrace
from shapetrace.engine.kinds import Kind
from tests.corpus.helpers import traced_build, verdict_line
from tests.corpus.reports2 import fairseq_cross_padding

DIMS = "B=2 T=6 D=32"   # (one head: the scale 1/√D is right)


class PaddedAttention(nn.Module):
    """One head over padded keys; ``use_mask=False`` forgets the mask it is given."""

    def __init__(self, use_mask: bool = True) -> None:
        super().__init__()
        self.q, self.k, self.v = (nn.Linear(32, 32) for _ in range(3))
        self.use_mask = use_mask

    def forward(self, x, key_padding_mask):
        scores = self.q(x) @ self.k(x).transpose(1, 2) / math.sqrt(32)          # (B, T, T)
        if self.use_mask:
            scores = scores.masked_fill(key_padding_mask[:, None, :], float("-inf"))
        return F.softmax(scores, dim=-1) @ self.v(x)                             # (B, T, D)


def _run(model, *args, **kwargs):
    torch.manual_seed(0)
    with torch.no_grad(), shapetrace.trace(dims=DIMS) as t:
        model(*args, **kwargs)
    return t


def _inputs():
    torch.manual_seed(0)
    mask = torch.zeros(2, 6, dtype=torch.bool)
    mask[1, 4:] = True
    return torch.randn(2, 6, 32), mask


def _notes(t):
    return [d for d in t.diagnostics if d.kind == Kind.INPUT_UNREAD]


def test_a_mask_given_and_never_read_is_a_note_that_leaves_a_question_mark():
    t = _run(PaddedAttention(use_mask=False).eval(), *_inputs())
    [note] = _notes(t)
    assert note.severity == "note" and note.event is None
    assert note.message.startswith("the model was given `key_padding_mask` (bool [2, 6]) and none of its ops "
                                   "read it: ")
    assert note.fix == "Pass `key_padding_mask` on to the op that needs it, or stop passing it."
    assert verdict_line(t).startswith("? checked 7 of 7 ops that could carry a layout bug; not proven: the model "
                                      "was given a tensor that none of its ops read; ")


def test_a_mask_read_is_no_note():
    t = _run(PaddedAttention().eval(), *_inputs())
    assert _notes(t) == []
    assert verdict_line(t).startswith("✓ checked all 9 ops")


def test_a_keyword_argument_is_named_by_its_keyword_and_only_the_first_outermost_call_counts():
    model, (x, mask) = PaddedAttention(use_mask=False).eval(), _inputs()
    torch.manual_seed(0)
    with torch.no_grad(), shapetrace.trace(dims=DIMS) as t:
        model(x, key_padding_mask=mask)
        PaddedAttention().eval()(x, mask)          # (a second outermost call that reads it: not asked)
    assert [n.message.split(" and ")[0] for n in _notes(t)] == ["the model was given `key_padding_mask` (bool [2, 6])"]


def test_parameters_and_the_models_own_buffers_passed_back_are_not_inputs():
    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.ones(32))
            self.register_buffer("table", torch.ones(6, 6))

        def forward(self, x, w, table):
            return x * 2

    model = Scaled()
    t = _run(model, torch.randn(2, 6, 32), model.w, model.table)
    assert _notes(t) == []


def test_fairseq_318_the_encoder_padding_mask_never_passed_on():
    """The correct layer stays ``✓``; the one that forgets the mask was ``✓`` on main and is ``?`` now."""
    dims = fairseq_cross_padding.DIMS[0]
    assert verdict_line(traced_build(fairseq_cross_padding, "", dims)).startswith("✓ checked all 39 ops")
    t = traced_build(fairseq_cross_padding, "no-encoder-mask", dims)
    assert [n.message.split(" and ")[0] for n in _notes(t)] == \
        ["the model was given `encoder_padding_mask` (bool [2, 6])"]
    assert verdict_line(t).startswith("? checked 34 of 34 ops that could carry a layout bug; not proven: the model "
                                      "was given a tensor that none of its ops read")
