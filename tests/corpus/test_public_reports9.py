"""A ninth round of files after public bug reports (tests/corpus/reports9; each file's docstring cites its
report), traced at their DIMS and at B = T = H = 4 (physicsnemo's grid fixes T: B = H = 4 there), first sight
recorded on f0e0295 before any fix.

* llama_scratch_rmsnorm — bkitano/llama-from-scratch issue #4: the RMSNorm's statistic over ``dim=(1, 2)``
  of ``[B, T, D]``, one per sequence, in a causal model;
* gatr_baseline_layernorm — Qualcomm-AI-research/geometric-algebra-transformer PR #8: ``F.layer_norm`` with
  ``normalized_shape=x.shape[1:]`` (over the tokens and the features);
* coursia_mean_pooling — jsboige/CoursIA issue #15045, PR #15074: mean pooling over a padded batch without
  the ``attention_mask``;
* paligemma_prefix_mask — huggingface/transformers PR #30918 (PR #30967): the 4-D mask from the padding mask
  alone, no causal part over the suffix;
* physicsnemo_roll_shift — NVIDIA/physicsnemo issue #1399: ``torch.roll(x, shifts=(-shift_lat, -shift_lat))``
  on non-square windows, rolled back by ``(shift_lat, shift_lon)``;
* mlx_decoder_norm — ml-explore/mlx issue #1636: ``ln1`` where ``ln2`` belongs (a twin: freshly built, the
  two norms are the same function);
* reward_forcing_sink_evict — JaydenLyh/Reward-Forcing issue #5: the attention-sink cache evicting its newest
  entries (a twin: the kept entries are the cache's first ones in order, what a rollback records);
* aiayn_layer_normalization — jadore801120/attention-is-all-you-need-pytorch PR #17: the hand-written
  LayerNormalization's mean and std over the positions (``dim=1``, kept), ``expand_as`` back onto them;
* trajectory_prenorm_residual — Howuhh/faster-trajectory-transformer issue #3: ``norm_x + attn(norm_x)`` (a
  twin: what a norm before a block that adds its own input records).

First sight (``round_outcome``: at DIMS / at equal sizes; the CLI, ``cd /tmp && shapetrace trace FILE [bug]
--dims DIMS``):

===========================  ====================  ====================================  =========================
file                         variant               first sight on f0e0295 (DIMS/equal)   now
===========================  ====================  ====================================  =========================
llama_scratch_rmsnorm        (correct)             ✓ / ?; CLI ✓ 22 ops                   ✓ / ?
llama_scratch_rmsnorm        rms-over-sequence     ✓ / ?; CLI ✗ causal-mask-leaks        ! / ?; CLI ✗ and !
gatr_baseline_layernorm      (correct)             ✓ / ?; CLI ✓ 14 ops                   ✓ / ?
gatr_baseline_layernorm      norm-over-tokens      ✗ norm-over-tokens / ✗; CLI ✗         ✗ / ✗
coursia_mean_pooling         (correct)             ✓ / ?; CLI ? 18 of 25                 ✓ / ?
coursia_mean_pooling         mean-over-padding     ✓ / ?; CLI ? 18 of 23                 ! / ?; CLI ? (open)
paligemma_prefix_mask        (correct)             ? 8 of 26 / ?; CLI ? 6 of 27          ? / ?
paligemma_prefix_mask        padding-mask-only     ? 1 of 19 / ?; CLI ? (input-unread)   ? / ?
physicsnemo_roll_shift       (correct)             ? / ?; CLI ? 26 of 29                 ? / ?
physicsnemo_roll_shift       lat-shift-twice       ✗ roll-not-undone / ✗; CLI ✗          ✗ / ✗
mlx_decoder_norm             (correct)             ? 36 of 56 / ?; CLI ? 37 of 57        ? / ?
mlx_decoder_norm             ln1-twice (twin)      ? / ?; CLI ?                          ? / ?
reward_forcing_sink_evict    (correct)             ✓ 30 ops / ?; CLI ✓                   ✓ / ?
reward_forcing_sink_evict    evict-newest (twin)   ✓ / ?; CLI ✓                          ✓ / ? (twin)
aiayn_layer_normalization    (correct)             ✓ 24 ops / ?; CLI ✓                   ✓ / ?
aiayn_layer_normalization    stats-over-positions  ✓ / ?; CLI ✓                          ! / ?; CLI ! (2 warnings)
trajectory_prenorm_residual  (correct)             ✓ 21 ops / ?; CLI ✓                   ✓ / ?
trajectory_prenorm_residual  residual-from-norm    ✓ / ?; CLI ✓                          ✓ / ? (twin)
===========================  ====================  ====================================  =========================

At first sight, at DIMS, the 9 correct files were ✓ 6, ? 3, ✗ 0 (the CLI: ✓ 5, ? 4, ✗ 0); the 6 bugs ✗ 2, ? 1,
✓ 3 (llama_scratch's, coursia's and aiayn's; the CLI: ✗ 3, ? 2, ✓ 1), and the 3 twins ✓ 2, ? 1. Now the bugs:
✗ 2, ! 3, ? 1, ✓ 0 (the CLI: ✗ 3, ! 1, ? 2); the correct files unchanged. The fixes (rules/reductions):

* ``statistics_over_tokens``: a statistic taken over the tokens and the features together, each batch entry
  apart, read back on the tokens, is the same warning as one over the tokens alone; and a statistic a row
  reads directly and spreads back over the tensor it was taken from (``mu.expand_as(z)``) is read back too;
* ``pooled_over_padding`` (``pooled-over-padding``): a ``mean`` over the tokens of hidden states after an op
  hid keys along them with a per-batch-entry mask.

Open: coursia's bug stays ``?`` in the CLI (the script's own names leave the mask unnamed there); paligemma's
mask with no causal part over the suffix is a bidirectional encoder's as torch records it (``?`` both ways).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports9 import (
    aiayn_layer_normalization,
    coursia_mean_pooling,
    gatr_baseline_layernorm,
    llama_scratch_rmsnorm,
    mlx_decoder_norm,
    paligemma_prefix_mask,
    physicsnemo_roll_shift,
    reward_forcing_sink_evict,
    trajectory_prenorm_residual,
)

MODULES = (llama_scratch_rmsnorm, gatr_baseline_layernorm, coursia_mean_pooling, paligemma_prefix_mask,
           physicsnemo_roll_shift, mlx_decoder_norm, reward_forcing_sink_evict, aiayn_layer_normalization,
           trajectory_prenorm_residual)
OK, UNSURE = ("✓", ()), ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (llama_scratch_rmsnorm, ""): [OK, UNSURE],
    (llama_scratch_rmsnorm, "rms-over-sequence"): [("!", ("normalised-over-tokens",)), UNSURE],   # (✓ ? at f0e0295)
    (gatr_baseline_layernorm, ""): [OK, UNSURE],
    (gatr_baseline_layernorm, "norm-over-tokens"): [("✗", ("norm-over-tokens",))] * 2,
    (coursia_mean_pooling, ""): [OK, UNSURE],
    (coursia_mean_pooling, "mean-over-padding"): [("!", ("pooled-over-padding",)), UNSURE],      # (✓ ? at f0e0295)
    (paligemma_prefix_mask, ""): [UNSURE, UNSURE],
    (paligemma_prefix_mask, "padding-mask-only"): [UNSURE, UNSURE],
    (physicsnemo_roll_shift, ""): [UNSURE, UNSURE],
    (physicsnemo_roll_shift, "lat-shift-twice"): [("✗", ("roll-not-undone",))] * 2,
    (mlx_decoder_norm, ""): [UNSURE, UNSURE],
    (mlx_decoder_norm, "ln1-twice"): [UNSURE, UNSURE],                       # (a twin: ln1 and ln2 equal at init)
    (reward_forcing_sink_evict, ""): [OK, UNSURE],
    (reward_forcing_sink_evict, "evict-newest"): [OK, UNSURE],               # (a twin: a rollback records this)
    (aiayn_layer_normalization, ""): [OK, UNSURE],
    (aiayn_layer_normalization, "stats-over-positions"): [("!", ("normalised-over-tokens",) * 2), UNSURE],  # (✓ ?)
    (trajectory_prenorm_residual, ""): [OK, UNSURE],
    (trajectory_prenorm_residual, "residual-from-norm"): [OK, UNSURE],       # (a twin: a design choice)
}
#: the rows also traced at equal sizes (the others' equal-size outcomes measured once, above)
EQUAL_TESTED = {(llama_scratch_rmsnorm, "rms-over-sequence"), (gatr_baseline_layernorm, "norm-over-tokens"),
                (coursia_mean_pooling, "mean-over-padding"), (aiayn_layer_normalization, "stats-over-positions")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
