"""A seventeenth round of files after public bug reports (tests/corpus/reports17; each file's docstring cites its
report), traced at their DIMS and at B = T = H = 4, first sight recorded on 2243d41 (the files committed before
any engine change). A short round: four files.

* colossal_rotary_qk_crossed — hpcaitech/ColossalAI issue #6428 (PRs #6429, #6444): the fused rotary kernel's
  ``out_q1`` computed from ``k`` and ``out_k0`` from ``q``, so the rotated query and key are the same tensor;
* cellflow_cls_row_unmasked — theislab/CellFlow issue #226: ``TokenAttentionPooling``'s mask written for the
  set's block only, the class token's row left all ones, so the pooled class token attends the pads;
* ptv3_last_window_repeat — tier4/autoware-ml PR #93: Point Transformer V3's last short window padded with
  repeats of the last point (``clamp(arange(n_pad), max=n - 1)``) instead of the preceding window's tail;
* tinyllm_decode_offset — skyzh/tiny-llm PR #46: the decoding offset advanced by the prompt's length after the
  first step, so the second step's token is rotated for position 12 while its key is cached at 7.

First sight (``round_outcome``: at DIMS / at equal sizes; the CLI, ``cd /tmp && shapetrace trace FILE [bug]
--dims "<DIMS>"``, which measures the dependency contracts):

==========================  ====================  ==========================================  =======================
file                        variant               first sight on 2243d41 (DIMS/equal; CLI)    now (this commit)
==========================  ====================  ==========================================  =======================
colossal_rotary_qk_crossed  (correct)             ✓ 28 ops / ? 9 of 28; CLI ✓ 28 ops           unchanged
colossal_rotary_qk_crossed  qk-crossed            ? 24 of 28 / ? 1 of 28; CLI ? 24 of 28       unchanged
cellflow_cls_row_unmasked   (correct)             ✓ 20 ops / ? 10 of 20; CLI ✓ 22 ops          unchanged
cellflow_cls_row_unmasked   cls-row-unmasked      ✓ 16 ops / ? 6 of 16; CLI ✓ 18 ops (missed)   ! mask-shows-padding
                                                                                              (DIMS, equal, CLI)
ptv3_last_window_repeat     (correct)             ? 13 of 17 / ? 13 of 15; CLI ? 13 of 18      unchanged
ptv3_last_window_repeat     last-window-repeated  ? 13 of 15 / ? 13 of 15; CLI ? 13 of 16      unchanged
tinyllm_decode_offset       (correct)             ? 93 of 109 / ? 56 of 109; CLI ? 93 of 109   ? 101 of 109 / ? 64
tinyllm_decode_offset       offset-by-prompt      ? 93 of 109 / ? 56 of 109; CLI ? 93 of 109   ✗ rotary-position-off
                                                                                              (DIMS, CLI) / ? 60
==========================  ====================  ==========================================  =======================

At first sight, at DIMS, the 4 correct files were ✓ 2, ? 2, ✗ 0; the 4 bugs ✗ 0, ? 3, ✓ 1 (the CLI the same).
Now: correct unchanged (tinyllm's checks 93 -> 101 of 109); bugs ✗ 1, ! 1, ? 2, ✓ 0. The fixes:

* engine/rotary_positions (tests/engine/test_rotary_positions.py): a decode step's rotation is followed to the
  cache's join through ops that only reorder axes (``transpose(1, 2)`` after a rotation in ``(B, T, H, d)``) and
  the ``cat`` that rebuilds a rotation written on two halves, and the cache's transposed entries count as its
  history: tiny-llm's second step rotated at 12 and joined after 7 entries is ``rotary-position-off``;
* engine/directions, rules/directions (tests/engine/test_directions.py): a mask read on its values that hides
  a padded key from its own query (the same position sees itself in another slice) and yet shows it to a real
  query (one that sees its own key) is the warning ``mask-shows-padding``: CellFlow's class-token row.

Open:

* colossal_rotary_qk_crossed qk-crossed: ``?`` (the crossed halves are no rotation of one tensor, so their
  slices stay unnamed). The rotated query and key are then one tensor; no contract says a query may not equal
  its key (a shared-QK attention, Reformer's, does it by design): left ``?``, not ``✗``.
* ptv3_last_window_repeat: ``?`` on both; the padded index is built from values (``arange``, ``clamp``, a
  setitem) and gathers the serialized points, unnamed. Which points fill the short window (the preceding
  window's tail or repeats of the last point) is a value no name holds: a twin in what torch records, except
  that repeats give one key many copies; left for a round on index provenance.
* tinyllm_decode_offset (correct) stays ``?``: the grouped query ``reshape(B, H_kv, n_rep, L, d)`` stops the
  decode step's query rotation from being placed (only the key's is), so its tables stay unchecked.
* tinyllm_decode_offset offset-by-prompt at equal sizes: ``?`` (T = H = 4: the step's token axis is not told
  from the heads by size, and equal sizes never decide a name).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports17 import (
    cellflow_cls_row_unmasked,
    colossal_rotary_qk_crossed,
    ptv3_last_window_repeat,
    tinyllm_decode_offset,
)

MODULES = (colossal_rotary_qk_crossed, cellflow_cls_row_unmasked, ptv3_last_window_repeat, tinyllm_decode_offset)
OK, UNSURE = ("✓", ()), ("?", ())
PADDING = ("!", ("mask-shows-padding",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (colossal_rotary_qk_crossed, ""): [OK, UNSURE],
    (colossal_rotary_qk_crossed, "qk-crossed"): [UNSURE, UNSURE],
    (cellflow_cls_row_unmasked, ""): [OK, UNSURE],
    (cellflow_cls_row_unmasked, "cls-row-unmasked"): [PADDING, PADDING],
    (ptv3_last_window_repeat, ""): [UNSURE, UNSURE],
    (ptv3_last_window_repeat, "last-window-repeated"): [UNSURE, UNSURE],
    (tinyllm_decode_offset, ""): [UNSURE, UNSURE],
    (tinyllm_decode_offset, "offset-by-prompt"): [("✗", ("rotary-position-off",)), UNSURE],
}
#: the rows also traced at equal sizes (the others' equal-size outcomes measured once, above)
EQUAL_TESTED = {(cellflow_cls_row_unmasked, "cls-row-unmasked")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
