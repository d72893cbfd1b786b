"""A fourth round of files after public bug reports (tests/corpus/reports4; each file's docstring cites its
report), traced at their DIMS and at B = T = H = 4, first sight recorded on 90e1ad1 before any fix.

* detr_mask_heads_softmax — facebookresearch/detr issue #247: ``MHAttentionMap``'s softmax over
  ``weights.flatten(2)``, the heads joined with the pixels;
* sk_attention_batch_softmax — xmu-xiaoma666/External-Attention-pytorch issue #18: SKAttention's branch
  weights ``(k, bs, c, 1, 1)`` softmaxed over the batch;
* fuxictr_heads_view — reczoo/FuxiCTR issue #30: heads split by ``view(B·H, -1, d)`` with no transpose;
* megatron_rope_position_ids — NVIDIA/Megatron-LM issue #453: the rotary table by place in a packed
  sequence, ``position_ids`` (reset per document) never read;
* rendezvous_softmax_heads — CAMMA-public/rendezvous issue #10: ``nn.Softmax(dim=1)`` over the heads of
  ``[B, Head, D, D]`` channel scores;
* gqa_query_groups_summed — fkodom/grouped-query-attention-pytorch issue #5: ``"bghnd,bhsd->bhns"`` sums
  the query heads that share a key head (DIMS declare ``H_kv=2``);
* lens_left_pad_positions — TransformerLensOrg/TransformerLens issue #1609 (PR #1610): GPT-2's learned
  positions at ``arange(T)`` in a left-padded batch;
* jsbaan_merge_permute — jsbaan/transformer-from-scratch PR #6 (issue #4): heads merged by ``reshape`` with
  no ``permute`` (a class round 2 covered, in another project's idiom).

First sight on 90e1ad1 (``round_outcome``: at DIMS, then B = T = H = 4; the CLI, run as a user would at
``--dims "B=2 T=6 D=32 H=4"`` and at B = T = H = 4, agreed at DIMS, and at equal sizes it names nothing):

=============================  =====================  ===========================================  =====================
file                           variant                first sight (DIMS / equal)                   now
=============================  =====================  ===========================================  =====================
detr_mask_heads_softmax        (correct)              ? 8 of 10 (#7 #8 unsqueeze) / ?              ? / ?
detr_mask_heads_softmax        flatten-heads          ! tokens-merged-with-features / !            ! / !
sk_attention_batch_softmax     (correct)              ? 3 of 16 (BatchNorm: no names) / ?          ? 5 of 16 / ?
sk_attention_batch_softmax     softmax-batch          ? / ?                                        ✗ softmax-wrong-axis
fuxictr_heads_view             (correct)              ✓ 16 ops / ?                                 ✓ / ?
fuxictr_heads_view             view-no-transpose      ✗ mixed-axis ×4 / ✗ attends-over-heads       ✗ / ✗
megatron_rope_position_ids     (correct)              ✗ broadcast-mismatch (false) / ✗             ✓ 27 ops / ?
megatron_rope_position_ids     table-by-place         ? (position_ids never read) / ?              ? / ?
rendezvous_softmax_heads       (correct)              ? (channels attend to channels) / ?          ? / ?
rendezvous_softmax_heads       softmax-heads          ✓ 14 ops (false ✓) / ✓                       ✗ softmax-wrong-axis
gqa_query_groups_summed        (correct)              ✓ 18 ops / ?                                 ✓ / ?
gqa_query_groups_summed        groups-summed          ✓ 17 ops (false ✓) / ?                       ✗ reduction-over-…
lens_left_pad_positions        (correct)              ✗ nan-rows (false) / ✗ nan-rows              ? / ?
lens_left_pad_positions        positions-from-arange  ✗ nan-rows (not the bug) / ✗ nan-rows        ? / ?
jsbaan_merge_permute           (correct)              ✓ 12 ops / ?                                 ✓ / ?
jsbaan_merge_permute           no-permute             ✗ mixed-axis / ✗ tokens-merged-with-features ✗ / ✗
=============================  =====================  ===========================================  =====================

(gqa without ``H_kv`` declared: ``?`` for both variants at both sizes at first sight; now the bug is ``✗``.)
At first sight, at DIMS, the 8 correct files were ✓ 3, ? 3, ✗ 2 (Megatron, TransformerLens); the 8 bugs
✗ 3 (one of them, TransformerLens', for a NaN that is not its bug), ! 1, ? 2, ✓ 2 (rendezvous, GQA). Now:
correct ✓ 4, ? 4, ✗ 0; bugs ✗ 5, ! 1, ? 2, ✓ 0. The fixes, one general mechanism each:

* ``infer/elements``: an index of several axes along one named axis (``emb[position_ids]``, ``(B, T)``
  positions into a ``(T, d)`` table) names each output axis by its index axis, or not at all: both were
  ``T[position_ids]``, tokens on the batch axis, and the rotation a false ``broadcast-mismatch``;
* ``nan_held``: all-NaN softmax rows that the code itself replaces before any use
  (``torch.where(isnan(p), zeros_like(p), p)``) are no ``nan-rows`` error;
* ``rules/weights``: a softmax along named heads or batch of product scores with no key axis, on a leading
  axis of the product (computed apart), that weighs values, is ``softmax-wrong-axis``;
* ``rules/reductions``: an einsum that sums over a heads axis while it contracts that operand's head
  features (q·k) is ``reduction-over-wrong-axis``;
* ``op_table``: ``batch_norm``/``instance_norm`` keep their input's axes (SKAttention's branches lost
  every name through ``BatchNorm2d``);
* ``infer/names`` and ``rules/reductions``: softmax weights are followed into calls with no row, and a sum
  whose operand they entered by a ``*`` with features weighs the values (SKAttention's
  ``(weights * feats).sum(0)``): its softmax over the batch is ``softmax-wrong-axis``.

What stays ``?``, and why: Megatron's and
TransformerLens' position bugs are read only from values (a table read at the wrong rows: the bug file
says ``position_ids`` was never read, which is true); DETR's correct file leaves the padding mask's
``unsqueeze`` unnamed ((B, h, w) pixels are not declared names), and its bug's softmax over ``n·h·w`` is a
warning (tokens merged with features), not an error; the channel attention of rendezvous stays ``?`` by
design (a softmax over features of a feature-by-feature product).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports4 import (
    detr_mask_heads_softmax,
    fuxictr_heads_view,
    gqa_query_groups_summed,
    jsbaan_merge_permute,
    lens_left_pad_positions,
    megatron_rope_position_ids,
    rendezvous_softmax_heads,
    sk_attention_batch_softmax,
)

MODULES = (detr_mask_heads_softmax, sk_attention_batch_softmax, fuxictr_heads_view, megatron_rope_position_ids,
           rendezvous_softmax_heads, gqa_query_groups_summed, lens_left_pad_positions, jsbaan_merge_permute)
OK, UNSURE = ("✓", ()), ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (detr_mask_heads_softmax, ""): [UNSURE, UNSURE],
    (detr_mask_heads_softmax, "flatten-heads"): [("!", ("tokens-merged-with-features",))] * 2,
    (sk_attention_batch_softmax, ""): [UNSURE, UNSURE],
    (sk_attention_batch_softmax, "softmax-batch"): [("✗", ("softmax-wrong-axis",))] * 2,   # (? at 90e1ad1)
    (fuxictr_heads_view, ""): [OK, UNSURE],
    (fuxictr_heads_view, "view-no-transpose"): [("✗", ("mixed-axis",) * 4), ("✗", ("attends-over-heads",))],
    (megatron_rope_position_ids, ""): [OK, UNSURE],   # (✗ broadcast-mismatch at both sizes at 90e1ad1)
    (megatron_rope_position_ids, "table-by-place"): [UNSURE, UNSURE],
    (rendezvous_softmax_heads, ""): [UNSURE, UNSURE],
    (rendezvous_softmax_heads, "softmax-heads"): [("✗", ("softmax-wrong-axis",))] * 2,   # (✓ at 90e1ad1)
    (gqa_query_groups_summed, ""): [OK, UNSURE],
    (gqa_query_groups_summed, "groups-summed"): [("✗", ("reduction-over-wrong-axis",))] * 2,   # (✓, ?)
    (lens_left_pad_positions, ""): [UNSURE, UNSURE],   # (✗ nan-rows at 90e1ad1)
    (lens_left_pad_positions, "positions-from-arange"): [UNSURE, UNSURE],   # (✗ nan-rows at 90e1ad1)
    (jsbaan_merge_permute, ""): [OK, UNSURE],
    (jsbaan_merge_permute, "no-permute"): [("✗", ("mixed-axis",)), ("✗", ("tokens-merged-with-features",))],
}


test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED)
