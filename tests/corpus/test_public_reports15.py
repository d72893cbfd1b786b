"""A fifteenth round of files after public bug reports (tests/corpus/reports15; each file's docstring cites its
report), traced at their DIMS and at B = T = H = 4, first sight recorded on 67c283c before any fix. A short
round: four files.

* angle_mean_pool — SeanLee97/AnglE issue #101 (PR #102): mean pooling divided by the mask summed over the
  whole batch, ``torch.sum(attention_mask)``;
* c2c_decode_mask_column — thu-nics/C2C PR #19: a decode step's 2-D mask cut to the step's own length,
  ``mask[:, :1]``, broadcast over the cached keys;
* paligemma_pad_unmasked — huggingface/transformers issue #35855: PaliGemma's prefix opened
  (``token_type_ids == 0``) after the padding was masked, unmasking the pads (token type 0 too);
* llama4_chunked_left_pad — huggingface/transformers issue #40214 (PR #40324): Llama 4's chunk ids taken
  from the padded column indices of a left-padded row.

First sight (``round_outcome``: at DIMS / at equal sizes; the CLI, ``cd /tmp && shapetrace trace FILE [bug]
--dims "<DIMS>"``, which measures the dependency contracts):

=======================  =========================  ==========================================  ==================
file                     variant                    first sight on 67c283c (DIMS/equal; CLI)    now
=======================  =========================  ==========================================  ==================
angle_mean_pool          (correct)                  ✓ 22 ops / ? 0 of 22; CLI ✓ 22 ops          unchanged
angle_mean_pool          global-mask-sum            ✓ 22 ops / ? 0 of 22; CLI ✗                 unchanged
                                                    batch-entries-mix (measured)
c2c_decode_mask_column   (correct)                  ✓ 40 ops / ? 13 of 40; CLI ✓ 40 ops         ✓ 41 ops (CLI too)
c2c_decode_mask_column   mask-first-column          ✓ 41 ops / ? 13 of 41; CLI ✓ (missed)       ✗ mask-wrong-axis
                                                                                                (DIMS, equal, CLI)
paligemma_pad_unmasked   (correct)                  ? 9 of 27 / ? nothing; CLI ? 9 of 27        unchanged
paligemma_pad_unmasked   open-prefix-after-padding  ? 9 of 27 / ? nothing; CLI ? 9 of 27        unchanged
llama4_chunked_left_pad  (correct)                  ? 20 of 21 / ? 0 of 21; CLI ? 20 of 21      unchanged
llama4_chunked_left_pad  chunks-from-column         ? 18 of 20 / ? 0 of 20; CLI ? 18 of 20      unchanged
=======================  =========================  ==========================================  ==================

At first sight, at DIMS, the 4 correct files were ✓ 2, ? 2, ✗ 0; the 4 bugs ✗ 0, ? 2, ✓ 2 (the CLI: ✗ 1, ? 2,
✓ 1). Now: correct ✓ 2, ? 2, ✗ 0; bugs ✗ 1, ? 2, ✓ 1 (the CLI: ✗ 2, ? 2, ✓ 0). The fix, in two commits:
engine/axis_compute gives a decode step's one query (an unnamed size-1 row contracted over ``d_k`` against token
keys) the query role, kept through the scale and the mask (before, the step's mask addition had no row and no
rule read it); engine/rules/masks says ``mask-wrong-axis`` of a hiding mask that varies along the batch but is
broadcast over the keys (one value on every key of a row: all hidden or none), tested in
tests/engine/test_axis_compute.py and tests/engine/test_masks.py. It also made reports12's
llama_embeds_cache_position bug read its decode step's causal mask (see test_public_reports12).
Since db014bd (engine/pooled.py's ``pooled-read-unmeasured``) c2c_decode_mask_column's correct file is ``?`` in
``round_outcome``: its output has no token axis under a causal mask, beside a mask among its arguments, and which
token it reads is not measured there; the CLI measures it and keeps ``✓``.

Open:

* angle_mean_pool global-mask-sum: ``round_outcome`` (no contracts measured) keeps ``✓``; the CLI measures
  ``batch-entries-mix`` (tested below). The ``sum`` of the ``(B, T)`` mask to a scalar is recorded; a rule
  "a reduction over the batch meets per-sequence values" would also flag batch norms (``x - x.mean(0)``) and
  the masked mean loss, so it was left to the measured contract.
* paligemma_pad_unmasked (round 28: the ``cat`` of the image features and the text embeddings, both the model's
  arguments, is seeded ``[B, T, D]`` as one input (tests/engine/test_infer_seeds.py): correct ``? 9 of 27`` -> ``?
  27 of 28`` (``#0 linear`` of the image features alone unnamed), the bug ``?`` -> ``! mask-skips-ahead`` at
  distinct sizes; what follows was the state before): the additive mask is built from ``full``, ``triu``,
  ``expand`` and ``masked_fill``
  of ``(B, 1, T, T)`` tables whose axes stay unnamed (``#0 linear``, ``#1 cat`` of the image and text tokens
  unnamed at T = N + S): ``?`` on both; the bug is a value of the mask (pad columns 0) that only a check of
  the padding mask against the final mask would see.
* llama4_chunked_left_pad: ``?`` on both (``__getitem__`` of the padding mask by an ``arange`` grid unnamed);
  where each chunk starts is a value of the mask, and both forms are chunked causal masks.

Branch inputs1 (engine/lengths_read.py): llama4_chunked_left_pad's correct file adds ``not proven: the pads of a
mask the model builds from its lengths were not measured unread`` (its ``[B]`` lengths build one): still ``? 20 of
21``.
"""

