"""A fourteenth round of files after public bug reports (tests/corpus/reports14; each file's docstring cites its
report), traced at their DIMS and at B = T = H = 4, first sight recorded on d58f65e before any fix. A short
round: two files.

* mac_control_pads — rosinality/mac-network-pytorch issue #7: the MAC ``ControlUnit`` attends over the
  question's padded words with no mask;
* simpletuner_flux_mask_order — bghira/SimpleTuner issue #904 (fixed by PR #908): Flux's joint attention over
  ``cat([text, image])`` tokens with its key mask joined ``cat([image_mask, text_mask])``.

First sight (``round_outcome``: at DIMS / at equal sizes; the CLI, ``cd /tmp && shapetrace trace FILE [bug]
--dims "<DIMS>"``, which measures the dependency contracts):

===========================  ================  ==========================================  =====================
file                         variant           first sight on d58f65e (DIMS/equal; CLI)    now (CLI)
===========================  ================  ==========================================  =====================
mac_control_pads             (correct)         ? 18 of 25 / ? 0 of 25; CLI ? 18 of 28      unchanged
                                               (the ``(B,)`` question_len, the pad mask's
                                               ``arange`` compare, ``masked_fill`` unnamed)
mac_control_pads             no-pad-mask       ? 18 of 21 / ? 0 of 21; CLI ? 18 of 24      unchanged
simpletuner_flux_mask_order  (correct)         ✓ 34 ops / ? 11 of 34; CLI ✓ 34 ops         unchanged
simpletuner_flux_mask_order  mask-image-first  ✓ 34 ops / ? 11 of 34; CLI ✓ (missed)       ✗ mask-wrong-axis
                                                                                           (DIMS; ? at equal)
===========================  ================  ==========================================  =====================

At first sight, at DIMS, the 2 correct files were ✓ 1, ? 1, ✗ 0; the 2 bugs ✗ 0, ? 1, ✓ 1 (the CLI the same).
Now: correct ✓ 1, ? 1, ✗ 0; bugs ✗ 1, ? 1, ✓ 0. The fix: engine/rules/masks.py read a mask's token names
against the scores' only where an input was named; it now also reads names given by sizes alone when each name's
size is its own (no other declared name has it, no seed chose it), and says when a joined mask's parts are in
another order than its keys' (``T+S`` on ``S+T``), tested in tests/engine/test_masks.py. At equal sizes
(T = B = H = 4) the names rest on shared sizes and nothing is read: ``?``.

The fix also found that round 13's open_clip "correct" form (PR #312's ``F.pad(cls_mask, (1, 0, T, 0))``) is
a mask for a CLS placed first (open_clip issue #549): now a bug of that file (see test_public_reports13).

Open (``?``): the MAC control attention's pad mask (``arange(T)[None, :] >= question_len[:, None]``) rests on
a ``(B,)`` length tensor whose axis cannot be told to be the batch; the bug (no mask) leaves the padded words'
scores in the softmax, and nothing in the run says which words are padding but the mask the bug never applies.
Branch inputs1 names the ``(B,)`` lengths (infer/seeds.py ``batch_seed``) and, together, marks a padding mask built
from them unproven until measured (engine/lengths_read.py): both variants ``? checked 21 of 21`` (correct: 25 of 25)
``; not proven: the pads of a mask the model builds from its lengths were not measured unread``, on the API and
with the contracts (the padding contract reads a mask given as an argument). Names alone made the bug ``✓``.
Not written: Tencent/ncnn issue #6833 (a fused rotary kernel that reads the first half of a ``cat(cos_h,
cos_w)`` table for both halves): the engine calls the issue's own reference form (``x * cos + rotate_half(x) *
sin`` with halves that differ) no rotation, which is true of the math, and the public vision models found
(Qwen-VL) build equal halves, so no correct twin could be written with confidence.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports14 import mac_control_pads, simpletuner_flux_mask_order

MODULES = (mac_control_pads, simpletuner_flux_mask_order)
OK, UNSURE = ("✓", ()), ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (mac_control_pads, ""): [UNSURE, UNSURE],
    (mac_control_pads, "no-pad-mask"): [UNSURE, UNSURE],
    (simpletuner_flux_mask_order, ""): [OK, UNSURE],
    (simpletuner_flux_mask_order, "mask-image-first"): [("✗", ("mask-wrong-axis",)), UNSURE],
}
#: the rows also traced at equal sizes (the others' equal-size outcomes measured once, above)
EQUAL_TESTED = {(simpletuner_flux_mask_order, "mask-image-first")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
