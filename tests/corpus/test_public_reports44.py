"""A forty-fourth round of files after public bug reports about a cross-attention context's batch order, a value
product's missing transpose, a per-head mask's order, a missing scale and a padding mask laid after the softmax
(tests/corpus/reports44; each file's docstring cites its report), traced at their DIMS and at equal sizes
(B = T = H = 4). First sight recorded on the working tree (main, plus the round's files).

* diffusers_svd_time_context — huggingface/diffusers pull request #7268: SVD's ``time_context`` broadcast
  ``(h w b)`` where the temporal block's tokens are ``(b h w)`` (``time-context-hw-major``); the temporal block's
  ``(b, f, s, c) -> (b*s, f, c)`` without ``permute(0, 2, 1, 3)`` (``frames-not-permuted``);
* sagan_attention_not_transposed — heykeetae/Self-Attention-GAN issue #11: ``bmm(proj_value,
  attention.permute(0,1,2))`` (``attention-not-transposed``); ``nn.Softmax(dim=1)`` (``softmax-over-queries``);
* fuxictr_bst_heads_mask — reczoo/FuxiCTR issue #130: BST's ``(B*H, L, L)`` mask for ``nn.MultiheadAttention``;
  the quoted ``repeat(1, L*H, 1).view(-1, L, L)`` is batch-major as the fix (twin ``quoted-repeat-view``, outputs
  equal); ``repeat(num_heads, 1, 1)`` (``mask-heads-outer``); ``x > 0`` read as True = masked
  (``padding-polarity``);
* monai_generative_cross_scale — Project-MONAI/GenerativeModels issue #146: ``CrossAttention`` without
  ``self.scale`` (``no-scale``); ``reshape_batch_dim_to_heads`` without its permute (``batch-to-heads-no-permute``);
* vigg_ribonanza_mask_2d — autosome-ru/vigg_ribonanza issue #1: the padding mask multiplied after the softmax over
  the keys only (``mask-keys-only``, the reported code) or as the issue's 2-d mask (``mask2d-after-softmax``, the
  issue's fix, still after the softmax); the mask broadcast over the queries (``mask-queries-only``).

First sight (``round_outcome`` at each DIMS / at its equal sizes; ``dependencies=True`` gives the same outcome
everywhere in this round; the CLI, ``cd /tmp && shapetrace trace FILE [bug] --dims DIMS``, agrees at DIMS).

==============================  ==========================  ==============================================
file                            variant                     round_outcome (DIMS / EQUAL)
==============================  ==========================  ==============================================
diffusers_svd_time_context      (correct)                   ? / ?   (3 of 80 ops checked)
diffusers_svd_time_context      time-context-hw-major       ? / ?
diffusers_svd_time_context      frames-not-permuted         ? / ?
sagan_attention_not_transposed  (correct)                   ? / ?   (7 of 13: conv2d maps unnamed)
sagan_attention_not_transposed  attention-not-transposed    ✗ values-by-queries / the same
sagan_attention_not_transposed  softmax-over-queries        ✗ softmax-wrong-axis / the same
fuxictr_bst_heads_mask          (correct)                   ? / ?   (2 of 45)
fuxictr_bst_heads_mask          mask-heads-outer            ✗ mask-wrong-batch-order / ?
fuxictr_bst_heads_mask          padding-polarity            ? / ?
fuxictr_bst_heads_mask          quoted-repeat-view (twin)   ? / ?
monai_generative_cross_scale    (correct)                   ✓ / ?
monai_generative_cross_scale    no-scale                    **✓** / ?
monai_generative_cross_scale    batch-to-heads-no-permute   ✗ mixed-axis / ✗ broadcast-mismatch
vigg_ribonanza_mask_2d          (correct)                   ✓ / ?
vigg_ribonanza_mask_2d          mask-keys-only              ✗ mask-after-softmax / the same
vigg_ribonanza_mask_2d          mask2d-after-softmax        ✗ mask-after-softmax / ?
vigg_ribonanza_mask_2d          mask-queries-only           **✓** / ?
==============================  ==========================  ==============================================

No correct file gets ``✗`` or ``!``; two bugs get ``✓`` at their DIMS (named in ``MISSED``):

* ``monai_generative_cross_scale`` (``no-scale``): ``softmax(query @ key^T)`` with no ``1/sqrt(d_k)`` (a constant
  factor missing on the scores, no axis wrong; as reports43's ViT-CIFAR ``no-scale``);
* ``vigg_ribonanza_mask_2d`` (``mask-queries-only``): ``attention * mask.view(b, 1, -1, 1)`` zeroes the pad
  queries' rows after the softmax and keeps the pad keys' columns: every real token reads the pads. The padding
  mask (a ``bool (B, T)`` input) gets no padding contract (the verdict names none), and the dependency contracts
  are not measured ("the input's tokens lie on 2 axes (T, T)": the base-pair matrix ``(B, T, T)``).

Other findings (for the engine, not fixed in this round):

* ``diffusers_svd_time_context``: the latent enters as ``(batch_frames, h*w, C)`` (B·F folded, as diffusers'
  UNet passes video latents): no axis is named, so the reported batch mix and the unpermuted frames both stay
  ``?`` (with an ``N=6`` or ``BF=6`` size declared too, the same);
* ``fuxictr_bst_heads_mask``: ``nn.MultiheadAttention`` fed token ids through an embedding, 2 of 45 ops checked;
  ``padding-polarity`` (every real item hidden, the pads attended) stays ``?``; on ``mask-heads-outer`` the
  message says "axis 0 of the scores counts batch entries first (None)" (a ``None`` where a name is due);
* ``sagan_attention_not_transposed``: the channel-first conv maps (``B x C x Hp x Wp``) leave the convs and the
  query's view/permute unnamed (``?`` on the correct file), though both bugs are found.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports44 import (
    diffusers_svd_time_context,
    fuxictr_bst_heads_mask,
    monai_generative_cross_scale,
    sagan_attention_not_transposed,
    vigg_ribonanza_mask_2d,
)

MODULES = (diffusers_svd_time_context, sagan_attention_not_transposed, fuxictr_bst_heads_mask,
           monai_generative_cross_scale, vigg_ribonanza_mask_2d)
UNSURE, SURE = ("?", ()), ("✓", ())
AFTER_SOFTMAX = ("✗", ("mask-after-softmax",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (diffusers_svd_time_context, ""): [UNSURE, UNSURE],
    (diffusers_svd_time_context, "time-context-hw-major"): [UNSURE, UNSURE],
    (diffusers_svd_time_context, "frames-not-permuted"): [UNSURE, UNSURE],
    (sagan_attention_not_transposed, ""): [UNSURE, UNSURE],
    (sagan_attention_not_transposed, "attention-not-transposed"): [("✗", ("values-by-queries",))] * 2,
    (sagan_attention_not_transposed, "softmax-over-queries"): [("✗", ("softmax-wrong-axis",))] * 2,
    (fuxictr_bst_heads_mask, ""): [UNSURE, UNSURE],
    (fuxictr_bst_heads_mask, "mask-heads-outer"): [("✗", ("mask-wrong-batch-order",)), UNSURE],
    (fuxictr_bst_heads_mask, "padding-polarity"): [UNSURE, UNSURE],
    (fuxictr_bst_heads_mask, "quoted-repeat-view"): [UNSURE, UNSURE],
    (monai_generative_cross_scale, ""): [SURE, UNSURE],
    (monai_generative_cross_scale, "no-scale"): [SURE, UNSURE],
    (monai_generative_cross_scale, "batch-to-heads-no-permute"): [("✗", ("mixed-axis",)),
                                                                  ("✗", ("broadcast-mismatch",))],
    (vigg_ribonanza_mask_2d, ""): [SURE, UNSURE],
    (vigg_ribonanza_mask_2d, "mask-keys-only"): [AFTER_SOFTMAX, AFTER_SOFTMAX],
    (vigg_ribonanza_mask_2d, "mask2d-after-softmax"): [AFTER_SOFTMAX, UNSURE],
    (vigg_ribonanza_mask_2d, "mask-queries-only"): [SURE, UNSURE],
}

#: bugs that keep ``✓``: ``no-scale`` (a constant factor missing on the scores, no axis wrong);
#: ``mask-queries-only`` (the pad keys stay readable: no padding contract is measured on the ``bool`` mask input)
MISSED = {(monai_generative_cross_scale, "no-scale"), (vigg_ribonanza_mask_2d, "mask-queries-only")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, missed=frozenset(MISSED))
