"""A forty-third round of files after public bug reports about attention masks, windows, scales, rotary layout and
head merges (tests/corpus/reports43; each file's docstring cites its report), traced at their DIMS and at equal
sizes (B = T = H = 4). First sight recorded on the working tree (main, plus the round's files).

* ribonanza_pair_mask_pads — Shujun-He/RibonanzaNet issues #4 and #5: the pair mask built as the outer product of
  the padding mask turned to +1/-1 first, so pad x pad = +1 and the pad rows attend to the pad columns
  (``pair-mask-outer-product``); the masked scores filled with ``-1e-9``, which hides nothing (``mask-fill-tiny``);
* mlx_gemma3_sliding_mask — Blaizzy/mlx-vlm pull request #669: Gemma 3's sliding layers given the causal mask
  without its window (``sliding-mask-no-window``); the band written in place of the causal mask, not and-ed with it
  (``window-not-causal``); twin: ml-explore/mlx-lm pull request #390's ``<=`` band, W + 1 keys
  (``window-one-too-many``, a width of the configuration, as reports3's Mistral ``window-plus-one``);
* vitcifar_scale_total_feats — omihub777/ViT-CIFAR issue #9 (pull requests #11, #12): the scores divided by
  ``sqrt(feats)``, the model width (``scale-total-feats``); no scale at all (``no-scale``, an earlier ``layers.py``);
  the value einsum written ``bhij, bhjf->bhif`` then ``reshape(b, n, -1)`` (``einsum-heads-first``);
* rasbt_sdpa_mask_not_inverted — rasbt/LLMs-from-scratch issue #1061: ``MHAPyTorchSDPAWithoutFlash`` hands SDPA the
  ``triu(diagonal=1)`` boolean mask as it is, True = attend, so each token sees only later ones
  (``mask-not-inverted``); the SDPA output viewed to ``(b, T, d_out)`` without ``transpose(1, 2)``
  (``merge-without-transpose``);
* tpa_mla_rotary_heads — tensorgi/TPA issue #4: the MLA baseline's rotary step after ``transpose(1, 2)``, so
  ``Rotary`` reads ``x.shape[1]`` (the heads) as the sequence (``rope-after-transpose``); the output reshaped
  without ``transpose(1, 2)`` (``merge-without-transpose``).

First sight (``round_outcome`` at each DIMS / at its equal sizes; ``dependencies=True`` gives the same outcome
everywhere in this round; the CLI, ``cd /tmp && shapetrace trace FILE [bug] --dims DIMS``, in the last column).

===========================  =======================  ====================================  ==========================
file                         variant                  round_outcome                         CLI at DIMS
===========================  =======================  ====================================  ==========================
ribonanza_pair_mask_pads     (correct)                ? / ?                                 ? 33 of 35 (#5, #6 relpos)
ribonanza_pair_mask_pads     pair-mask-outer-product  ? / ?                                 ? the same
ribonanza_pair_mask_pads     mask-fill-tiny           ? / ?                                 ? the same
mlx_gemma3_sliding_mask      (correct)                ✓ / ?                                 ✓ 61 ops
mlx_gemma3_sliding_mask      sliding-mask-no-window   ? / ?                                 ? note window-width
mlx_gemma3_sliding_mask      window-not-causal        ✗ mask-keeps-future / the same        ✗ mask-keeps-future (#22)
mlx_gemma3_sliding_mask      window-one-too-many (t)  ? / ?                                 ? note window-width (4 ≠ 3)
vitcifar_scale_total_feats   (correct)                ✓ / ?                                 ✓ 22 ops
vitcifar_scale_total_feats   scale-total-feats        ! scale-not-head-dim / the same       ! scale-not-head-dim
vitcifar_scale_total_feats   no-scale                 **✓** / ?                             **✓** 22 ops
vitcifar_scale_total_feats   einsum-heads-first       ✗ mixed-axis / the same               ✗ mixed-axis (#15)
rasbt_sdpa_mask_not_inverted (correct)                ✓ / ?                                 ✓ 9 ops
rasbt_sdpa_mask_not_inverted mask-not-inverted        ✗ mask-polarity, causal-mask-reversed ✗ both (#6)
                                                      / ✗ mask-polarity
rasbt_sdpa_mask_not_inverted merge-without-transpose  ✗ mixed-axis / ✗ tokens-merged-…      ✗ mixed-axis (#8)
tpa_mla_rotary_heads         (correct)                ? / ?                                 ? 19 of 32 (lora widths)
tpa_mla_rotary_heads         rope-after-transpose     ✗ rotary-same-angle-every-token / ?   ✗ the same (#15)
tpa_mla_rotary_heads         merge-without-transpose  ✗ mixed-axis / ✗ tokens-merged-…      ✗ mixed-axis (#30)
===========================  =======================  ====================================  ==========================

No correct file gets ``✗`` or ``!``; one bug gets ``✓`` at its DIMS (ViT-CIFAR's ``no-scale``, named in
``MISSED``), and Ribonanza's two keep ``?`` only for a reason that is not their bug:

* ``vitcifar_scale_total_feats`` (``no-scale``): ``softmax(einsum("bhif, bhjf->bhij", q, k), dim=-1)`` with no
  division; the ``scale-not-head-dim`` rule reads a scale that is there (``/ sqrt(feats)``: warned), and a missing
  one gets no note;
* ``ribonanza_pair_mask_pads``: the ``?`` (as the correct file's) is the relative-position features, a one-hot of 33
  bins projected to the pair width (``#5 linear``, ``#6 layer_norm``: unnamed). Without the pair bias (a scratch
  copy) the correct file and both bugs are ``✓`` at DIMS: the pads attending each other (pad rows only) and a mask
  filled with ``-1e-9`` (the padded keys attended by every query) are both missed. The CLI says for all three
  "padding stays unread (src_mask never reaches a mask on the scores nor is multiplied into the values)", which is
  false: ``src_mask`` reaches the scores' ``masked_fill`` through ``matmul(src_mask, src_mask.permute(0, 2, 1))``.

Other findings (for the engine, not fixed in this round):

* ``mlx_gemma3_sliding_mask``: written first without the model holding its window (``SLIDING_WINDOW`` a module
  constant), the correct file was ``?`` (``window-width-unchecked``) and ``sliding-mask-no-window`` ``✓`` at DIMS;
  with ``self.sliding_window`` held (as Gemma's config), the note says the held window is applied by no mask.
  On ``window-not-causal`` the note at #50 ("the model holds a window ... but no op of the run applies one") is
  false: #22 applies it, without its causal half; the value check's "though the code declares a causal mask
  (scaled_dot_product_attention #50)" names the global layer, whose mask is right, not #22;
* ``tpa_mla_rotary_heads`` (``rope-after-transpose``): the fix hint "Count the positions along the tokens ... not
  from the batch axis" (the table was counted along the heads, not the batch);
* ``vitcifar_scale_total_feats`` (``einsum-heads-first``): ``!H·1+T=6`` reads as ``H·1 + T``; the axis is
  ``H·(1+T)``.

Fixed since first sight (tests/engine/test_round59_fixes.py): the padding mask is followed through ``clone`` and
its product with itself, so the padding contract is measured on Ribonanza (held on the correct file and on
``pair-mask-outer-product``, whose wrong entries are only in the pad rows; ``✗ padding-read`` on ``mask-fill-tiny``
with dependencies), and its pair bias ``[1, T, T, H]`` is no head split (the heads contract says it cannot copy the
batch per head, not that "a split's batch axis has no name"); a band without its causal half applies the window it
holds (``window-not-causal`` is the keys' error alone); the rotary hint says "not along the heads axis (H)"; a mix
is spelled ``!H·(1+T)``.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports43 import (
    mlx_gemma3_sliding_mask,
    rasbt_sdpa_mask_not_inverted,
    ribonanza_pair_mask_pads,
    tpa_mla_rotary_heads,
    vitcifar_scale_total_feats,
)

MODULES = (ribonanza_pair_mask_pads, mlx_gemma3_sliding_mask, vitcifar_scale_total_feats,
           rasbt_sdpa_mask_not_inverted, tpa_mla_rotary_heads)
UNSURE, SURE = ("?", ()), ("✓", ())
MIXED, MERGED = ("✗", ("mixed-axis",)), ("✗", ("tokens-merged-with-features",))
KEEPS_FUTURE, SCALE_D = ("✗", ("mask-keeps-future",)), ("!", ("scale-not-head-dim",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (ribonanza_pair_mask_pads, ""): [UNSURE, UNSURE],
    (ribonanza_pair_mask_pads, "pair-mask-outer-product"): [UNSURE, UNSURE],
    (ribonanza_pair_mask_pads, "mask-fill-tiny"): [UNSURE, UNSURE],
    (mlx_gemma3_sliding_mask, ""): [SURE, UNSURE],
    (mlx_gemma3_sliding_mask, "sliding-mask-no-window"): [UNSURE, UNSURE],
    (mlx_gemma3_sliding_mask, "window-not-causal"): [KEEPS_FUTURE, KEEPS_FUTURE],
    (mlx_gemma3_sliding_mask, "window-one-too-many"): [UNSURE, UNSURE],
    (vitcifar_scale_total_feats, ""): [SURE, UNSURE],
    (vitcifar_scale_total_feats, "scale-total-feats"): [SCALE_D, SCALE_D],
    (vitcifar_scale_total_feats, "no-scale"): [SURE, UNSURE],
    (vitcifar_scale_total_feats, "einsum-heads-first"): [MIXED, MIXED],
    (rasbt_sdpa_mask_not_inverted, ""): [SURE, UNSURE],
    (rasbt_sdpa_mask_not_inverted, "mask-not-inverted"): [("✗", ("mask-polarity", "causal-mask-reversed")),
                                                          ("✗", ("mask-polarity",))],
    (rasbt_sdpa_mask_not_inverted, "merge-without-transpose"): [MIXED, MERGED],
    (tpa_mla_rotary_heads, ""): [UNSURE, UNSURE],
    (tpa_mla_rotary_heads, "rope-after-transpose"): [("✗", ("rotary-same-angle-every-token",)), UNSURE],
    (tpa_mla_rotary_heads, "merge-without-transpose"): [MIXED, MERGED],
}

#: bugs that keep ``✓``: ``no-scale`` takes the softmax of ``q·k`` with no ``1/sqrt(d_k)`` (a missing constant
#: factor on the scores, no axis wrong; the scale rule reads a scale that is present)
MISSED = {(vitcifar_scale_total_feats, "no-scale")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, missed=frozenset(MISSED))
