"""A ninth round of files in the styles of public code (tests/corpus/public9, each citing its source),
traced at distinct sizes, at B = T = H = 4 and at B = 1 (issue 33): decode steps with caches.

Each class below fails on 10552a7:

* a static cache made for a larger batch than the one written (meta-llama's ``cache_k[:bsz, s:e] = xk``)
  left its batch-slot axis unnamed, so every write was an unchecked op and the file stayed ``?``; the
  axis now holds batch slots (``B_max``), and ``cache_k[:bsz]`` read back is ``B`` again (its first
  ``bsz`` slots, cut to a size read from the batch);
* which slots of a buffer this run wrote is exact from the writes' own slices: a read that cuts the
  buffer and takes a slot no write reached, after one a write reached, is ``cache-slot-skipped`` (a decode
  step written at slot 0 instead of ``start_pos``);
* a decode step's rotary table of one position showed no change along the tokens, so its ops stayed
  unchecked (``? checked 79 of 85``). Its position is now read from its values against the run's table of
  consecutive positions (the prefill's) and compared with the position its token takes (a key joined
  after n cached keys: n; a query meeting S keys of a whole history: S - 1): equal, its table is checked on
  the values; different, ``rotary-position-off`` (positions counted one ahead). A cache trimmed by a slice
  (a sliding window) is no whole history: nothing is claimed there;
* Bloom's ALiBi slopes are built from a Python int (``num_heads``), so nothing named their axis and the
  bias's ``__getitem__`` and ``reshape`` stayed unchecked (``? checked 25 of 27``). ``baddbmm``'s base is now
  an operand the graph follows, and a bias folded ``reshape(batch_size * num_heads, ...)`` whose pieces line
  up with the scores' ``B·H`` piece by piece (the batch named, one unnamed piece of H entries) has its
  heads there (``B·? = B·H``), carried back to the slopes; a bias folded with the batch elsewhere
  (transposed before the reshape, or Megatron's table widened with ``repeat_interleave(batch_size, 0)``,
  whose copies counted by a size read from the batch are the batch) is ``mask-wrong-batch-order``. A fold
  with a piece of one entry (B = 1) does not exercise the order: nothing is named there.

T5's relative-position bias with its query and key axes traded stays ``?`` (pinned below, as on 10552a7):
both axes are ``arange(T)`` of one size read from one input, and the subtraction's order is a convention
(T5 takes key - query, DeBERTa query - key, both correct), so nothing proves which axis holds the queries.
"""

from __future__ import annotations

import re

import pytest
import torch

import shapetrace
from shapetrace import NOT_ASKED
from tests.corpus.helpers import findings, round_outcome, round_sizes
from tests.corpus.helpers import traced_build as traced
from tests.corpus.helpers import verdict_line as line
from tests.corpus.public9 import bloom_alibi, llama_dynamic_cache, llama_static_cache, t5_bias

#: what a Python trace's verdict adds where nobody asked for the dependency contracts
UNASKED = f"; not measured: {NOT_ASKED}"

MODULES = (llama_static_cache, llama_dynamic_cache, bloom_alibi, t5_bias)
SIZES = ["B=2 T=6 D=64 H=4", "B=4 T=4 D=64 H=4", "B=1 T=6 D=64 H=4"]


def _sizes(module) -> list[str]:
    """Distinct sizes, equal sizes, and the distinct sizes at a batch of one."""
    return [*round_sizes(module), re.sub(r"\bB=\d+", "B=1", module.DIMS[0])]


# -- meta-llama's static cache: batch slots, and the slots a step wrote --------------------------------

@pytest.mark.parametrize("dims", SIZES)
def test_a_cache_for_a_larger_batch_holds_batch_slots(dims):
    """meta-llama's ``self.cache_k[:bsz, start_pos : start_pos + seqlen] = xk`` into a buffer of 4 sequences:
    10552a7 left its first axis unnamed (``[?, L, H, d_k]``), so every write was unchecked: ``? checked 77 of
    85 ops``."""
    t = traced(llama_static_cache, "", dims)
    writes = [e for e in t.events if e.op == "__setitem__"]
    reads = [e for e in t.events if e.op == "__getitem__" and e.inputs[0].dims[0] == "B_max"]
    assert len(writes) == 8 and {e.outputs[0].dims for e in writes} == {("B_max", "L", "H", "d_k")}
    assert [e.outputs[0].dims for e in reads[:2]] == [("B", "L[0:4]" if "T=4" in dims else "L[0:6]", "H", "d_k")] * 2
    assert findings(t) == ()
    if "T=4" in dims:   # B = T = H: names read from sizes alone, as every round's equal reading
        assert line(t).startswith("? ") and "equal sizes are ambiguous" in line(t)
    else:
        assert line(t).startswith("✓ checked all 83 ops")   # (85 before lib13: whole slices not counted)


