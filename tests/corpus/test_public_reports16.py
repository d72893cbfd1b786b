"""A sixteenth round of files after public bug reports (tests/corpus/reports16; each file's docstring cites its
report), traced at their DIMS and at B = T = H = 4, first sight recorded on 981467c (the files committed as
01f2f59) before any fix. A short round: four files.

* seya_backward_flip_batch — EderSantana/seya issue #32: a bidirectional RNN's backward states re-reversed
  along the batch (``Xb[::-1]`` in Keras; here ``xb.flip(0)``) instead of along the tokens;
* st_prompt_left_pad — huggingface/sentence-transformers PR #3598: the prompt left out of the mean pooling by
  ``attention_mask[:, :prompt_length] = 0``, which in a left-padded row zeroes pads and keeps the prompt;
* esmc_pad_pairs_mask — Biohub/esm issue #299: ESMC's mask ``seq_id.unsqueeze(-1) == seq_id.unsqueeze(-2)``,
  which lets every pad query attend the other pads;
* gpt2_cross_mask_dropped — huggingface/transformers PR #47946: GPT-2's ``encoder_attention_mask`` set to
  ``None`` before the cross-attention, so the encoder's pads are attended.

First sight (``round_outcome``: at DIMS / at equal sizes; the CLI, ``cd /tmp && shapetrace trace FILE [bug]
--dims "<DIMS>"``, which measures the dependency contracts):

=======================  ====================  ===========================================  =====================
file                     variant               first sight on 981467c (DIMS/equal; CLI)     now (5bf5e6f)
=======================  ====================  ===========================================  =====================
seya_backward_flip_batch (correct)             ? 7 of 21 / ? 0 of 21; CLI ? 7 of 21         unchanged
seya_backward_flip_batch flip-batch            ? 7 of 21 / ? 0 of 21; CLI ✗                  ✗ roll-not-undone ×2
                                               batch-entries-mix (measured)                 (DIMS, equal, CLI)
st_prompt_left_pad       (correct)             ✓ 25 ops / ? 2 of 25; CLI ✓ 25 ops           unchanged
st_prompt_left_pad       prompt-first-columns  ✓ 24 ops / ? 1 of 24; CLI ✓ (missed)         unchanged (missed)
esmc_pad_pairs_mask      (correct)             ✓ 17 ops / ? 0 of 17; CLI ✓ 17 ops           unchanged
esmc_pad_pairs_mask      pads-equal            ✓ 18 ops / ? 0 of 18; CLI ✓ (missed)         unchanged (missed)
gpt2_cross_mask_dropped  (correct)             ✓ 48 ops / ? 12 of 48; CLI ✓ 48 ops          unchanged
gpt2_cross_mask_dropped  encoder-mask-dropped  ? 46 of 46 (an input no op read) / ? 11 of   unchanged
                                               46; CLI ? the same
=======================  ====================  ===========================================  =====================

At first sight, at DIMS, the 4 correct files were ✓ 3, ? 1, ✗ 0; the 4 bugs ✗ 0, ? 2, ✓ 2 (the CLI: ✗ 1, ? 1,
✓ 2). Now: correct unchanged; bugs ✗ 1, ? 1, ✓ 2 (the CLI: ✗ 1, ? 1, ✓ 2). The fix (engine/rolls,
tests/engine/test_rolls.py and test_infer_elements.py): a ``flip`` is followed as a ``roll`` is, a reversal of
one named piece that a second flip undoes; reversed tokens that went through a recurrence or an attention and
then meet themselves in order (a broadcast, or a ``cat`` along another axis) are ``roll-not-undone`` at the
flip. The seya bug is now ✗ without the measured contracts, at DIMS and at equal sizes (flip #1: the tokens
still reversed; flip #3: the batch reversed).

Open:

* seya_backward_flip_batch (correct) is ``?``: the GRU's hidden width D/2 is named ``2·d_k`` (a width read off
  the sizes) and the ``cat`` of the two halves ``2·d_k+2·d_k``, which no projection reads as features, so the
  q/k/v projections after it are unnamed. A width named by size arithmetic, not by where it came from: left
  for a naming round (the other helper works on naming in this round).
* st_prompt_left_pad prompt-first-columns (missed in the CLI's path): both forms zero a token range of the
  pooling mask; which tokens are the prompt in a left-padded row is a value no name or contract holds (the mask
  the bug writes is a valid pooling mask of other prompts). Since db014bd ``round_outcome`` gives both rows ``?``
  (engine/pooled.py's ``pooled-read-unmeasured``: a causal model's pool over a mask among its arguments, not
  measured there); the CLI measures the pooled contract, which holds on both (the mean reads the last token
  either way), and keeps ``✓`` on both: the xfail below checks that path.
* esmc_pad_pairs_mask pads-equal (missed): the bug's mask is, on its values, the block-diagonal mask of a row
  packed with two sequences (ESM's own ``seq_id == seq_id`` packing form), and the real tokens' outputs are the
  same in both forms (the issue says so); only the pads' rows differ.
* gpt2_cross_mask_dropped encoder-mask-dropped: ``?`` (the mask given and never read), not ``✗``: an input a
  model may ignore on purpose.
"""

