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
                                      "was given a tensor that no tensor op read; ")


def test_a_mask_read_is_no_note():
    t = _run(PaddedAttention().eval(), *_inputs())
    assert _notes(t) == []
    assert verdict_line(t).startswith("✓ checked all 9 ops")


class LengthsLoop(nn.Module):
    """sgl-project/sglang issue #8675's torch-native backend: one request at a time, its length read by
    ``seq_lens.tolist()``; ``as_tensor=True`` also reads the lengths in a tensor op."""

    def __init__(self, as_tensor: bool = False) -> None:
        super().__init__()
        self.as_tensor = as_tensor

    def forward(self, x, seq_lens):
        out, start = [], 0
        for n in seq_lens.tolist():
            out.append(F.softmax(x[start:start + n] @ x[start:start + n].T, dim=-1) @ x[start:start + n])
            start += n
        y = torch.cat(out)                                                       # (N, D)
        return y * (seq_lens.sum() > 0) if self.as_tensor else y


def test_a_tensor_read_only_as_python_numbers_is_said_to_be_so_not_unread():
    """Fails on 54c4d61 (main ddfcef9 plus the round's files): the note said ``seq_lens`` was read by none of
    the model's ops, while ``seq_lens.tolist()`` read every value of it."""
    x, seq_lens = torch.randn(5, 8), torch.tensor([2, 3])
    with torch.no_grad(), shapetrace.trace(dims="D=8") as t:
        LengthsLoop()(x, seq_lens)
    [note] = _notes(t)
    assert note.message.startswith("the model was given `seq_lens` (int64 [2]) and read it only as Python numbers "
                                   "(`tolist`), never in a tensor op: ")
    assert "none of its ops" not in note.message and verdict_line(t).startswith("?")
    with torch.no_grad(), shapetrace.trace(dims="D=8") as t:   # (its twin: a tensor op reads it too: no note)
        LengthsLoop(as_tensor=True)(x, seq_lens)
    assert _notes(t) == []


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
                                      "was given a tensor that no tensor op read")


# -- a projection computed and bypassed (ethen8181/machine-learning issue #13) -------------------------------------


class ProjectedAttention(nn.Module):
    """One causal head with an output projection; ``bypass`` returns the projection's input (``out =
    self.o(x); return x``), ``value_head`` also returns a second projection of the same input."""

    def __init__(self, bypass: bool = False, value_head: bool = False) -> None:
        super().__init__()
        self.q, self.k, self.v, self.o, self.head = (nn.Linear(32, 32) for _ in range(5))
        self.bypass, self.value_head = bypass, value_head

    def forward(self, x):
        scores = self.q(x) @ self.k(x).transpose(1, 2) / math.sqrt(32)
        scores = scores.masked_fill(torch.ones(6, 6, dtype=torch.bool).triu(1), float("-inf"))
        merged = F.softmax(scores, dim=-1) @ self.v(x)
        projected = self.o(merged)
        y = x + (merged if self.bypass else projected)
        return (y, self.head(merged)) if self.value_head else y


def test_a_projection_whose_input_went_on_in_its_place_is_a_warning():
    """Fails on a69859d (``✓ checked all`` there): the output projection computed, never read, and its input
    added to the residual instead is ``projection-bypassed`` on that ``linear``, naming it; the same layer
    using its projection, or returning a second projection of the same input beside it (a value head), is
    ``✓`` with no finding."""
    torch.manual_seed(0)
    x = torch.randn(2, 6, 32)
    outcomes = {}
    for bypass, value_head in ((False, False), (True, False), (False, True)):
        torch.manual_seed(0)
        t = _run(ProjectedAttention(bypass, value_head).eval(), x)
        found = [d for d in t.diagnostics if d.severity in ("error", "warning")]
        outcomes[bypass, value_head] = verdict_line(t)[0], [d.kind for d in found]
        if bypass:
            linear = next(e for e in t.events if e.index == found[0].event)
            assert linear.op == "linear" and "self.o(merged)" in linear.code
            assert found[0].message.startswith(f"linear #{linear.index} (`o`: projected = self.o(merged)) computes a "
                                               "projection whose result reaches nothing the model returns (no op "
                                               "reads it, or what reads it is dropped)")
    assert outcomes == {(False, False): ("✓", []), (True, False): ("!", [Kind.PROJECTION_BYPASSED]),
                        (False, True): ("✓", [])}


