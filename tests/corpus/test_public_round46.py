"""A forty-sixth round of public-style files (tests/corpus/public46: WeNet's Squeezeformer, relative-position
attention with Transformer-XL's ``rel_shift``, the frames halved by a strided depthwise ``Conv1d`` between layers and
doubled back by ``repeat_interleave``; TiSASRec's time-interval-aware attention, heads folded head-major by
``cat(split(...))`` and one table of interval keys and values per (query, key) pair; Uni-Mol's attention over atoms,
a Gaussian pair bias per head ``(B·H, N, N)`` handed from layer to layer as the pair representation; Point-BERT's
point-patch transformer, FPS centers, a kNN gather with ``idx_base``, a mini-PointNet per patch), traced at distinct
sizes and at equal sizes, first sight recorded before any fix (on bf74372: main 6527aa1 + the files; TiSASRec's
on c40c3fb, below).

``round_outcome`` (distinct | equal sizes) and the CLI (``cd /tmp && shapetrace trace FILE [bug] --dims DIMS``, at
the first DIMS, on the same commits: the same marks as the distinct column):

=================== ======================== ================================ ======================== ==========
file                variant                  distinct (first sight)           equal (first sight)      after fixes
=================== ======================== ================================ ======================== ==========
squeezeformer_wenet (correct)                ✗ mixed-axis                     ✗ mixed-axis             ? | ?
squeezeformer_wenet recover-tiled            ✗ mixed-axis                     ✗ mixed-axis             ? | ?
squeezeformer_wenet context-no-transpose     ✗ mixed-axis ×2, broadcast-mism. ✗ broadcast-mismatch,    ✗ | ✗
                                                                              mixed-axis
squeezeformer_wenet recover-unsqueeze-repeat ✗ mixed-axis                     ✗ mixed-axis             ? | ?
tisasrec_time_aware (correct)                ✗ attends-over-wrong-axis        ✗ attends-over-wrong-axis ? | ?
tisasrec_time_aware merge-heads-by-reshape   ✗ attends-over-wrong-axis,       ✗ broadcast-mismatch     ✗ | ✗
                                             mixed-axis
tisasrec_time_aware padding-on-queries       ✗ mask-wrong-axis,               ✗ (the same two)         ✗ | ✗
                                             attends-over-wrong-axis
tisasrec_time_aware merge-heads-by-view      ✗ attends-over-wrong-axis        ✗ attends-over-wrong-axis ? | ?
unimol_pair_bias    (correct)                ? 70 of 77                       ? nothing named          ? | ?
unimol_pair_bias    bias-view-without-permute ✗ mixed-axis ×3                 ? nothing named          ✗ | ?
unimol_pair_bias    pair-out-head-major      ✗ projection-over-tokens         ? nothing named          ✗ | ?
point_bert          (correct)                ? 0 of 103                       ? 0 of 103               ? | ?
point_bert          idx-base-missing         ? 0 of 102                       ? 0 of 102               ? | ?
point_bert          encoder-reshape-not-t.   ? 0 of 102                       ? 0 of 102               ? | ?
=================== ======================== ================================ ======================== ==========

TiSASRec as first committed (bf74372) followed pmixer's padding mask, ``time_mask.unsqueeze(-1)`` over the keys: it
fills the padded *queries* and leaves the padded keys open to every real query. Main's engine said so (``✗
mask-wrong-axis``, with ``attends-over-wrong-axis``, at both sizes; the bug and the twin as well): a finding on the
upstream code, not a false one. Before any engine change (c40c3fb) the correct file fills the padded keys, as the
TensorFlow original's ``key_masks`` do, and pmixer's layout became the bug ``padding-on-queries``; the table's
TiSASRec rows are measured on c40c3fb.

At first sight (distinct sizes): the 4 correct files ✓ 0, ? 2, ✗ 2 (Squeezeformer, TiSASRec); the 8 bugs ✗ 6
(Squeezeformer's ``recover-tiled`` only for its correct file's false finding), ? 2, ✓ 0. After the fixes: correct
✓ 0, ? 4, ✗ 0 (and none ✗ at equal sizes); bugs ✗ 5, ? 3, ✓ 0.

The fixes (each test fails on the commit before it):

* engine/rules/diagnose ``_sums_over_tokens``: a batched product that sums over one whole token axis under one
  clean name in both operands, its batch axes lining up, mixes the keys: TiSASRec's interval values
  ``attn.unsqueeze(-2) @ time_matrix_V_`` (``[H·B, T, 1, T] @ [H·B, T, T, d_k]``) were a false
  ``attends-over-wrong-axis`` (tests/engine/test_diagnose.py
  ``test_a_product_per_query_that_sums_over_the_keys_mixes_the_tokens``; its twin summed over the heads stays the
  error).
* engine/propagate ``_padding_cut``: the diagonal skew of padded scores is read on any token axis, declared,
  derived or cut (``1+T/2`` beside ``T/2`` or ``N[0:4]``): Squeezeformer's reduced layers' ``rel_shift`` was a false
  ``mixed-axis`` (tests/engine/test_propagate.py
  ``test_the_skew_of_scores_over_tokens_cut_by_a_stride_leaves_its_axes_unnamed``).

Why each stays ``?``:

* squeezeformer_wenet (128 of 161): the strided ``Conv1d``'s frames are named ``N``, not ``T/2`` (a convolution's
  output length is not derived from its input's), and the cut ``xs[:, :L - T]`` is ``N[0:4]``: the ``L - T``
  arithmetic on two read sizes carries no provenance. So the recovered frames ``repeat_interleave(N[0:4])`` cannot be
  lined up with the kept ``T`` frames, and ``recover-tiled`` (``repeat(1, 2, 1)``: frame t reads reduced frame ``t mod
  T/2``, not ``t // 2``) is not seen: an axis of copies outside ``N`` against one inside it is exactly what a
  provenance rule would tell apart once ``N`` is known to be ``T/2``. ``pos_emb``'s feature axis (a buffer's) is
  unnamed, and the padding mask built from lengths is not measured.
* tisasrec_time_aware (102 of 102): every op is checked; the masks are built with ``torch.where`` on a tensor of
  ``-FLOAT_MAX`` (not read as a direction), and the item ids turn into floats along several paths, so the token
  contracts are not measured.
* unimol_pair_bias (70 of 77): the Gaussian basis ``expand(-1, -1, -1, K)`` and its projection to the heads are
  unnamed (K is no declared size), and the pair bias's values are not read. At equal sizes (B = T = 4) the ids
  ``[4, 4]`` fit both orders, nothing is named, and both bugs are ``?``.
* point_bert (0 of 103): the cloud ``[B, 8·T, 3]`` has no declared size but B; the tokens are FPS centers
  gathered by value-derived indices (``farthest_point_sample``, ``topk``), so nothing is named and neither bug
  (the missing ``idx_base`` cuts every cloud's patches from the first cloud; the ``reshape(bs·g, 3, n)`` for a
  transpose mixes coordinates of different points) is seen. A dependency probe would catch ``idx-base-missing``
  (batch entries mix) where tokens could be named.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public46 import point_bert, squeezeformer_wenet, tisasrec_time_aware, unimol_pair_bias

MODULES = (squeezeformer_wenet, tisasrec_time_aware, unimol_pair_bias, point_bert)
UNSURE = ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (squeezeformer_wenet, ""): [UNSURE, UNSURE],                      # (both: ✗ -> ? after the propagate fix)
    (squeezeformer_wenet, "recover-tiled"): [UNSURE, UNSURE],
    (squeezeformer_wenet, "context-no-transpose"): [("✗", ("mixed-axis", "broadcast-mismatch")),
                                                    ("✗", ("broadcast-mismatch",))],
    (squeezeformer_wenet, "recover-unsqueeze-repeat"): [UNSURE, UNSURE],
    (tisasrec_time_aware, ""): [UNSURE, UNSURE],                      # (both: ✗ -> ? after the diagnose fix)
    (tisasrec_time_aware, "merge-heads-by-reshape"): [("✗", ("mixed-axis",)), ("✗", ("broadcast-mismatch",))],
    (tisasrec_time_aware, "padding-on-queries"): [("✗", ("mask-wrong-axis",))] * 2,
    (tisasrec_time_aware, "merge-heads-by-view"): [UNSURE, UNSURE],
    (unimol_pair_bias, ""): [UNSURE, UNSURE],
    (unimol_pair_bias, "bias-view-without-permute"): [("✗", ("mixed-axis",)), UNSURE],
    (unimol_pair_bias, "pair-out-head-major"): [("✗", ("projection-over-tokens",)), UNSURE],
    (point_bert, ""): [UNSURE, UNSURE],
    (point_bert, "idx-base-missing"): [UNSURE, UNSURE],
    (point_bert, "encoder-reshape-not-transpose"): [UNSURE, UNSURE],
}

#: only the rows the fixes changed at equal sizes are traced there too, and of those only the correct files (the
#: suite's time is a budget: the others' equal-size outcomes are the table above, measured once on 474a1f6)
EQUAL_TESTED = frozenset({(squeezeformer_wenet, ""), (tisasrec_time_aware, "")})

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
