"""A fifty-second round of public-style files (tests/corpus/public52: attention that mixes heads, blocks, packed
images, compressed memories and two kinds of tokens on purpose), traced at distinct sizes and at equal sizes, first
sight recorded on 8b5bbf79 (main plus the files):

* deepvit_reattention — lucidrains/vit-pytorch ``deepvit.py`` (re-attention: the heads' maps mixed by a learned
  ``H x H`` matrix after the softmax, then a LayerNorm over the heads); bugs ``softmax-over-queries``,
  ``norm-back-transposed`` (the norm's way back permuted ``(0, 3, 2, 1)``: the maps come back transposed);
* nest_blocks — lucidrains/vit-pytorch ``nest.py`` (a feature map cut into ``K x K`` blocks folded into the batch,
  attention in each block by 1x1 convolutions, conv + norm + max-pool aggregation); bugs
  ``blocks-merged-batch-last`` (``(b1 b2 b)`` on the way back), ``heads-merged-d-major`` (``(d h)`` channels);
* memory_compressed — lucidrains/memory-compressed-attention (keys and values shortened by a strided grouped
  ``Conv1d``, a null key, causal mask by the last position of each block); bugs ``mask-after-softmax`` (the public
  file's own order: the mask is written into the scores after the softmax read them), ``heads-view-no-transpose``;
* luke_entity_aware — huggingface/transformers ``LukeSelfAttention`` (four query projections for word/entity pairs,
  four score blocks concatenated); bugs ``mask-on-queries``, ``mask-concat-entities-first``;
* navit_packing — lucidrains/vit-pytorch ``na_vit.py`` (several images packed per row, a block-diagonal mask from
  image ids and a padding mask from lengths, attention pooling per image slot); bugs ``pad-mask-on-queries``,
  ``pooled-flattened-n-major`` (pooled slots flattened ``(n b)``, the keep mask ``(b n)``).

=================== ========================== ============================================= ==========================
file                variant                    first sight (DIMS | equal)                    now
=================== ========================== ============================================= ==========================
deepvit_reattention (correct)                  ? | ?  (heads-mixed-by-matrix: #11 on unnamed)
deepvit_reattention softmax-over-queries       ✗ softmax-wrong-axis (both)
deepvit_reattention norm-back-transposed       ? | ?  (permutes after the mixing)            ✗ values-by-queries (both)
nest_blocks         (correct)                  ? | ?  (0 of 34 ops checked: the map unnamed)
nest_blocks         blocks-merged-batch-last   ? | ?
nest_blocks         heads-merged-d-major       ? | ?
memory_compressed   (correct)                  ? | ?  (the compressed causal mask: no pattern)
memory_compressed   mask-after-softmax         ? | ?                                         ✗ mask-after-softmax (both)
memory_compressed   heads-view-no-transpose    ✗ mixed-axis | ✗ broadcast-mismatch,
                                               reduction-over-wrong-axis
luke_entity_aware   (correct)                  **✗ query-key-swapped** (both)                ✓ | ?
luke_entity_aware   mask-on-queries            ✗ query-key-swapped (both; not the bug)       ✗ mask-wrong-axis (both)
luke_entity_aware   mask-concat-entities-first ✗ query-key-swapped, broadcast-mismatch       ✗ broadcast-mismatch (both)
navit_packing       (correct)                  ? | ?
navit_packing       pad-mask-on-queries        ✗ mask-wrong-axis | ?
navit_packing       pooled-flattened-n-major   ? | ?
=================== ========================== ============================================= ==========================

No bug gets ``✓``. At first sight LUKE's correct file was ``✗``: its entity-to-word block ``e2w_query(entities) @
key[:, :, :word_size]ᵀ`` (matmul #30) multiplies the entities (named S, the declared second sequence) by the words
(T), and the engine read S as the keys' axis and T as the queries', calling the block's queries and keys swapped,
though the entities are queries there (keys in the word-to-entity block); the same false finding stood for the
mask-on-queries bug, whose own slip went unsaid. The fixes (tests/engine/test_joined_blocks.py, each test fails on
8b5bbf79):

* shapetrace/engine/rules/query_key.py: the names ``[..., S, T]`` decide a swap only where neither operand's
  projection says where it belongs (the key projection's output on the columns, or the query projection's on the
  rows, is the order ``q @ kᵀ``);
* shapetrace/engine/axis_moves.py ``cat_axes``: blocks that share a role along the joined axis (queries, keys) keep
  it, so the joined ``[T+S, T+S]`` scores are scores, and a padding mask laid on their query axis is
  ``mask-wrong-axis``;
* shapetrace/engine/padding.py: a padding mask joined with another mask (the words' and the entities') is still
  the mask: the padding contract is measured through the join (held on the correct file, broken by
  mask-on-queries);
* shapetrace/engine/rules/weighted_values.py: the weights are followed back to their softmax through rows whose
  other operands entered (DeepViT's learned ``[H, H]`` head-mixing matrix, the LayerNorm over the heads), so the
  norm's way back permuted ``(0, 3, 2, 1)`` is ``values-by-queries`` (tests/engine/test_weighted_values.py);
* shapetrace/engine/rules/masks.py ``mask_written_after_softmax``: a hiding fill written in place into scores a
  softmax has already read, and read by nothing after, is ``mask-after-softmax``.

Still open: NesT's channel-first feature map gets no names (0 of 34 ops checked), so neither of its bugs is judged;
DeepViT's heads after the mixing matrix have no name (the correct file stays ``?``); NaViT's pooled slots
flattened ``(n b)`` go through indexing on unnamed axes.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public52 import deepvit_reattention, luke_entity_aware, memory_compressed, navit_packing, nest_blocks

MODULES = (deepvit_reattention, nest_blocks, memory_compressed, luke_entity_aware, navit_packing)
UNSURE = ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then equal sizes
EXPECTED = {
    (deepvit_reattention, ""): [UNSURE, UNSURE],
    (deepvit_reattention, "softmax-over-queries"): [("✗", ("softmax-wrong-axis",))] * 2,
    (deepvit_reattention, "norm-back-transposed"): [("✗", ("values-by-queries",))] * 2,
    (nest_blocks, ""): [UNSURE, UNSURE],
    (nest_blocks, "blocks-merged-batch-last"): [UNSURE, UNSURE],
    (nest_blocks, "heads-merged-d-major"): [UNSURE, UNSURE],
    (memory_compressed, ""): [UNSURE, UNSURE],
    (memory_compressed, "mask-after-softmax"): [("✗", ("mask-after-softmax",))] * 2,
    (memory_compressed, "heads-view-no-transpose"): [("✗", ("mixed-axis",)),
                                                     ("✗", ("broadcast-mismatch", "reduction-over-wrong-axis"))],
    (luke_entity_aware, ""): [("✓", ()), UNSURE],
    (luke_entity_aware, "mask-on-queries"): [("✗", ("mask-wrong-axis",))] * 2,
    (luke_entity_aware, "mask-concat-entities-first"): [("✗", ("broadcast-mismatch",))] * 2,
    (navit_packing, ""): [UNSURE, UNSURE],
    (navit_packing, "pad-mask-on-queries"): [("✗", ("mask-wrong-axis",)), UNSURE],
    (navit_packing, "pooled-flattened-n-major"): [UNSURE, UNSURE],
}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED)
