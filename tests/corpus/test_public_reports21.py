"""A twenty-first round of files after public bug reports (tests/corpus/reports21; each file's docstring cites
its report), traced at their DIMS and, for two rows, at B = T = H = 4 (the other rows' equal-size column was
measured once and is kept in the table: the suite's time is a budget), first sight recorded on 0b6df46 (the
files committed before any engine change). A short round: four files.

* showattend_context_sum_axis — alecwangcq/show-attend-and-tell issue #6: the attention-weighted encoder
  features summed over the feature axis (``sum(dim=2)``) instead of the image regions;
* memos_concat_unrotated — MemTensor/MemOS issue #2315 (PR #2304): two separately prefilled key caches joined
  with a bare ``cat``, the second fragment's keys left at the phases of positions ``0 … L2-1``;
* velox_evicted_rope_offset — rajveer43/VeloxQuant-MLX issue #389: an eviction cache whose ``offset`` is its
  retained row count, so tokens decoded after an eviction are rotated behind their true position (mlx_lm's
  idiom written in torch);
* mamba_mha_gqa_no_repeat — state-spaces/mamba PR #462: ``MHA``'s SDPA path without ``repeat_interleave`` of
  the key/value heads (GQA with 1 < H_kv < H: SDPA raises).

First sight (``round_outcome``: at DIMS / at equal sizes; the CLI, ``cd /tmp && shapetrace trace FILE [bug]
--dims "<DIMS>"``, gave the same at DIMS):

===========================  ====================  =====================================  ==================
file                         variant               first sight on 0b6df46 (DIMS/equal)    now (DIMS/equal)
===========================  ====================  =====================================  ==================
showattend_context_sum_axis  (correct)             ? 6 of 8 / ? 0 of 8                    unchanged
showattend_context_sum_axis  sum-over-features     ? 6 of 8 / ? 0 of 8                    unchanged
memos_concat_unrotated       (correct)             ✗ rotary-same-angle-every-token / ?    ? 111 of 120 / ?
memos_concat_unrotated       concat-unrotated      ? 107 of 109 / ?                       unchanged
velox_evicted_rope_offset    (correct)             ? 36 of 120 / ? 17 of 120              unchanged
velox_evicted_rope_offset    offset-retained-rows  ? 36 of 120 / ? 17 of 120              unchanged
mamba_mha_gqa_no_repeat      (correct)             ✓ 14 ops / ? 0 of 14                   unchanged
mamba_mha_gqa_no_repeat      kv-not-repeated       raises / raises                        unchanged
===========================  ====================  =====================================  ==================

At first sight the 4 correct files were ✓ 1, ? 2, ✗ 1 (MemOS: a false error); the 4 bugs ✗ 0, ? 3, ✓ 0, and
one raises (SDPA itself refuses 4 query heads against 2 key heads: the user sees it without the tool). The fix:

* engine/rotary ``Rotary.shifts`` with rules/rotary ``_tokens_still`` (tests/engine/test_rotary.py): a rotation
  whose input is an earlier rotation's result, moved by data moves only, shifts tokens that already carry their
  positions (MemOS re-rotates the moved fragment's keys by ``L1``, one angle for every token); it is no
  ``rotary-same-angle-every-token``. The same constant rotation of keys never rotated still is one.

Open:

* showattend_context_sum_axis: ``?`` on both. The entered decoder state ``[2, 32]`` is not named (its batch
  axis cannot be told from sizes), and nothing reads the bug's ``sum`` over D of softmax(T)-weighted features,
  keeping T: a weighted sum that does not run over the axis its weights were normalised along. A rule for it
  (a warning in rules/reductions) was left for a later round: correct code that weighs features by token
  weights and sums the features (a per-token score) must stay unflagged.
* memos_concat_unrotated (bug) and velox_evicted_rope_offset (bug): ``?``. The wrong positions are values (the
  phases a cached key holds; an integer offset read from a Python counter): both runs are, op for op, the
  correct code's with other angles, so no name or contract tells them; they stay ``?``, never ``✓``.
* the equal-size column is ``?`` throughout (nothing is named by size alone).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports21 import (
    mamba_mha_gqa_no_repeat,
    memos_concat_unrotated,
    showattend_context_sum_axis,
    velox_evicted_rope_offset,
)

MODULES = (showattend_context_sum_axis, memos_concat_unrotated, velox_evicted_rope_offset, mamba_mha_gqa_no_repeat)
OK, UNSURE, RAISES = ("✓", ()), ("?", ()), ("raises", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (showattend_context_sum_axis, ""): [UNSURE, UNSURE],
    (showattend_context_sum_axis, "sum-over-features"): [UNSURE, UNSURE],
    (memos_concat_unrotated, ""): [UNSURE, UNSURE],
    (memos_concat_unrotated, "concat-unrotated"): [UNSURE, UNSURE],
    (velox_evicted_rope_offset, ""): [UNSURE, UNSURE],
    (velox_evicted_rope_offset, "offset-retained-rows"): [UNSURE, UNSURE],
    (mamba_mha_gqa_no_repeat, ""): [OK, UNSURE],
    (mamba_mha_gqa_no_repeat, "kv-not-repeated"): [RAISES, RAISES],
}
#: the rows also traced at equal sizes (the others' equal-size outcomes measured once, above)
EQUAL_TESTED = {(memos_concat_unrotated, ""), (showattend_context_sum_axis, "sum-over-features")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