def test_batch_slots_are_named_only_where_a_batch_was_written_from_slot_zero():
    """The mechanism alone: ``cache[:n, 0:6] = k`` names the buffer's first axis ``B_max`` (10552a7: unnamed);
    ``cache[2:4, 0:6] = k`` (a batch written elsewhere) leaves it unnamed, as before."""
    k = torch.randn(2, 6, 4, 8)
    names = []
    for first in (0, 2):
        cache = torch.zeros(4, 16, 4, 8)
        with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 H=4 d_k=8") as t:
            shapetrace.name(k, "B T H d_k")
            cache[first:first + k.size(0), 0:6] = k                         # (B_max, L, H, d_k)
        names.append(t.events[0].outputs[0].dims)
    assert names == [("B_max", "L", "H", "d_k"), (None, "L", "H", "d_k")]


@pytest.mark.parametrize("dims", SIZES)
def test_a_decode_step_written_at_slot_zero_reads_a_slot_never_written(dims):
    """The decode step written at ``[:bsz, :seqlen]`` (``start_pos`` forgotten) and read up to ``start_pos +
    1``: 10552a7 ``✓`` at distinct sizes (every name is right; only the slots are wrong)."""
    t = traced(llama_static_cache, "write-at-zero", dims)
    T = 4 if "T=4" in dims else 6
    found = [d for d in t.diagnostics if d.severity == "error"]
    assert [d.kind for d in found] == ["cache-slot-skipped"] * 2
    assert found[0].message.startswith(
        f"__getitem__ #32 reads the buffer [B_max=4, L=16, H=4, d_k=16] up to slot {T} along L (axis 1), but no "
        f"write of this run reached slot {T}, while slot {T - 1} was written (the last write, __setitem__ #30, "
        "filled slots 0:1 along it)")
    assert line(t).startswith("✗ 2 errors")


