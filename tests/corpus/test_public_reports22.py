"""A twenty-second round of files after public bug reports (tests/corpus/reports22; each file's docstring cites
its report), traced at their DIMS and, for two rows, at B = T = H = 4 (the other rows' equal-size column was
measured once and is kept in the table: the suite's time is a budget), first sight recorded on 33cfee3 (the
files committed before any engine change; the fifth, lighthouse, on the same engine). A short round: five files.

* uer_mean_pooling_pads — dbiir/UER-py PR #190: the sentence vector ``output.mean(dim=1)`` over all
  ``seq_length`` rows, pads included (the encoder's attention masked them from ``seg``);
* feedback_layer_weight_axes — lucidrains/feedback-transformer-pytorch issue #8: the per-layer memory weights
  rearranged ``'d -> d () ()'`` against hiddens ``[depth, b, n, dim]``, so with ``b == depth`` they broadcast
  along the batch axis (every layer summed with weight 1);
* encoding_softmax_codewords — zhanghang1989/PyTorch-Encoding issue #114 / PR #115: EncNet's soft assignment
  ``softmax(scaledL2, dim=1)`` over the N descriptors instead of the K codewords;
* resepformer_memory_batch_fold — speechbrain/speechbrain PR #1811: RE-SepFormer's memory transformer fed the
  chunk summaries of the whole batch as one sequence ``[1, B*S, D]``;
* lighthouse_mask_repeat_tiles — line/lighthouse PR #77: a 3D text-padding mask for sequence-first
  ``nn.MultiheadAttention`` built with ``.repeat(nhead, 1, 1)`` (tiles: head rows take another sample's mask)
  instead of ``repeat_interleave(nhead, dim=0)``.

First sight (``round_outcome``: at DIMS / at equal sizes; the CLI, ``cd /tmp && shapetrace trace FILE [bug]
--dims "B=2 T=6 D=32 H=4"``, gave the same verdicts at DIMS):

=============================  ========================  =========================================  =========
file                           variant                   first sight on 33cfee3 (DIMS/equal)        now
=============================  ========================  =========================================  =========
uer_mean_pooling_pads          (correct)                 ✓ 30 ops / ? 0 of 30                       unchanged
uer_mean_pooling_pads          mean-over-pads            ! pooled-over-padding (28 of 28) / ?       unchanged
feedback_layer_weight_axes     (correct)                 ? 21 of 23 (stack, sum unnamed) / ?        unchanged
feedback_layer_weight_axes     weight-three-axes         ? 21 of 23 (stack, sum unnamed) / raises   unchanged
encoding_softmax_codewords     (correct)                 ? 2 of 6 / ? 0 of 6                        unchanged
encoding_softmax_codewords     softmax-over-descriptors  ? 2 of 6 / ? 0 of 6                        unchanged
resepformer_memory_batch_fold  (correct)                 ? nothing checked / ?                      unchanged
resepformer_memory_batch_fold  batch-in-sequence         ? nothing checked / ?                      unchanged
lighthouse_mask_repeat_tiles   (correct)                 ? 4 of 28 / ? 0 of 28                      unchanged
lighthouse_mask_repeat_tiles   repeat-tiles              ? 4 of 28 / ? 0 of 28                      unchanged
=============================  ========================  =========================================  =========

At first sight the 5 correct files were ✓ 1, ? 4, ✗ 0; the 5 bugs ✓ 0, ? 4, and one warned (``!``
pooled-over-padding: UER's mean over the padded rows, named at DIMS). No ``✓`` on a bug and no ``✗`` on correct
code, so no engine change was made in this short round.

Open (a later round):

* feedback_layer_weight_axes (bug): ``?``. A ``[2]`` parameter, rearranged to ``[2, 1, 1]``, multiplies the
  stacked hiddens ``[2(depth), B=2, T, D]``: broadcasting aligns the parameter with the batch axis. The
  stacked axis is left unnamed (``#8 stack``, ``#9 sum``), so no contract reads that a weight (a parameter,
  the same for every example) is applied per batch row; at B = 4 the bug raises in torch itself.
* encoding_softmax_codewords: ``?`` on both. The codeword axis (K, a parameter's rows) has no name; the
  softmax over the descriptors (T) instead of the codewords is only an error once K is named as the axis
  the assignment normalises along; nothing in what torch records says which of the two is meant.
* resepformer_memory_batch_fold: ``?`` on both. The channels-first ``[B, D, K, S]`` input names no axis, so
  the fold of B into the sequence (``reshape(1, B*S, D)``) is not read.
* lighthouse_mask_repeat_tiles: ``?`` on both. The mask ``[B*H, T, S]`` is built from a ``[B, S]`` bool
  input (S = 5, named by no dim) and handed to the fused ``nn.MultiheadAttention``; ``repeat`` and
  ``repeat_interleave`` give the same shape, and which head row holds which sample's mask is only in the
  values (a mask whose meaning is in its values stays ``?``), unless the mask's batch provenance through
  ``repeat`` is followed into the fused kernel's ``(N * num_heads)`` layout.
* the equal-size column is ``?`` throughout (nothing is named by size alone).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports22 import (
    encoding_softmax_codewords,
    feedback_layer_weight_axes,
    lighthouse_mask_repeat_tiles,
    resepformer_memory_batch_fold,
    uer_mean_pooling_pads,
)

MODULES = (uer_mean_pooling_pads, feedback_layer_weight_axes, encoding_softmax_codewords,
           resepformer_memory_batch_fold, lighthouse_mask_repeat_tiles)
OK, UNSURE, RAISES = ("✓", ()), ("?", ()), ("raises", ())
POOLED_PADS = ("!", ("pooled-over-padding",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (uer_mean_pooling_pads, ""): [OK, UNSURE],
    (uer_mean_pooling_pads, "mean-over-pads"): [POOLED_PADS, UNSURE],
    (feedback_layer_weight_axes, ""): [UNSURE, UNSURE],
    (feedback_layer_weight_axes, "weight-three-axes"): [UNSURE, RAISES],
    (encoding_softmax_codewords, ""): [UNSURE, UNSURE],
    (encoding_softmax_codewords, "softmax-over-descriptors"): [UNSURE, UNSURE],
    (resepformer_memory_batch_fold, ""): [UNSURE, UNSURE],
    (resepformer_memory_batch_fold, "batch-in-sequence"): [UNSURE, UNSURE],
    (lighthouse_mask_repeat_tiles, ""): [UNSURE, UNSURE],
    (lighthouse_mask_repeat_tiles, "repeat-tiles"): [UNSURE, UNSURE],
}
#: the rows also traced at equal sizes (the others' equal-size outcomes measured once, above)
EQUAL_TESTED = {(uer_mean_pooling_pads, "mean-over-pads"), (feedback_layer_weight_axes, "weight-three-axes")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
