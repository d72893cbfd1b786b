"""A seventh round of files after public bug reports (tests/corpus/reports7; each file's docstring cites its
report), traced at their DIMS and at B = T = H = 4 (the vision files at Hp = Wp = 4), first sight recorded on
a8dba97 before any fix.

* halonet_mask_inverted — lucidrains/halonet-pytorch issue #4, PR #6: the halo windows' padding mask used
  as is (``mask.bool()``), so every real pixel is hidden and each block attends to the zero padding;
* graph_mask_heads — lucidrains/graph-transformer-pytorch PR #2: the pairwise node mask ``(b, i, j)`` laid on
  scores ``(b, h, i, j)`` without its heads axis (silent where B = H: batch row b masks head b);
* olmo_packed_positions — allenai/OLMo-core PR #591 (torchtitan issue #2559): RoPE from the packed row's
  global positions; a twin (RoPE is relative and the document mask keeps each query in its document: the
  per-document offset cancels, outputs agree to 6e-8);
* maxtext_mla_double_scale — AI-Hypercomputer/maxtext issue #3138: MLA's queries pre-scaled, then a fused
  kernel scales again; twin: the fused kernel on unscaled queries;
* timm_attention2d_scale — huggingface/pytorch-image-models issue #2385: ``num_heads ** -0.5`` for
  ``dim_head ** -0.5``; twin: the fused path (correct);
* flaggems_scale_loop — flagos-ai/FlagGems issue #409, PR #424: ``qk_scale *= log2 e`` inside the loop over
  key blocks, so each later block's logits are scaled once more;
* mha_padding_inverted — pytorch/pytorch issue #27968: a keep-mask (True = real token) given to
  ``nn.MultiheadAttention`` as ``key_padding_mask`` (True = ignore);
* gemma4_bidirectional_all — huggingface/transformers issue #46077, PR #46079: a causal mask where
  bidirectional attention was configured; a twin (a causal decoder is the same trace).

First sight (``round_outcome``: at DIMS / at equal sizes; the CLI, run as a user would, ``shapetrace trace
FILE [bug] --dims DIMS``, gave the same marks and kinds at DIMS for every variant):

=========================  =========================  ===========================================  ===========
file                       variant                    first sight on a8dba97 (DIMS / equal)        now
=========================  =========================  ===========================================  ===========
halonet_mask_inverted      (correct)                  ? 7 of 37 (F.unfold's windows unnamed) / ?   ? / ?
halonet_mask_inverted      mask-not-inverted          ? 7 of 37 / ?                                ? / ?
graph_mask_heads           (correct)                  ? 21 of 24 (the edge features unnamed) / ?   ? / ?
graph_mask_heads           mask-over-heads            ✗ broadcast-mismatch / ?                     ✗ / ?
olmo_packed_positions      (correct)                  ? 23 of 25 (the document ids unnamed) / ?    ✓ / ?
olmo_packed_positions      global-positions (twin)    ? 22 of 24 / ?                               ✓ / ?
maxtext_mla_double_scale   (correct)                  ? 6 of 14 (the KV latent unnamed) / ?        ? / ?
maxtext_mla_double_scale   fused-kernel-scales-again  ? 3 of 14 / ?                                ! / !
maxtext_mla_double_scale   fused-unscaled (twin)      ? 3 of 14 / ?                                ? / ?
timm_attention2d_scale     (correct)                  ? 10 of 10 (#6 transpose: two N axes) / ?    ✓ / ✓
timm_attention2d_scale     scale-by-heads             ? 10 of 10 / ?                               ! / !
timm_attention2d_scale     fused (twin)               ✓ 10 ops / ✓                                 ✓ / ✓
flaggems_scale_loop        (correct)                  ? 25 of 31 (the blocks' sums unnamed) / ?    ? / ?
flaggems_scale_loop        scale-grows-per-block      ? 25 of 31 / ?                               ! / !
mha_padding_inverted       (correct)                  ? 28 of 32 (the lengths' batch unnamed) / ?  ? / ?
mha_padding_inverted       keep-mask-as-padding       ✗ nan-rows / ✗                               ✗ / ✗
gemma4_bidirectional_all   (correct)                  ✓ 20 ops / ?                                 ✓ / ?
gemma4_bidirectional_all   causal-for-encoder (twin)  ✓ 22 ops / ?                                 ✓ / ?
=========================  =========================  ===========================================  ===========

At first sight, at DIMS, the 8 correct files were ✓ 1, ? 7, ✗ 0 (the 4 twins ✓ 2, ? 2); the 6 bugs ✗ 2, ? 4,
✓ 0 (olmo's variant, first counted a bug, was ? and is a twin). Now: correct ✓ 3, ? 5, ✗ 0; bugs ✗ 2, ! 3,
? 1, ✓ 0. The fixes, one general mechanism each:

* ``rules/masks.scale`` (all under ``scale-not-head-dim``, a warning): scores summed over d_k scaled by 1/√H
  (H != d_k); queries multiplied by 1/√w on their way into an SDPA called without ``scale=``; one line of one
  module scaling its scores by a factor that changes from call to call (FlagGems' loop over key blocks);
* ``verdict._twins_swapped``: a move of two axes of one name is checked where the scores' product gave them
  the roles query and key (the weighted-values and softmax rules read them): timm's ``v @ attnᵀ``;
* the op registry: ``searchsorted`` (the values' axes) and ``bucketize``: OLMo-core's document ids.

What stays ``?``, and why: HaloNet's keys are ``F.unfold`` windows (``[B, D·k², L]``) that no rule names,
and its inverted mask still leaves each window real keys or padding to see (no slice hides every key); the
graph file's edge features ``[B, T, T, D]`` are seeded by no rule; MLA's latent (``kv_lora_rank``, a width
no name declares) leaves the keys and values unnamed; FlagGems' blocks of keys are slices ``[3:6]`` of T whose
sums and products stay unnamed; the lengths ``[B]`` of mha_padding_inverted enter as a one-axis tensor
that no rule seeds (branch inputs1 seeds it ``[B]``: ``? checked 32 of 32; not proven: the pads of a mask the
model builds from its lengths were not measured unread``, engine/lengths_read.py, still ``?``).
Equal sizes: B = T = H leave the names to sizes, so the graph file's mask and the twins' files stay ``?`` there.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports7 import (
    flaggems_scale_loop,
    gemma4_bidirectional_all,
    graph_mask_heads,
    halonet_mask_inverted,
    maxtext_mla_double_scale,
    mha_padding_inverted,
    olmo_packed_positions,
    timm_attention2d_scale,
)

MODULES = (halonet_mask_inverted, graph_mask_heads, olmo_packed_positions, maxtext_mla_double_scale,
           timm_attention2d_scale, flaggems_scale_loop, mha_padding_inverted, gemma4_bidirectional_all)
OK, UNSURE = ("✓", ()), ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (halonet_mask_inverted, ""): [UNSURE, UNSURE],
    (halonet_mask_inverted, "mask-not-inverted"): [UNSURE, UNSURE],
    (graph_mask_heads, ""): [UNSURE, UNSURE],
    (graph_mask_heads, "mask-over-heads"): [("✗", ("broadcast-mismatch",)), UNSURE],
    (olmo_packed_positions, ""): [OK, UNSURE],                        # (? at a8dba97)
    (olmo_packed_positions, "global-positions"): [OK, UNSURE],        # (a twin: RoPE is relative)
    (maxtext_mla_double_scale, ""): [UNSURE, UNSURE],
    (maxtext_mla_double_scale, "fused-kernel-scales-again"): [("!", ("scale-not-head-dim",))] * 2,   # (? ? at a8dba97)
    (maxtext_mla_double_scale, "fused-unscaled"): [UNSURE, UNSURE],
    (timm_attention2d_scale, ""): [OK, OK],                           # (? ? at a8dba97)
    (timm_attention2d_scale, "scale-by-heads"): [("!", ("scale-not-head-dim",))] * 2,   # (? ? at a8dba97)
    (timm_attention2d_scale, "fused"): [OK, OK],
    (flaggems_scale_loop, ""): [UNSURE, UNSURE],
    (flaggems_scale_loop, "scale-grows-per-block"): [("!", ("scale-not-head-dim",))] * 2,   # (? ? at a8dba97)
    (mha_padding_inverted, ""): [UNSURE, UNSURE],
    (mha_padding_inverted, "keep-mask-as-padding"): [("✗", ("nan-rows",))] * 2,
    (gemma4_bidirectional_all, ""): [OK, UNSURE],
    (gemma4_bidirectional_all, "causal-for-encoder"): [OK, UNSURE],   # (a twin: the configuration's choice)
}


test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED)
