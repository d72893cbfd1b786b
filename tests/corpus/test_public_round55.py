"""A fifty-fifth round of public-style files (tests/corpus/public55: vision and multimodal attention from projects
not yet in the corpus), traced at distinct sizes and at equal sizes, first sight recorded on 8d5cfb97 (main plus
the round's files):

* timm_maxxvit_partition — huggingface/pytorch-image-models ``timm/models/maxxvit.py`` (``MaxxVitBlock``'s
  channels-last ``PartitionAttentionCl`` for block and grid attention, ``window_partition``/``window_reverse``,
  ``grid_partition``/``grid_reverse``, ``AttentionCl`` with ``head_first=True``, ``RelPosBias``); bugs
  ``grid-reverse-window-permute`` (``grid_reverse`` with ``window_reverse``'s ``permute(0, 1, 3, 2, 4, 5)``),
  ``rel-bias-no-permute`` (the gathered ``(N * N, heads)`` table ``view``ed to ``(heads, N, N)``),
  ``merge-no-transpose``;
* vitpytorch_cross_vit — lucidrains/vit-pytorch ``vit_pytorch/cross_vit.py`` (``CrossTransformer``, ``ProjectInOut``,
  ``Attention`` with ``kv_include_self``: each class token the only query over the other branch's patches);
  bugs ``softmax-over-queries`` (``nn.Softmax(dim = -2)``: one query, so every weight is 1), ``merge-d-h``
  (``'b h n d -> b n (d h)'``); twin ``context-first`` (the class token joined after the patches);
* dinov3_rope_attention — facebookresearch/dinov3 (``SelfAttention.apply_rope``/``compute_attention``,
  ``RopePositionEmbedding``, ``rope_rotate_half``, ``prepare_tokens_with_masks``: a class token and four storage
  tokens left unrotated); bugs ``k-rotated-from-q`` (the copied line ``k = rope_apply(q[:, :, prefix:, :], ...)``),
  ``meshgrid-xy`` (``indexing="xy"``: the coordinates flattened column by column), ``rotate-half-interleaved``;
* sam2_hiera_qpool — facebookresearch/sam2 ``hieradet.py`` (``MultiScaleBlock``/``MultiScaleAttention`` at a stage
  change: ``dim_out = 2 * dim``, queries max-pooled 2 x 2 by ``do_pool``, windows of 6 x 6, 3 x 3 after pooling);
  bugs ``q-pool-after-head-transpose`` (q, k, v transposed to ``(B, nheads, N, C)`` first while the pooling still
  reads ``q.reshape(B, H, W, -1)``), ``merge-no-transpose``; twin ``transpose-early-pool-back``;
* mmseg_efficient_mha — open-mmlab/mmsegmentation ``mit.py`` (``EfficientMultiheadAttention`` over a seq-first
  ``nn.MultiheadAttention``, ``MixFFN``, ``PatchEmbed``'s ``hw_shape``, ``nlc_to_nchw``/``nchw_to_nlc``); bugs
  ``hw-shape-swapped`` (``out_size = (x.shape[3], x.shape[2])``), ``nlc-to-nchw-no-transpose``; twin
  ``mha-batch-first`` (``batch_first=True`` and no transposes).

First sight (``round_outcome`` at DIMS | at equal sizes; ``dependencies=True`` gives the same outcome everywhere in
this round; the CLI, ``cd /tmp && shapetrace trace FILE [bug] --dims DIMS``, agrees at DIMS for every variant).

====================== =========================== ==========================================================
file                   variant                     first sight (DIMS | equal)
====================== =========================== ==========================================================
timm_maxxvit_partition (correct)                   ? | ?  (the relative-position gather, view, permute unnamed)
timm_maxxvit_partition grid-reverse-window-permute ✗ mixed-axis (both)
timm_maxxvit_partition rel-bias-no-permute         ✗ mixed-axis (both)
timm_maxxvit_partition merge-no-transpose          ✗ mixed-axis (both)
vitpytorch_cross_vit   (correct)                   ✓ | ?
vitpytorch_cross_vit   softmax-over-queries        ✗ softmax-wrong-axis (both)
vitpytorch_cross_vit   merge-d-h                   **✓** | ?
vitpytorch_cross_vit   context-first (twin)        ✓ | ?
dinov3_rope_attention  (correct)                   ✓ | ✓
dinov3_rope_attention  k-rotated-from-q            **✓** | **✓**; now ! projections-joined (both)
dinov3_rope_attention  meshgrid-xy                 **✓** | **✓**
dinov3_rope_attention  rotate-half-interleaved     ✗ rotary-pairing-mismatch (both)
sam2_hiera_qpool       (correct)                   ? | ?  (9 of 26 ops: the heads of the 2·D stage unnamed;
                                                   with ``d_k=8`` in ``--dims``: ✓ 26 of 26, the bugs still ✗)
sam2_hiera_qpool       q-pool-after-head-transpose ✗ mixed-axis x 4 (both)
sam2_hiera_qpool       merge-no-transpose          ✗ mixed-axis (both)
sam2_hiera_qpool       transpose-early-pool-back   ? | ?  (twin)
mmseg_efficient_mha    (correct)                   ? | ?  (the MixFFN's two convs on 4·D channels unnamed)
mmseg_efficient_mha    hw-shape-swapped            ✗ mixed-axis (both)
mmseg_efficient_mha    nlc-to-nchw-no-transpose    ✗ mixed-axis (both)
mmseg_efficient_mha    mha-batch-first             ? | ?  (twin)
====================== =========================== ==========================================================

No correct variant and no twin gets ``✗`` or ``!``. Three bugs got ``✓`` at DIMS at first sight (two still do,
``MISSED``):

* vit-pytorch's ``merge-d-h``: the merge ``rearrange(out, 'b h n d -> b n (d h)')`` is shown as ``d_k·H`` (reshape
  #20, "merges d_k and H into d_k·H") and ``to_out`` projects it as features; that the split made ``H·d_k`` and the
  merge reads the heads head-minor is said nowhere (not even as the ``nonstandard-head-split`` note timm's
  ``qkv-three-innermost`` gets in public54); since: that note, on the merge (``axes.reorders_one_root``): a model
  trained this way works (the projection learns the permutation), so ``✓`` with the note, as timm's;
* DINOv3's ``k-rotated-from-q``: the rotated patch keys are read from the rotated queries (#27 indexes the
  ``torch.cat`` of q, #25); names and shapes are those of the correct code, and which of q and k a tensor came from
  was not followed; fixed since: ``! projections-joined`` at cat #30 (rules/joins.py);
* DINOv3's ``meshgrid-xy``: the coordinate grid is stacked ``[Wp, Hp, 2]`` (stack #8 ``[5, 3, 2]``, unnamed) and
  flattened column by column while the patches are ``Hp·Wp`` row by row; the rotary-table check ("6 of them on the
  values of the rotary tables") checks the pairing of the features, not which position each row of the table is.

Messages judged misleading (the findings themselves point at the right op):

* ``mixed-axis`` says "its entries mix batch entries and tokens" where the mixed pieces are only ``Hp`` and ``Wp``
  (mmseg ``hw-shape-swapped`` reshape #6, sam2 ``merge-no-transpose`` reshape #20 and ``q-pool-after-head-transpose``
  reshape #14): no batch entry is involved (``TOKEN_ROOTS`` counts the batch and the grid alike); fixed since: "its
  entries mix the patch grid's rows and columns" (``rules/diagnose._what_mixes``);
* timm ``grid-reverse-window-permute`` (view #52; #78 in the CLI, after 26 setup ops) names only axis 2
  (``Wp%7·Wp/7``) although axis 1 joins ``Hp%5·Hp/5`` in the same wrong order;
* sam2 ``q-pool-after-head-transpose``: one slip, four errors (reshape #14, then max_pool2d #16, reshape #18 and #21
  on what #14 mixed; two since: a piece of a mix is held by any piece of the same mix, rules/causes.holds); with
  ``d_k=8`` in ``--dims`` each of the four ends with the fix "Split the features where they
  are: view(B, T, H, d_k), then transpose(1, 2) ...", where the fix is the reverse (``q.transpose(1, 2)`` back to
  ``(B, N, nheads, C)`` before ``reshape(B, H, W, -1)``);
* mmseg ``nlc-to-nchw-no-transpose`` (reshape #5) names the pieces of the conv's channels ``H`` and ``d_k``
  ("``!Hp·Wp·H·d_k=32, !Wp·H·d_k=6, !H·d_k=10``") where no head split exists yet;
* sam2 (correct, CLI): with the 2·D heads unnamed, permute #12 (``permute(0, 3, 1, 2)``) and #14 are described as
  "swaps Hp%6 and Wp%6" / "swaps Hp/2%3 and Wp/2%3" (they move the channels; with ``d_k=8`` in ``--dims`` the rows say
  "reorders the axes ..." correctly), and reshape #9 as "splits Hp%6, Wp%6, F into Hp%6·Wp%6";
* the CLI's "not measured: ... (the input's batch and token axes have no names)" for sam2 and timm, whose input rows
  read ``[B=5, Hp=12, Wp=18, D=16]`` and ``[B=2, D=32, Hp=15, Wp=21]``; fixed since: "the input's tokens lie on 2
  axes (Hp, Wp), and the contracts move those of one axis" (``dependencies._unmeasured_axes``);
* vit-pytorch (correct): the keys of the class-token attention ``cat((x, context), dim=1)`` are named ``S`` (#6,
  ``T[0:1]`` and ``S[1:5]``) and ``T`` (#25, ``S[0:1]`` and ``T[1:7]``), a join of two sequences named as one of them;
* DINOv3: the four storage (register) tokens ``storage_tokens.expand(B, -1, -1)`` are named ``copies=4`` (expand #6).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public55 import (
    dinov3_rope_attention,
    mmseg_efficient_mha,
    sam2_hiera_qpool,
    timm_maxxvit_partition,
    vitpytorch_cross_vit,
)

MODULES = (timm_maxxvit_partition, vitpytorch_cross_vit, dinov3_rope_attention, sam2_hiera_qpool, mmseg_efficient_mha)
UNSURE, CHECKED = ("?", ()), ("✓", ())
MIXED = ("✗", ("mixed-axis",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then equal sizes
EXPECTED = {
    (timm_maxxvit_partition, ""): [UNSURE, UNSURE],
    (timm_maxxvit_partition, "grid-reverse-window-permute"): [MIXED, MIXED],
    (timm_maxxvit_partition, "rel-bias-no-permute"): [MIXED, MIXED],
    (timm_maxxvit_partition, "merge-no-transpose"): [MIXED, MIXED],
    (vitpytorch_cross_vit, ""): [CHECKED, UNSURE],
    (vitpytorch_cross_vit, "softmax-over-queries"): [("✗", ("softmax-wrong-axis",))] * 2,
    (vitpytorch_cross_vit, "merge-d-h"): [CHECKED, UNSURE],
    (vitpytorch_cross_vit, "context-first"): [CHECKED, UNSURE],
    (dinov3_rope_attention, ""): [CHECKED, CHECKED],
    (dinov3_rope_attention, "k-rotated-from-q"): [("!", ("projections-joined",))] * 2,   # (✓ ✓ at 48917dd)
    (dinov3_rope_attention, "meshgrid-xy"): [CHECKED, CHECKED],
    (dinov3_rope_attention, "rotate-half-interleaved"): [("✗", ("rotary-pairing-mismatch",))] * 2,
    (sam2_hiera_qpool, ""): [UNSURE, UNSURE],
    # (four at 48917dd: the views of #14's mix fold into it since, rules/causes.holds)
    (sam2_hiera_qpool, "q-pool-after-head-transpose"): [("✗", ("mixed-axis",) * 2)] * 2,
    (sam2_hiera_qpool, "merge-no-transpose"): [MIXED, MIXED],
    (sam2_hiera_qpool, "transpose-early-pool-back"): [UNSURE, UNSURE],
    (mmseg_efficient_mha, ""): [UNSURE, UNSURE],
    (mmseg_efficient_mha, "hw-shape-swapped"): [MIXED, MIXED],
    (mmseg_efficient_mha, "nlc-to-nchw-no-transpose"): [MIXED, MIXED],
    (mmseg_efficient_mha, "mha-batch-first"): [UNSURE, UNSURE],
}

#: bugs that keep ``✓`` at DIMS (see the docstring): a head-minor merge no note names, a key read from the queries,
#: a rotary coordinate grid flattened in the other order
MISSED = {(vitpytorch_cross_vit, "merge-d-h"), (dinov3_rope_attention, "meshgrid-xy")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, missed=frozenset(MISSED))
