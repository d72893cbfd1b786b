"""A thirty-seventh round of files after public bug reports (tests/corpus/reports37; each file's docstring cites
its report), traced at their DIMS and at equal sizes (B = T = H = 4). First sight recorded on 8b5bbf79 (main,
plus the round's files).

* torchtitan_varlen_extra_transpose — pytorch/torchtitan issue #2223: the varlen backend's token-major output
  transposed (1, 2) once more before ``.view(bs, seqlen, -1)``;
* tokenlearner_view_for_transpose — rish-16/tokenlearner-pytorch issue #1: learned tokens ``(B, S, D)`` handed to
  a sequence-first ``nn.MultiheadAttention`` with ``view(S, B, D)`` (and back with ``view``) for ``transpose``;
* duet_mahalanobis_einsum_diag — decisionintelligence/DUET issue #6: ``einsum("dd,bxcd->bxcd", A, diff)`` takes
  A's diagonal where ``"dk,bxck->bxcd"`` applies the matrix;
* fla_cache_offset_heads — fla-org/flash-linear-attention issue #126: the cache's seen-token offset read from
  ``q.shape[2]`` (the heads) of ``[B, T, H, d]``, so the decoding step is rotated at position H, not T;
* xtransformers_mask_query_axis — lucidrains/x-transformers issue #172: a key padding mask rearranged
  ``'b i -> b 1 i 1'`` (the queries) where ``'b j -> b 1 1 j'`` masks the keys.

First sight (``round_outcome`` at each DIMS / at its equal sizes; with ``dependencies=True`` where that differs,
in brackets; the CLI, ``cd /tmp && shapetrace trace FILE [bug] --dims DIMS``, in the last column).

=================================  ==================  ====================================  ===========================
file                               variant             round_outcome 8b5bbf79                CLI on 8b5bbf79
=================================  ==================  ====================================  ===========================
torchtitan_varlen_extra_transpose  (correct)           ✓ / ?                                 ✓ (a false note, below)
torchtitan_varlen_extra_transpose  extra-transpose     ✗ mixed-axis / ✗                      ✗ mixed-axis
                                                       projection-over-tokens
tokenlearner_view_for_transpose    (correct)           ? / ?                                 ? 3 of 30
tokenlearner_view_for_transpose    view-for-transpose  ? [✗ batch-entries-mix] / ?           ✗ batch-entries-mix
duet_mahalanobis_einsum_diag       (correct)           ? / ?                                 ? 1 of 25
duet_mahalanobis_einsum_diag       einsum-diagonal     ? / ?                                 ? 1 of 25
fla_cache_offset_heads             (correct)           ✓ / ?                                 ✓
fla_cache_offset_heads             offset-heads        ✗ rotary-position-off / ?             ✗ rotary-position-off
xtransformers_mask_query_axis      (correct)           ✓ / ?                                 ? 19 of 24
xtransformers_mask_query_axis      mask-query-axis     ✗ mask-wrong-axis / ✗ (same)          ✗ mask-wrong-axis
=================================  ==================  ====================================  ===========================

No bug gets ``✓`` and no correct file gets ``✗`` anywhere. At equal sizes ``fla_cache_offset_heads``'s bug is
no bug (T = H: the heads count is the tokens count) and both variants are ``?``; the other equal-size ``?`` are
the ambiguity of names found from sizes alone.

Fixed since (tests/engine/test_joined_blocks.py): ``torchtitan_varlen_extra_transpose`` (correct) carried a note
``nonstandard-head-split`` on the varlen wrapper's unpacking ``view(bs, seqlen, n_heads, head_dim)``: the packed
axis, rebuilt by a ``cat`` of the documents' outputs, was named ``B·T[0:6]+B·T[6:12]`` and the view read as a split
of the features, a false statement about correct code under a ``✓``. Cuts of a fold joined back in order are the
fold (shapetrace/engine/axis_moves.py ``_reordered_whole``): the join is ``B*T``, the view ``[B, T, H, d_k]``, no
note. The bug at equal sizes now reads ``✗ tokens-merged-with-features`` (the merge sees ``[B, H, T, d_k]``) where
it read ``✗ projection-over-tokens``.

Open (for the engine, not fixed in this round):

* ``duet_mahalanobis_einsum_diag``: 1 of 25 ops checked at DIMS (the channel axis V has no role; the spectrum's
  ``T // 2 + 1`` frequencies are unnamed), so the diagonal ``"dd,..."`` einsum is never judged;
* ``tokenlearner_view_for_transpose``: the learned tokens (S, a ``Linear(D, S)`` width pooled by an einsum) stay
  unnamed, 3 of 30 ops checked; the bug is seen only by the value measurement (``dependencies=True``, and the CLI);
* ``xtransformers_mask_query_axis`` (correct): ``round_outcome`` says ``✓`` where the CLI says ``? 19 of 24`` (the
  CLI cannot tell which axis of the ``[2, 6]`` bool mask is the batch).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports37 import (
    duet_mahalanobis_einsum_diag,
    fla_cache_offset_heads,
    tokenlearner_view_for_transpose,
    torchtitan_varlen_extra_transpose,
    xtransformers_mask_query_axis,
)

MODULES = (torchtitan_varlen_extra_transpose, tokenlearner_view_for_transpose, duet_mahalanobis_einsum_diag,
           fla_cache_offset_heads, xtransformers_mask_query_axis)
UNSURE, SURE = ("?", ()), ("✓", ())
MIXED = ("✗", ("mixed-axis",))
MERGED = ("✗", ("tokens-merged-with-features",))
ROTARY_OFF = ("✗", ("rotary-position-off",))
MASK_AXIS = ("✗", ("mask-wrong-axis",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (torchtitan_varlen_extra_transpose, ""): [SURE, UNSURE],
    (torchtitan_varlen_extra_transpose, "extra-transpose"): [MIXED, MERGED],
    (tokenlearner_view_for_transpose, ""): [UNSURE, UNSURE],
    (tokenlearner_view_for_transpose, "view-for-transpose"): [UNSURE, UNSURE],
    (duet_mahalanobis_einsum_diag, ""): [UNSURE, UNSURE],
    (duet_mahalanobis_einsum_diag, "einsum-diagonal"): [UNSURE, UNSURE],
    (fla_cache_offset_heads, ""): [SURE, UNSURE],
    (fla_cache_offset_heads, "offset-heads"): [ROTARY_OFF, UNSURE],
    (xtransformers_mask_query_axis, ""): [SURE, UNSURE],
    (xtransformers_mask_query_axis, "mask-query-axis"): [MASK_AXIS, MASK_AXIS],
}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED)