def test_a_prefill_whose_output_its_caller_drops_is_no_bypass():
    """tiny-llm's prefill (tests/corpus/reports17/tinyllm_decode_offset) runs for its cache and its caller drops
    its output: that output projection's input went nowhere else, so it is not a bypass."""
    from tests.corpus.reports17 import tinyllm_decode_offset

    t = traced_build(tinyllm_decode_offset, "", tinyllm_decode_offset.DIMS[0])
    assert Kind.PROJECTION_BYPASSED not in [d.kind for d in t.diagnostics]


def test_a_mask_padded_in_front_is_told_by_its_rows_whichever_value_marks_the_pads():
    """:func:`~shapetrace.engine.unread.front_padded`: a row of one value (unpadded: that value is the real one)
    and a row of the other value then that one; right padding, a hole in a row, no unpadded row, three values or
    one row are not."""
    from shapetrace.engine.unread import front_padded

    assert front_padded(torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]]))
    assert front_padded(torch.tensor([[True, True, False, False], [False, False, False, False]]))   # True: pads
    assert front_padded(torch.tensor([[0.0, 1.0, 1.0], [1.0, 1.0, 1.0]]))
    assert not front_padded(torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]]))
    assert not front_padded(torch.tensor([[0, 1, 0, 1], [1, 1, 1, 1]]))
    assert not front_padded(torch.tensor([[0, 0, 1, 1], [0, 1, 1, 1]]))
    assert not front_padded(torch.tensor([[0, 2, 1, 1], [1, 1, 1, 1]]))
    assert not front_padded(torch.tensor([[0, 0, 1, 1]]))


class _Positions(nn.Module):
    """A learned position table read by ``arange(T)[None]`` (the bug) or by ``cumsum(mask) - 1`` per row."""

    def __init__(self, per_row: bool):
        super().__init__()
        self.per_row, self.wte, self.wpe = per_row, nn.Embedding(10, 8), nn.Embedding(6, 8)

    def forward(self, input_ids, attention_mask):                                     # (B, T), (B, T)
        if self.per_row:
            positions = (attention_mask.cumsum(-1) - 1).masked_fill(attention_mask == 0, 1)
        else:
            positions = torch.arange(input_ids.shape[1])[None]                        # (1, T)
        return (self.wte(input_ids) + self.wpe(positions)) * attention_mask[..., None]   # (B, T, D)


def _positions_notes(per_row: bool, mask: torch.Tensor):
    ids = torch.arange(mask.numel()).reshape(mask.shape) % 10
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=5 D=8") as t:
        _Positions(per_row)(ids, mask)
    return verdict_line(t)[0], [d.message for d in t.diagnostics if d.kind == Kind.POSITIONS_SHARED_OVER_PADDING]


LEFT, RIGHT = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]]), torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])


def test_positions_shared_by_every_row_under_a_left_padded_mask_are_not_checked():
    """ndif-team/nnsight issue #672 (tests/corpus/reports13/gpt2_left_pad_positions.py ``positions-without-mask``,
    ``✓`` on b2f62da): a position table read by one row of positions for every entry while a row is padded in
    front; per-row positions from the mask, or right padding, keep the ``✓``."""
    assert _positions_notes(False, LEFT) == ("?", [
        "embedding #2 looks up a table by one row of ids [1, T=5] shared by every batch entry, while the model was "
        "given `attention_mask` [B=2, T=5] with a row padded in front: that row's real tokens read other rows of "
        "the table than an unpadded row's same tokens (absolute positions counted from the padding), so the "
        "positions were not checked."])
    assert _positions_notes(True, LEFT) == ("✓", [])
    assert _positions_notes(False, RIGHT) == ("✓", [])


class RotatedAttention(nn.Module):
    """Two heads with a rotary rotation; ``wrong`` hands the rotation the values in place of the keys
    (``q, k = rotate(q, v)``, as a slip in ``apply_rotary_pos_emb(query_states, value_states, ...)`` would):
    the keys are projected, split into heads and dropped, and the rotated values stand in for them."""

    def __init__(self, wrong: bool = False) -> None:
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(32, 32) for _ in range(4))
        self.wrong = wrong

    @staticmethod
    def rotate(*xs):
        angle = torch.arange(6.0)[:, None] * torch.ones(8)                           # (T, d_k/2)
        cos, sin = angle.cos().repeat(1, 2), angle.sin().repeat(1, 2)                  # (T, d_k)
        return [x * cos + torch.cat([-x[..., 8:], x[..., :8]], -1) * sin for x in xs]

    def forward(self, x):                                                              # (B, T, D)
        q, k, v = (p(x).view(2, 6, 2, 16).transpose(1, 2) for p in (self.q, self.k, self.v))   # (B, H, T, d_k)
        q, k = self.rotate(q, v if self.wrong else k)
        scores = q @ k.transpose(-2, -1) / 4.0                                         # (B, H, T, T)
        out = F.softmax(scores, dim=-1) @ v                                            # (B, H, T, d_k)
        return self.o(out.transpose(1, 2).reshape(2, 6, 32))                           # (B, T, D)