from __future__ import annotations

import torch

import shapetrace
from tests.corpus.helpers import round_tests
from tests.corpus.reports15 import (
    angle_mean_pool,
    c2c_decode_mask_column,
    llama4_chunked_left_pad,
    paligemma_pad_unmasked,
)

MODULES = (angle_mean_pool, c2c_decode_mask_column, paligemma_pad_unmasked, llama4_chunked_left_pad)
OK, UNSURE = ("✓", ()), ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (angle_mean_pool, ""): [OK, UNSURE],
    (angle_mean_pool, "global-mask-sum"): [OK, UNSURE],                       # (missed unmeasured; CLI ✗)
    (c2c_decode_mask_column, ""): [UNSURE, UNSURE],   # (✓ / ? on eefe532: pooled-read-unmeasured; CLI ✓)
    (c2c_decode_mask_column, "mask-first-column"): [("✗", ("mask-wrong-axis",))] * 2,
    (paligemma_pad_unmasked, ""): [UNSURE, UNSURE],
    (paligemma_pad_unmasked, "open-prefix-after-padding"): [("!", ("mask-skips-ahead",)), UNSURE],   # (r28: ? -> !)
    (llama4_chunked_left_pad, ""): [UNSURE, UNSURE],
    (llama4_chunked_left_pad, "chunks-from-column"): [UNSURE, UNSURE],
}
MISSED = {
    (angle_mean_pool, "global-mask-sum"):
        "a scalar sum of the (B, T) mask divides per-sequence sums: caught by the measured batch contract alone",
}
#: the rows also traced at equal sizes (the others' equal-size outcomes measured once, above)
EQUAL_TESTED = {(c2c_decode_mask_column, "mask-first-column")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED, missed=frozenset(MISSED))


def _measured(bug: str):
    """angle_mean_pool traced as ``shapetrace trace`` traces it: the dependency contracts measured."""
    model, inputs = angle_mean_pool.build(bug)
    with torch.no_grad(), shapetrace.trace(dims=angle_mean_pool.DIMS[0]) as t:
        t.check_dependencies()
        model(*inputs)
    return t


def test_the_global_mask_sum_mixes_batch_entries_where_measured():
    t = _measured("global-mask-sum")
    assert [(d.severity, d.kind) for d in t.diagnostics if d.severity == "error"] == [("error", "batch-entries-mix")]
    assert t.report().verdict.line.startswith("✗ 1 error")


def test_the_per_sequence_mean_keeps_batch_entries_apart():
    t = _measured("")
    assert [d for d in t.diagnostics if d.severity == "error"] == []
    assert t.report().verdict.line.startswith("✓ checked all 22 ops")
    assert "held on the values: batch entries stay apart" in t.report().verdict.line