def test_slots_written_before_the_trace_or_read_whole_are_no_finding():
    """The mechanism alone: a decode step traced after an untraced prefill reads slots 0-5 it did not write,
    all before the one it wrote (silent); transformers' ``StaticCache`` returns the whole buffer, masked where
    empty (silent: read whole); a step written one slot ahead, ``cache[:, 7:8]`` after ``cache[:, 0:6]``,
    read to slot 7, skips slot 6 (the finding)."""
    cache, k = torch.zeros(2, 16, 4, 8), torch.randn(2, 6, 4, 8)
    cache[:, 0:6] = k                                                      # before the trace: the prompt
    step = torch.randn(2, 1, 4, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 H=4 d_k=8") as t:
        shapetrace.name(step, "B T H d_k")
        cache[:, 6:7] = step                                               # (B, L, H, d_k): slot 6
        cache[:, :7]                                                       # (B, 7, H, d_k): 0-5 from before
        cache[:, 8:9] = step                                               # one slot ahead: 7 skipped
        cache[:, :]                                                        # read whole: masked where empty
        cache[:, :9]                                                       # bug: reads slot 7
    assert [(d.kind, d.event) for d in t.diagnostics if d.severity == "error"] == [("cache-slot-skipped", 4)]


# -- a growing cache: the position each decode step's rotation turns by ----------------------------------

def _positioned(t):
    from shapetrace.engine.rotary import rotaries_of
    t.report()   # (the inference concluded: its rows are the ones the rotaries are found against)
    return [(r.position, r.expected, r.placed[1] if r.placed else None)
            for r in rotaries_of(t.capture, t._inference.event_of_record)]


@pytest.mark.parametrize("bug", ["", "grouped-kv"])
@pytest.mark.parametrize("dims", [f"{d} H_kv=2" for d in SIZES])
def test_a_decode_steps_rotation_is_read_at_the_position_its_token_takes(dims, bug):
    """meta-llama's rotation at ``start_pos`` with transformers' ``DynamicCache`` ``cat`` (and its ``repeat_kv``
    after the cache, read back to the join): 10552a7 left each step's one-position table unchecked (``? checked
    79 of 85 ops``, its ``cat((freqs, freqs))`` rows)."""
    t = traced(llama_dynamic_cache, bug, dims)
    T = 4 if "T=4" in dims else 6
    assert _positioned(t) == [(None, None, None)] * 2 + [
        (T + step, T + step, how) for step in range(3)
        for how in (f"it is the newest of the {T + step + 1} keys it attends to",
                    f"it is joined after {T + step} cached entries")]
    assert findings(t) == ()
    if "T=4" in dims:
        assert line(t).startswith("? ") and "equal sizes are ambiguous" in line(t)
    else:
        # (109 and 85 before lib13: a decode step's ``y[:, -1:]`` of one token and the like read their
        # operands exactly as they lie and are not counted)
        assert line(t).startswith(f"✓ checked all {107 if bug else 83} ops that could carry a layout bug (8 of them "
                                  "on the values")


@pytest.mark.parametrize("dims", ["B=2 T=6 D=64 H=4", "B=1 T=6 D=64 H=4"])
def test_positions_counted_one_ahead_turn_the_step_by_the_next_position(dims):
    """``arange(past + 1, past + 1 + T)``: the step's token counted twice. 10552a7: ``? checked 79 of 85``."""
    t = traced(llama_dynamic_cache, "positions-one-ahead", dims)
    (d,) = [d for d in t.diagnostics if d.severity == "error"]
    assert d.kind == "rotary-position-off"
    assert d.message == (
        f"the rotary embedding rotated at cat #31 turns [B={dims[2]}, H=4, T[-1:]=1, d_k=16] by position 7 (its "
        "cos and sin tables hold that position's angles on every feature, read against the run's table of "
        "consecutive positions), but its token takes position 6: it is the newest of the 7 keys it attends to. "
        "q·k then reads its distance to every other token 1 off.")


def test_a_sliding_window_cache_claims_no_position():
    """Mistral's rolling buffer: the cache cut to its last entries (``k_cache[:, :, 1 - WINDOW:]``, a slice even
    where it keeps them all) holds fewer keys than the newest position, so neither a query's nor a key's
    position is compared (silent, and its tables not counted as checked)."""
    t = traced(llama_dynamic_cache, "sliding-window", "B=2 T=6 D=64 H=4")
    assert findings(t) == ()
    assert [p for p in _positioned(t) if p[1] is not None] == []
    assert line(t).startswith("? checked 81 of 87 ops")   # (85 of 91 before lib13: whole slices not counted)


# -- Bloom's ALiBi: slopes from a Python int, folded with the batch ------------------------------------

@pytest.mark.parametrize("bug", ["", "megatron-repeat"])
def test_alibi_slopes_from_a_literal_head_count_are_the_heads(bug):
    """transformers' ``build_alibi_tensor`` and Megatron's ``repeat(batch_size, 1, 1)``: 10552a7 left the slopes'
    axis unnamed (``? checked 25 of 27 ops``: ``#3 __getitem__, #4 reshape``)."""
    t = traced(bloom_alibi, bug, "B=2 T=6 D=64 H=4")
    base = next(e for e in t.events if e.op == "baddbmm").inputs[2]
    assert base.dims == ("B*H", None, "T")   # (repeat's copies counted by batch_size: a copy per batch entry)
    assert findings(t) == ()
    assert line(t).startswith(f"✓ checked all {26 if bug else 27} ops")


def test_alibi_at_a_batch_of_one_names_nothing():
    """At B = 1 the fold ``B·H`` is the heads alone: a bias folded heads first gives the same scores, so the
    order is not exercised and the slopes stay unnamed (``?``, as on 10552a7), correct or not."""
    for bug in ("", "fold-heads-major"):
        t = traced(bloom_alibi, bug, "B=1 T=6 D=64 H=4")
        assert findings(t) == () and line(t).startswith("? checked 25 of")


def test_megatron_alibi_widened_head_major_lands_on_other_heads():
    """``alibi.repeat_interleave(batch_size, 0)`` of ``[H, 1, T]``: 10552a7 ``?`` (the copies unnamed)."""
    t = traced(bloom_alibi, "megatron-repeat-interleave", "B=2 T=6 D=64 H=4")
    assert [(d.kind, d.message.split(":")[1]) for d in t.diagnostics if d.severity == "error"] == [
        ("mask-wrong-batch-order", " axis 0 of the scores counts batch entries first (B·H), but the bias folds them "
                                   "in another place (?·B), so entry b·H + h of the scores gets the bias of another "
                                   "sequence and another head.")]


@pytest.mark.parametrize("dims", ["B=2 T=6 D=64 H=4", "B=3 T=5 D=48 H=4"])
def test_alibi_transposed_before_its_fold_lands_on_other_heads(dims):
    """The alibi transposed to ``[H, B, T]`` before ``reshape(batch_size * num_heads, 1, T)``: 10552a7 ``?`` (the
    bias unnamed; no batch mixing measured with this mask)."""
    t = traced(bloom_alibi, "fold-heads-major", dims)
    (d,) = [d for d in t.diagnostics if d.severity == "error"]
    B, T = int(dims[2]), int(dims[6])
    assert d.kind == "mask-wrong-batch-order"
    assert d.message == (
        f"baddbmm #16 adds the bias [{B * 4}, 1, T={T}] to the scores [B·H={B * 4}, T={T}, T={T}]: axis 0 of the "
        "scores counts batch entries first (B·H), but the bias folds them in another place (?·B), so entry "
        "b·H + h of the scores gets the bias of another sequence and another head.")


# -- T5: a bias whose two token axes nothing tells apart ---------------------------------------------------

@pytest.mark.parametrize("dims", ["B=2 T=6 D=64 H=4", "B=1 T=6 D=64 H=4"])
def test_a_transposed_t5_bias_is_not_proven_either_way(dims):
    """``values.permute([2, 1, 0])``: ``?`` saying why, never ``✓``; T5's and DeBERTa's directions both ``✓``."""
    assert line(traced(t5_bias, "bias-transposed", dims)) == (
        "? checked 24 of 24 ops that could carry a layout bug; not proven: #16 permute moves two axes both named T "
        "past each other, and names cannot tell which is which; no errors or warnings in what was checked" + UNASKED)
    for twin in ("", "query-minus-key"):
        assert line(traced(t5_bias, twin, dims)).startswith("✓ checked all 24 ops")


# -- every file of the round, at distinct sizes, equal sizes and a batch of one -------------------------

#: (module, bug) -> for each size of ``_sizes(module)``: the verdict's first letter and the kinds of its
#: errors and warnings. Still ``?``: the correct files at B = T = H = 4 (names found from sizes alone).
EXPECTED = {
    (llama_static_cache, ""): [("✓", ()), ("?", ()), ("✓", ())],
    (llama_static_cache, "write-at-zero"): [("✗", ("cache-slot-skipped",) * 2)] * 3,
    (llama_static_cache, "merge-no-transpose"): [("✗", ("mixed-axis",)), ("✗", ("tokens-merged-with-features",)),
                                                 ("✗", ("mixed-axis",))],
    (llama_dynamic_cache, ""): [("✓", ()), ("?", ()), ("✓", ())],
    (llama_dynamic_cache, "sliding-window"): [("?", ())] * 3,
    (llama_dynamic_cache, "grouped-kv"): [("✓", ()), ("?", ()), ("✓", ())],
    # (at B = T = H = 4 the rotated tensor's token axis is named from sizes alone: no position finding)
    (llama_dynamic_cache, "positions-restart"): [("✗", ("rotary-position-restarts",)), ("?", ()),
                                                 ("✗", ("rotary-position-restarts",))],
    (llama_dynamic_cache, "positions-one-ahead"): [("✗", ("rotary-position-off",)), ("?", ()),
                                                   ("✗", ("rotary-position-off",))],
    # Bloom: at B = T = H = 4 the batch piece of Megatron's repeat_interleave is not told from the heads
    (bloom_alibi, ""): [("✓", ()), ("?", ()), ("?", ())],
    (bloom_alibi, "megatron-repeat"): [("✓", ()), ("?", ()), ("?", ())],
    (bloom_alibi, "fold-heads-major"): [("✗", ("mask-wrong-batch-order",))] * 2 + [("?", ())],
    (bloom_alibi, "megatron-repeat-interleave"): [("✗", ("mask-wrong-batch-order",)), ("?", ()), ("?", ())],
    (bloom_alibi, "slopes-sign"): [("✗", ("distance-bias-reversed",))] * 3,
    (t5_bias, ""): [("✓", ()), ("?", ()), ("✓", ())],
    (t5_bias, "query-minus-key"): [("✓", ()), ("?", ()), ("✓", ())],
    (t5_bias, "bias-transposed"): [("?", ())] * 3,
    (llama_dynamic_cache, "merge-no-transpose"): [("✗", ("mixed-axis",)), ("✗", ("tokens-merged-with-features",)),
                                                  ("✗", ("mixed-axis",))],
}


@pytest.mark.parametrize("module,bug", list(EXPECTED), ids=[f"{m.__name__.rsplit('.', 1)[1]}-{b or 'correct'}"
                                                             for m, b in EXPECTED])
def test_round_outcome(module, bug):
    assert [round_outcome(module, bug, dims) for dims in _sizes(module)] == EXPECTED[(module, bug)]


def test_every_file_and_bug_is_in_the_table():
    assert set(EXPECTED) == {(m, b) for m in MODULES for b in ("", *m.TWINS, *m.BUGS)}