def test_a_projection_whose_result_reaches_nothing_returned_is_a_warning():
    """Fails on d04b913 (``✓`` there, as transformers' OLMo with the same slip planted): the keys' ``linear`` is
    read (a view, a transpose) but what it made is dropped, while its input went on into the queries and
    values: ``projection-bypassed`` on the keys' ``linear``; the correct layer has no finding (its ``?``: the
    rotary table built with ``repeat`` is left unnamed)."""
    outcomes = {}
    for wrong in (False, True):
        torch.manual_seed(0)
        with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=2") as t:
            RotatedAttention(wrong).eval()(torch.randn(2, 6, 32))
        found = [(d.kind, t.events[d.event].module) for d in t.diagnostics if d.severity in ("error", "warning")]
        outcomes[wrong] = verdict_line(t)[0], found
    assert outcomes == {False: ("?", []), True: ("!", [(Kind.PROJECTION_BYPASSED, "k")])}


def test_positions_packed_several_to_a_row_are_told_by_their_runs_from_zero():
    """:func:`~shapetrace.engine.unread.packed_positions`: every row runs of consecutive positions from 0, each at
    least two long, some row with two or more. One run (``arange``), left padding's ``cumsum(mask) - 1`` filled with
    1, token types, all zeros, a run of one, floats and short rows are not (added on reports24, 76a2efb)."""
    from shapetrace.engine.unread import packed_positions

    assert packed_positions(torch.tensor([[0, 1, 2, 3, 0, 1], [0, 1, 0, 1, 2, 3]]))
    assert packed_positions(torch.tensor([[0, 1, 2, 3, 4, 5], [0, 1, 2, 0, 1, 2]]))
    assert not packed_positions(torch.tensor([[0, 1, 2, 3, 4, 5]]))
    assert not packed_positions(torch.tensor([[1, 1, 0, 1, 2, 3], [0, 1, 2, 3, 4, 5]]))
    assert not packed_positions(torch.tensor([[0, 0, 0, 1, 1, 1]]))
    assert not packed_positions(torch.zeros(2, 6, dtype=torch.long))
    assert not packed_positions(torch.tensor([[0, 1, 2, 3, 4, 0]]))
    assert not packed_positions(torch.tensor([[0.0, 1.0, 0.0, 1.0]]))
    assert not packed_positions(torch.tensor([[0, 1, 0]]))


def test_a_causal_mask_alone_over_packed_rows_is_a_warning_and_the_block_diagonal_one_is_not():
    """huggingface/transformers PR #46634 (tests/corpus/reports24/hf_packed_mask_gate.py): positions restarting at 0
    inside each row, and an attention whose mask hides the future keys and nothing else: one
    ``causal-over-packed-rows`` warning on the SDPA call, ``!`` for ``✓``; the mask and-ed with "same sequence"
    gets none. On 76a2efb (before the change) the bug was ``✓ checked all 21 ops``."""
    from tests.corpus.reports24 import hf_packed_mask_gate

    found = {}
    for bug in ("", "packed-gate-on-mask"):
        t = traced_build(hf_packed_mask_gate, bug, "B=2 T=6 D=32 H=4")
        found[bug] = verdict_line(t)[0], [(d.kind, d.severity, t.events[d.event].op if d.event is not None else None)
                                          for d in t.diagnostics if d.severity != "note"]
    assert found == {"": ("?", []), "packed-gate-on-mask": (
        "!", [("causal-over-packed-rows", "warning", "scaled_dot_product_attention")])}
    t = traced_build(hf_packed_mask_gate, "packed-gate-on-mask", "B=2 T=6 D=32 H=4")
    [d] = [d for d in t.diagnostics if d.kind == Kind.CAUSAL_OVER_PACKED_ROWS]
    assert "`position_ids` [B=2, T=6] whose positions restart at 0 inside a row" in d.message
