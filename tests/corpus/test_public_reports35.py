"""A thirty-fifth round of files after public bug reports (tests/corpus/reports35; each file's docstring cites
its report), traced at their DIMS and, for the rows in ``EQUAL_TESTED`` (none: no fix changed a row), at equal
sizes too (B = T = H = 4, or the module's own ``EQUAL`` reading; the equal-size outcomes were measured once and
are kept in the table: the suite's time is a budget). First sight recorded on 54c4d61 (main at ddfcef9 plus
the round's files, committed alone).

* gptfast_decode_whole_buffer — meta-pytorch/gpt-fast issue #233: the flex decoding path attended the whole
  ``[B, H_kv, max_seq_length, d]`` buffer ``KVCache.update()`` returns, its unwritten (zero) slots unmasked;
* moonshine_streaming_right_window — huggingface/transformers pull request #47010 (issue #46305): Moonshine
  Streaming's ``sliding_window_mask_function`` kept the right (future) window with a strict ``<``, one frame
  short;
* pie_partial_rope_pairs — pie-project/pie pull request #603 (issue #602): partial rotary paired ``(i, i +
  head_dim/2)`` with frequencies over the head width instead of ``(i, i + rotary_dim/2)`` over the rotary width;
* sglang_native_cache_slots — sgl-project/sglang issue #8675: the torch-native backend wrote the step's keys at
  ``out_cache_loc`` and read them back through ``req_to_token``, one slot further.

First sight (``round_outcome``, no dependency contracts: at DIMS / at equal sizes; the CLI, ``cd /tmp &&
shapetrace trace FILE [bug] --dims DIMS``, which also measures the dependency contracts, in the last column).

================================  =======================  =====================  ===============================
file                              variant                  round_outcome 54c4d61  CLI on 54c4d61
================================  =======================  =====================  ===============================
gptfast_decode_whole_buffer       (correct)                ? / ?                  ? 32 of 45 (unnamed axes)
gptfast_decode_whole_buffer       whole-buffer-unmasked    ? / ?                  ? 32 of 45 (unnamed axes)
moonshine_streaming_right_window  (correct)                ✓ / ?                  ? 20 of 24 (batch unmeasured)
moonshine_streaming_right_window  right-window-strict      **✓** / ?              ? 20 of 24 (batch unmeasured)
pie_partial_rope_pairs            (correct)                ✓ / ?                  ✓ all 34
pie_partial_rope_pairs            head-width-pairs         **✓** / ?              **✓** all 30
sglang_native_cache_slots         (correct)                ? / ?                  ? nothing named; false note
sglang_native_cache_slots         req-to-token-shifted     ? / ?                  ? nothing named; false note
================================  =======================  =====================  ===============================

At first sight the 4 correct files were (round_outcome at DIMS) ✓ 2, ? 2, ✗ 0 (the CLI: ✓ 1, ? 3, ✗ 0); the 4
bugs ✓ 2, ? 2, ✗ 0 (the CLI: ✓ 1, ? 3): no bug was found.

Fixed (fe9ba6b): the CLI's note on sglang's files said "the model was given `seq_lens` (int64 [2]) and none of its
ops read it", while the backend loops over ``seq_lens.tolist()``: a false statement. The cheap calls that hand a
tensor's values to Python (``tolist``, ``item``, ``__bool__``, ``__int__``, ``__index__``...) are now noted as
they run (shapetrace/engine/unread.py ``values_read``), and the note says the tensor was "read only as Python
numbers (`tolist`), never in a tensor op" (still a note, still ``?``: what those numbers selected is not checked).
No outcome in the table changed.

After the round (this module): correct ✓ 2, ? 2, ✗ 0; bugs ✓ 2 (named misses below), ? 2, ✗ 0.

Open (known misses and gaps):

* pie_partial_rope_pairs ``head-width-pairs`` (missed, ``✓`` at DIMS and in the CLI): the bug's rotation is
  itself a well-formed rotary: each rotated feature ``i < rotary_dim/2`` meets one partner ``i + head_dim/2`` at
  one frequency, the rest pass through, and that is the "proportional" partial rotary some models are trained
  with (apple/coreai-models issue #66 describes transformers' Gemma-4 layout so). Which convention the weights
  expect is not in the code; telling them apart would take a rule per model.
* moonshine_streaming_right_window ``right-window-strict`` (missed at DIMS in the round; ``?`` since, with its
  correct file): one future frame fewer is another legitimate band, and the window's width is the model's
  configuration, a value no name or contract decides; :func:`.directions.band_window` now reads both widths of a
  window that looks ahead (4 keys up to each query and 2 after it; the bug's 1 after it), and, as no module holds
  either width, the note says neither is checked: ``?``, never ``✓``.
* gptfast_decode_whole_buffer ``whole-buffer-unmasked``: ``?``, as is the correct step: the mask
  ``causal_mask[None, None, input_pos]`` and the cache writes ``k_out[:, :, input_pos] = k`` index by a
  position tensor whose slots the tracer does not name, so which cache slots a query may read (written, or
  still zero) is not followed. Seeing the bug would need the written slots tracked through the index write.
* sglang_native_cache_slots: ``?`` both: the layer's tokens are flat, ``[N, D]`` with N = B·T, so the sizes
  given name no input; the shifted read is a value of the request table (which slots hold which token), not a
  layout.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests, traced_build
from tests.corpus.reports35 import (
    gptfast_decode_whole_buffer,
    moonshine_streaming_right_window,
    pie_partial_rope_pairs,
    sglang_native_cache_slots,
)

MODULES = (gptfast_decode_whole_buffer, moonshine_streaming_right_window, pie_partial_rope_pairs,
           sglang_native_cache_slots)
UNSURE, SURE = ("?", ()), ("✓", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then equal sizes
EXPECTED = {
    (gptfast_decode_whole_buffer, ""): [UNSURE, UNSURE],
    (gptfast_decode_whole_buffer, "whole-buffer-unmasked"): [UNSURE, UNSURE],
    # (both ✓ -> ? after the round: a window that looks ahead has both its widths read, and neither is a window
    # the model holds: tests/engine/test_directions.py, the look-ahead window's test)
    (moonshine_streaming_right_window, ""): [UNSURE, UNSURE],
    (moonshine_streaming_right_window, "right-window-strict"): [UNSURE, UNSURE],
    (pie_partial_rope_pairs, ""): [SURE, UNSURE],
    (pie_partial_rope_pairs, "head-width-pairs"): [SURE, UNSURE],                          # (missed)
    (sglang_native_cache_slots, ""): [UNSURE, UNSURE],
    (sglang_native_cache_slots, "req-to-token-shifted"): [UNSURE, UNSURE],
}
MISSED = {
    (pie_partial_rope_pairs, "head-width-pairs"):
        "a well-formed rotary of another convention (pairs i, i + head_dim/2; frequencies over the head): which "
        "one the weights expect is not in the code",
}
#: the rows also traced at equal sizes (none: no fix of the round changed a row; measured once, above)
EQUAL_TESTED: set = set()

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED, missed=frozenset(MISSED))


def test_lengths_read_only_by_tolist_are_said_to_be_so():
    """sglang's backend loops over ``seq_lens.tolist()``: the note says so (it said no op read them, 54c4d61)."""
    t = traced_build(sglang_native_cache_slots, "", sglang_native_cache_slots.DIMS[0])
    notes = [d.message for d in t.diagnostics if d.kind == "input-unread"]
    assert notes and all("read it only as Python numbers (`tolist`)" in m for m in notes)
