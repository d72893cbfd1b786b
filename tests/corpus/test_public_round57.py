"""A fifty-seventh round of public-style files (tests/corpus/public57: attention outside LLM text and plain ViT, from
projects or classes not yet in the corpus: GLIDE's text-conditioned UNet attention, AnimateDiff's temporal motion
module, Point Transformer V2's grouped vector attention, Boltz-1's attention with pair bias, NeMo's Conformer
relative-position attention), traced at distinct sizes and at equal sizes, first sight recorded on 3e87f2d2 (main
plus the files; the working tree then also held uncommitted changes to shapetrace/engine/kinds.py and
shapetrace/engine/rules/causes.py, diagnose.py, joins.py):

* glide_text_cross — openai/glide-text2im ``AttentionBlock(encoder_channels=...)`` / ``QKVAttention`` (legacy
  batch-major head fold of a ``Conv1d`` ``qkv`` over a flattened latent, the caption's ``encoder_kv`` split the same
  way and concatenated in front of the image's keys and values, ``einsum("bct,bcs->bts")``) with
  ``Text2ImUNet.get_text_emb``'s ``permute(0, 2, 1)``; bugs ``text-reshape-for-permute``, ``value-cat-order-swapped``
  (``cat([v, ev])`` against ``cat([ek, k])``), ``scale-full-width`` (``1 / sqrt(sqrt(width))``, the fused width);
* animatediff_temporal — guoyww/AnimateDiff ``TemporalTransformer3DModel`` / ``VersatileAttention`` (``"(b f) d c ->
  (b d) f c"``, sinusoidal ``PositionalEncoding`` over the frames, diffusers 0.11 ``reshape_heads_to_batch_dim``,
  ``baddbmm``); bugs ``frames-outer-unfold`` (``(f b)`` both ways), ``way-back-reshape`` (``reshape(-1, d, c)``
  from ``(b·d, f, c)``); traced with the frames named ``F`` and named ``Fp``;
* ptv2_grouped_vector — Pointcept ``GroupedVectorAttention`` (packed clouds ``[N, C]``, ``knn_query`` per cloud with
  ``-1`` pads, ``grouping`` with an appended zero row, ``nn.Softmax(dim=1)`` over the neighbours, the pad mask
  ``sign(reference_index + 1)`` after it, ``einsum("n s g i, n s g -> n g i")``); bugs ``softmax-over-groups``
  (``dim=-1``), ``knn-index-not-offset`` (every later cloud reads the first cloud's points); traced with the clouds'
  sizes (``B T``) and with the packed count ``N`` declared;
* boltz_pair_bias — jwohlwend/boltz ``AttentionPairBias`` in a ``DiffusionTransformerLayer`` (``s [B, N, c_s]``
  with ``B`` = structures × ``multiplicity``, ``proj_z`` to one bias per head, ``repeat_interleave(multiplicity)``,
  ``einsum("bihd,bjhd->bhij")``, the key mask ``(1 - mask[:, None, None]) * -inf``, a sigmoid gate); bugs
  ``pair-bias-tiled`` (``repeat``), ``mask-on-queries`` (``mask[:, None, :, None]``), ``pair-bias-transposed``
  (``permute(0, 3, 2, 1)``);
* nemo_relpos_mha — NVIDIA/NeMo ``RelPositionMultiHeadAttention`` (``pos_bias_u``/``pos_bias_v``, ``rel_shift`` by
  ``F.pad(x, (1, 0))`` and views, ``matrix_bd[..., :T]``), ``RelPositionalEncoding`` (centre cut of a table built for
  the longest length), ``_create_masks`` (``(B, T, T)`` and-ed with its transpose, inverted); bugs
  ``rel-shift-pad-right`` (``pad=(0, 1)``), ``pos-window-from-start`` (``pe[:, :2T - 1]``), ``att-mask-rows-only``
  (``pad_mask.unsqueeze(2).repeat([1, 1, T])``, no ``logical_and``).

==================== ======================== ==========================================================
file                 variant                  first sight (DIMS | equal; with dependencies the same)
==================== ======================== ==========================================================
glide_text_cross     (correct)                ✓ | ?
glide_text_cross     text-reshape-for-permute ✗ mixed-axis | ?  (note order-of-equal-sizes)
glide_text_cross     value-cat-order-swapped  ✗ contracts-different-axes (both)
glide_text_cross     scale-full-width         ✓ | ?
animatediff_temporal (correct)                F: ? | ?   Fp: ! tokens-merged-with-features (both; false); now ✓
animatediff_temporal frames-outer-unfold      F: ? | ?   Fp: ✗ mixed-axis ×2 | ! table-cut-to-batch,
                                                         tokens-merged-with-features
animatediff_temporal way-back-reshape         F: ? | ?   Fp: ✗ mixed-axis, tokens-merged-with-features |
                                                         ✗ broadcast-mismatch, mixed-axis, tokens-merged-with-f.
ptv2_grouped_vector  (correct)                B T: ? | ?   N: ! tokens-merged-… ×2 (both; false); now ?
ptv2_grouped_vector  softmax-over-groups      B T: ? | ?   N: ! the same two false warnings, nothing of its own
ptv2_grouped_vector  knn-index-not-offset     B T: ? | ?   N: ! the same two false warnings, nothing of its own
boltz_pair_bias      (correct)                ? | ?
boltz_pair_bias      pair-bias-tiled          ? | ?
boltz_pair_bias      mask-on-queries          ✗ mask-wrong-axis (both)
boltz_pair_bias      pair-bias-transposed     ? | ?
nemo_relpos_mha      (correct)                ? | ?  (note lengths-unmeasured)
nemo_relpos_mha      rel-shift-pad-right      ? | ?
nemo_relpos_mha      pos-window-from-start    ? | ?
nemo_relpos_mha      att-mask-rows-only       ✗ mask-wrong-axis (both)
==================== ======================== ==========================================================

One bug keeps ``✓`` at DIMS, with dependencies too: GLIDE's ``scale-full-width`` (a temperature slip: the scores are
divided by ``sqrt(3C)`` instead of ``sqrt(ch)``, no axis changes). Two correct files got a false ``!`` at first
sight (PTv2's fixed since: a warning-level merge of an integer tensor is no finding,
``rules/diagnose._holds_indices``; AnimateDiff's too: a fold read through a transpose before the product that
batches it, ``rules/row_folds._through_reorders``): AnimateDiff read with ``Fp`` gets
``tokens-merged-with-features`` at reshape #18, ``[B·N, H, Fp, d_k] -> [B·N·H, Fp, d_k]``, the heads folded into the
batch of a temporal attention whose batch is ``B·N`` (each pixel's clip is one sequence: the pixels are batch there,
and the fold is ``reshape_heads_to_batch_dim``'s); PTv2 read with ``N`` gets it twice, at ``idx.view(-1)`` (#12,
#15): the ``[N, K]`` neighbour indices flattened to gather rows and viewed back to ``[N, K, C]``, "(token, feature)
pair" where ``K`` are neighbours and the tensor is an index. Its two bugs get the same two warnings and nothing of
their own (so they are not ``✓`` only because of a false warning). With the frames named ``F`` nothing in
AnimateDiff is named: the input ``[B, D, F, Hp, Wp]`` is left whole ("named no input tensor"; ``F`` is the engine's
name for a module's own projected width, vocabulary.PROJECTED). With the clouds' sizes PTv2 is ``?`` throughout (the
packed ``N = 11`` is no declared size); with ``N`` declared the features ``[N, D]`` entering ``linear_q`` stay
unnamed all the same (``checked 4 of 42``). Boltz is ``?`` for the pair bugs: ``z [B/M, N, N, c_z]`` and everything
made from it (#8 layer_norm, #9 linear, #10 permute, #0 the mask's ``repeat_interleave``) stay unnamed. NeMo's
positional branch (``pe`` cut to ``2T - 1``, ``linear_pos``, its ``view(1, -1, h, d_k)`` and ``rel_shift``'s
``pad``/views) stays unnamed, so both positional bugs are ``?``. GLIDE's ``einsum("bct,bcs->bts")`` is described
"scores: sums over N", though it sums over ``c`` (``d_k``), and the ``contracts-different-axes`` hint of
``value-cat-order-swapped`` says "If this is q @ k, transpose k first", where the product is weights @ values and
the fix is the concatenation order.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public57 import (
    animatediff_temporal,
    boltz_pair_bias,
    glide_text_cross,
    nemo_relpos_mha,
    ptv2_grouped_vector,
)

MODULES = (glide_text_cross, animatediff_temporal, ptv2_grouped_vector, boltz_pair_bias, nemo_relpos_mha)
UNSURE = ("?", ())
CHECKED = ("✓", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (glide_text_cross, ""): [CHECKED, UNSURE],
    (glide_text_cross, "text-reshape-for-permute"): [("✗", ("mixed-axis",)), UNSURE],
    (glide_text_cross, "value-cat-order-swapped"): [("✗", ("contracts-different-axes",))] * 2,
    (glide_text_cross, "scale-full-width"): [CHECKED, UNSURE],
    (animatediff_temporal, ""): [UNSURE, UNSURE, CHECKED, CHECKED],   # (! ! at first sight: see the docstring)
    (animatediff_temporal, "frames-outer-unfold"): [UNSURE, UNSURE, ("✗", ("mixed-axis",) * 2),
                                                    ("!", ("table-cut-to-batch", "tokens-merged-with-features"))],
    (animatediff_temporal, "way-back-reshape"): [UNSURE, UNSURE, ("✗", ("mixed-axis",)),
                                                 ("✗", ("broadcast-mismatch", "mixed-axis"))],
    # (the PTv2 index flattens' false tokens-merged-with-features warnings are gone: see the docstring)
    (ptv2_grouped_vector, ""): [UNSURE] * 4,
    (ptv2_grouped_vector, "softmax-over-groups"): [UNSURE] * 4,
    (ptv2_grouped_vector, "knn-index-not-offset"): [UNSURE] * 4,
    (boltz_pair_bias, ""): [UNSURE, UNSURE],
    (boltz_pair_bias, "pair-bias-tiled"): [UNSURE, UNSURE],
    (boltz_pair_bias, "mask-on-queries"): [("✗", ("mask-wrong-axis",))] * 2,
    (boltz_pair_bias, "pair-bias-transposed"): [UNSURE, UNSURE],
    (nemo_relpos_mha, ""): [UNSURE, UNSURE],
    (nemo_relpos_mha, "rel-shift-pad-right"): [UNSURE, UNSURE],
    (nemo_relpos_mha, "pos-window-from-start"): [UNSURE, UNSURE],
    (nemo_relpos_mha, "att-mask-rows-only"): [("✗", ("mask-wrong-axis",))] * 2,
}

#: bugs that keep ``✓`` at DIMS without the value measurement (and with it): a temperature slip, no axis changes
MISSED = {(glide_text_cross, "scale-full-width")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, missed=frozenset(MISSED))
