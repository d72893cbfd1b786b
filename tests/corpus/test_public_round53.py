"""A fifty-third round of public-style files (tests/corpus/public53: a pixel-shuffle connector, graphs packed then
padded, attention weights computed once and reused heads first, two streams joined under one rotary table, 3-D
rope with a split context), traced at distinct sizes and at equal sizes, first sight recorded on dd823467 (main
plus the files):

* idefics3_pixel_shuffle — huggingface/transformers ``Idefics3Connector.pixel_shuffle`` (SmolVLM's too: ``view``,
  ``permute``, ``reshape`` into fewer, wider tokens, a modality projection) feeding a Llama-style self-attention over
  the image tokens and the text; bugs ``shuffle-no-permute`` (the first ``permute(0, 2, 1, 3)`` left out),
  ``merge-heads-no-transpose``;
* graphgps_dense_batch — rampasek/GraphGPS ``GPSLayer`` with PyG's ``to_dense_batch`` (nodes of several graphs
  packed, scattered into ``[B, max_nodes, F]``, ``key_padding_mask=~mask``, ``h_attn[mask]``); bugs
  ``mask-not-inverted``, ``dense-index-node-major`` (the dense index node-major, the buffer viewed graph-major);
* zipformer_shared_weights — k2-fsa/icefall Zipformer (``RelPositionMultiheadAttentionWeights`` heads first
  ``(head, batch, time1, time2)`` with relative-position scores shifted by ``gather``, reused by two
  ``SelfAttention`` modules); bugs ``key-mask-on-queries`` (``key_padding_mask.unsqueeze(-1)``),
  ``out-batch-time-swapped`` (``permute(1, 2, 0, 3)`` read back as sequence-first);
* flux_double_stream — black-forest-labs/flux ``DoubleStreamBlock`` (``rearrange(qkv, "B L (K H D) -> K B H L
  D")``, ``cat((txt_q, img_q), dim=2)``, ``EmbedND`` rotary matrices over ``cat((txt_ids, img_ids))``, split back at
  the text length); bugs ``ids-image-first`` (the rotary table's ids joined image first), ``qkv-heads-outer``
  (``"B L (H K D)"`` on a ``(K H D)`` linear);
* wan_rope3d_cross — Wan-Video/Wan2.1 ``WanSelfAttention`` (complex 3-D rope, the head dim split over frames,
  height, width) and ``WanI2VCrossAttention`` (the context split, image tokens first); bugs
  ``rope-height-width-swapped``, ``context-split-text-first``.

======================== ========================= ============================================================
file                     variant                   first sight (DIMS | equal; with dependencies where they differ)
======================== ========================= ============================================================
idefics3_pixel_shuffle   (correct)                 ? | ?  (0 of 25 ops checked: the G x G patches unnamed)
idefics3_pixel_shuffle   shuffle-no-permute        ? | ?
idefics3_pixel_shuffle   merge-heads-no-transpose  ? | ?  (with dependencies ✗ heads-mix, both)
graphgps_dense_batch     (correct)                 ? | ?  (nothing checked: the packed nodes unnamed)
graphgps_dense_batch     mask-not-inverted         ✗ mask-hides-every-key (both)
graphgps_dense_batch     dense-index-node-major    ? | ?
zipformer_shared_weights (correct)                 ? | ?
zipformer_shared_weights key-mask-on-queries       ? | ?  (with dependencies ✗ padding-read | ?)
zipformer_shared_weights out-batch-time-swapped    ✗ broadcast-mismatch ×2 (both)
flux_double_stream       (correct)                 ? | ?
flux_double_stream       ids-image-first           ✗ broadcast-mismatch ×2, contracts-different-axes | ?
flux_double_stream       qkv-heads-outer           ? | ?
wan_rope3d_cross         (correct)                 ? | ?  (note input-unread: grid_sizes read by tolist, true)
wan_rope3d_cross         rope-height-width-swapped ? | ?
wan_rope3d_cross         context-split-text-first  ? | ?
======================== ========================= ============================================================

No bug gets ``✓`` and no correct file ``✗``; the notes on correct code are true (Wan's ``input-unread``: the grid
sizes are read only as Python numbers). Flux's ``ids-image-first`` is caught at mul #36 (the table's ``T+S`` tokens
against the queries' ``S+T``), but its third finding, ``contracts-different-axes`` at sdpa #48, says each key is
paired with another token's value, though keys and values are joined in the same order (only the keys' rotation
is wrong); at equal sizes (T = 4, S = 5) the bug is ``?``. The CLI at DIMS (the scripts run whole, their inputs made
inside the trace) says ``?`` for Flux's ``ids-image-first`` and Zipformer's ``key-mask-on-queries`` too: the ids
and the padding mask made in the script get no names there.

Still open: Idefics3's patches ``[B, G*G, V]`` and GraphGPS's packed ``[N_all, D]`` nodes get no names, so
neither file's layout is checked (the shuffle without its permute, the node-major dense index); Flux's ``(H K D)``
split and Wan's swapped height/width tables and context split pass unjudged; Zipformer's key mask laid on the
queries is judged only by the dependency contracts at distinct sizes.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public53 import (
    flux_double_stream,
    graphgps_dense_batch,
    idefics3_pixel_shuffle,
    wan_rope3d_cross,
    zipformer_shared_weights,
)

MODULES = (idefics3_pixel_shuffle, graphgps_dense_batch, zipformer_shared_weights, flux_double_stream,
           wan_rope3d_cross)
UNSURE = ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then equal sizes
EXPECTED = {
    (idefics3_pixel_shuffle, ""): [UNSURE, UNSURE],
    (idefics3_pixel_shuffle, "shuffle-no-permute"): [UNSURE, UNSURE],
    (idefics3_pixel_shuffle, "merge-heads-no-transpose"): [UNSURE, UNSURE],
    (graphgps_dense_batch, ""): [UNSURE, UNSURE],
    (graphgps_dense_batch, "mask-not-inverted"): [("✗", ("mask-hides-every-key",))] * 2,
    (graphgps_dense_batch, "dense-index-node-major"): [UNSURE, UNSURE],
    (zipformer_shared_weights, ""): [UNSURE, UNSURE],
    (zipformer_shared_weights, "key-mask-on-queries"): [UNSURE, UNSURE],
    (zipformer_shared_weights, "out-batch-time-swapped"): [("✗", ("broadcast-mismatch", "broadcast-mismatch"))] * 2,
    (flux_double_stream, ""): [UNSURE, UNSURE],
    (flux_double_stream, "ids-image-first"): [("✗", ("broadcast-mismatch", "broadcast-mismatch",
                                                     "contracts-different-axes")), UNSURE],
    (flux_double_stream, "qkv-heads-outer"): [UNSURE, UNSURE],
    (wan_rope3d_cross, ""): [UNSURE, UNSURE],
    (wan_rope3d_cross, "rope-height-width-swapped"): [UNSURE, UNSURE],
    (wan_rope3d_cross, "context-split-text-first"): [UNSURE, UNSURE],
}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED)