from __future__ import annotations

import pytest

from tests.corpus.helpers import round_outcome, round_tests
from tests.corpus.reports16 import (
    esmc_pad_pairs_mask,
    gpt2_cross_mask_dropped,
    seya_backward_flip_batch,
    st_prompt_left_pad,
)

MODULES = (seya_backward_flip_batch, st_prompt_left_pad, esmc_pad_pairs_mask, gpt2_cross_mask_dropped)
OK, UNSURE = ("✓", ()), ("?", ())
FLIPS = ("✗", ("roll-not-undone", "roll-not-undone"))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (seya_backward_flip_batch, ""): [UNSURE, UNSURE],
    (seya_backward_flip_batch, "flip-batch"): [FLIPS, FLIPS],
    (st_prompt_left_pad, ""): [UNSURE, UNSURE],                                 # (✓ / ? on eefe532)
    (st_prompt_left_pad, "prompt-first-columns"): [UNSURE, UNSURE],             # (✓ / ? on eefe532; CLI missed)
    (esmc_pad_pairs_mask, ""): [OK, UNSURE],
    (esmc_pad_pairs_mask, "pads-equal"): [OK, UNSURE],                          # (missed)
    (gpt2_cross_mask_dropped, ""): [OK, UNSURE],
    (gpt2_cross_mask_dropped, "encoder-mask-dropped"): [UNSURE, UNSURE],
}
MISSED = {
    (st_prompt_left_pad, "prompt-first-columns"):
        "which tokens of a left-padded row are the prompt is a value: both forms zero a valid token range",
    (esmc_pad_pairs_mask, "pads-equal"):
        "the mask equals a packed row's block-diagonal mask on its values; only the pads' own rows differ",
}
#: the rows also traced at equal sizes (the others' equal-size outcomes measured once, above)
EQUAL_TESTED = {(seya_backward_flip_batch, "flip-batch")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED, missed=frozenset(MISSED))


def test_the_prompt_cut_from_the_first_columns_of_a_left_padded_mask_is_not_checked_without_the_contracts():
    """``round_outcome`` (no dependency contracts): ``?`` with the pooled token unmeasured (``✓`` on eefe532)."""
    assert round_outcome(st_prompt_left_pad, "prompt-first-columns", st_prompt_left_pad.DIMS[0])[0] == "?"


@pytest.mark.xfail(strict=True, reason=MISSED[(st_prompt_left_pad, "prompt-first-columns")])
def test_the_prompt_cut_from_the_first_columns_of_a_left_padded_mask_is_not_checked():
    """The CLI's path (the dependency contracts measured: the pooled contract holds) keeps ``✓``."""
    import torch

    import shapetrace

    model, inputs = st_prompt_left_pad.build("prompt-first-columns")
    with torch.no_grad(), shapetrace.trace(dims=st_prompt_left_pad.DIMS[0], dependencies=True) as t:
        model(*inputs)
    assert t.report().verdict.mark != "✓"


@pytest.mark.xfail(strict=True, reason=MISSED[(esmc_pad_pairs_mask, "pads-equal")])
def test_pads_attending_pads_is_not_checked():
    assert round_outcome(esmc_pad_pairs_mask, "pads-equal", esmc_pad_pairs_mask.DIMS[0])[0] != "✓"
