"""A fifty-fourth round of public-style files (tests/corpus/public54: the attention codes pasted most often, each
in its plain, widely copied form), traced at distinct sizes and at equal sizes, first sight recorded on 08a58515
(main plus the files; the working tree then also held an uncommitted change to shapetrace/engine/axis_compute.py):

* mingpt_causal — karpathy/minGPT ``CausalSelfAttention`` (the ``bias`` buffer ``tril(ones(block_size,
  block_size)).view(1, 1, bs, bs)`` sliced ``[:, :, :T, :T]``, ``masked_fill(... == 0, -inf)``); bugs
  ``bias-rows-from-end`` (``self.bias[:, :, -T:, :T]``: every token sees the future when the block is longer than
  the text), ``merge-reshape-no-transpose``;
* annotated_decoder — harvardnlp/annotated-transformer ``MultiHeadedAttention`` (``clones``, ``attention()``,
  ``mask.unsqueeze(1)``) in a decoder layer's self- and source attention; bugs ``subsequent-mask-not-inverted``
  (the ``== 0`` dropped), ``std-mask-or`` (``make_std_mask`` joins padding and triangle with ``|``);
* d2l_folded_heads — d2l-ai/d2l-en ``MultiHeadAttention`` (``transpose_qkv``, ``transpose_output``, ``valid_lens``
  ``repeat_interleave``d over the heads, ``masked_softmax``); bugs ``transpose-qkv-heads-outer``
  (``permute(2, 0, 1, 3)`` before the fold), ``sequence-mask-inclusive`` (``<=`` in ``sequence_mask``);
* timm_vit_attention — huggingface/pytorch-image-models ``Attention`` (``reshape(B, N, 3, H, d).permute(2, 0, 3, 1,
  4)``, ``unbind(0)``, ``q_norm``/``k_norm``, SDPA); bugs ``qkv-permute-tokens-as-heads`` (``permute(2, 0, 1, 3,
  4)``), ``qkv-three-innermost`` (``reshape(B, N, H, d, 3).permute(4, 0, 2, 1, 3)``);
* llama_left_pad_gqa — huggingface/transformers ``LlamaAttention`` (``apply_rotary_pos_emb(..., unsqueeze_dim=1)``,
  ``repeat_kv``, a 4-D causal mask with left padding); bugs ``padding-mask-not-inverted``,
  ``lengths-mask-assumes-right-padding``.

=================== ================================== =========================================================
file                variant                            first sight (DIMS | equal; with dependencies where they differ)
=================== ================================== =========================================================
mingpt_causal       (correct)                          ✓ | ?
mingpt_causal       bias-rows-from-end                 ? | ?  (note mask-unexercised; CLI ✗ causal-mask-leaks)
mingpt_causal       merge-reshape-no-transpose         ✗ mixed-axis | ✗ tokens-merged-with-features
annotated_decoder   (correct)                          ✓ | ?
annotated_decoder   subsequent-mask-not-inverted       ✗ causal-mask-reversed | ?
annotated_decoder   std-mask-or                        ✓ | ?  (both; CLI ✓); now ! causal-mask-undone | ?
d2l_folded_heads    (correct)                          ? | ?  (note lengths-unmeasured)
d2l_folded_heads    transpose-qkv-heads-outer          ✗ mask-wrong-batch-order, projection-over-tokens |
                                                       ✗ projection-over-tokens
d2l_folded_heads    sequence-mask-inclusive            ? | ?
timm_vit_attention  (correct)                          ✓ | ?
timm_vit_attention  qkv-permute-tokens-as-heads        ✗ sdpa-layout, mixed-axis | ✗ sdpa-layout,
                                                       tokens-merged-with-features
timm_vit_attention  qkv-three-innermost                ✓ | ?  (note nonstandard-head-split, both)
llama_left_pad_gqa  (correct)                          ✓ | ?
llama_left_pad_gqa  padding-mask-not-inverted          ✗ mask-hides-every-key (both)
llama_left_pad_gqa  lengths-mask-assumes-right-padding ✓ | ?  (with dependencies ✗ padding-read | ?)
=================== ================================== =========================================================

No correct file gets ``✗``; three bugs got ``✓`` at DIMS without dependencies at first sight: the Annotated
Transformer's ``std-mask-or`` (the ``|`` of ``make_std_mask`` leaves batch entry 0 with no mask at all; the causal
contract is not measured there, so ``✓`` with dependencies too; now ``! causal-mask-undone``: a mask made from a
causal triangle that hides no key of an entry while another entry's hidden keys change from query to query,
tests/engine/test_causal_mask_undone.py),
timm's ``qkv-three-innermost`` (the note ``nonstandard-head-split`` says honestly that the split is consistent and
only breaks pretrained weights; it names the merge, reshape #8, not the split at reshape #1) and Llama's
``lengths-mask-assumes-right-padding`` (caught only by the padding contract: ``✗ padding-read`` with
dependencies and in the CLI). minGPT's ``bias-rows-from-end`` is ``?`` here (the buffer is built outside the trace)
but ``✗ causal-mask-leaks`` in the CLI, where ``tril`` is traced. A false statement at first sight, fixed since
(tests/engine/test_diagnose_merges.py): at equal sizes timm's ``qkv-permute-tokens-as-heads``
``tokens-merged-with-features`` at reshape #8 said axis 2 "flattens N and d_k" and then called each entry "a
(feature, feature) pair"; the words now come from each name's role (timm's tokens are ``N``): a (token, feature)
pair.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public54 import (
    annotated_decoder,
    d2l_folded_heads,
    llama_left_pad_gqa,
    mingpt_causal,
    timm_vit_attention,
)

MODULES = (mingpt_causal, annotated_decoder, d2l_folded_heads, timm_vit_attention, llama_left_pad_gqa)
UNSURE = ("?", ())
CHECKED = ("✓", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then equal sizes
EXPECTED = {
    (mingpt_causal, ""): [CHECKED, UNSURE],
    (mingpt_causal, "bias-rows-from-end"): [UNSURE, UNSURE],
    (mingpt_causal, "merge-reshape-no-transpose"): [("✗", ("mixed-axis",)), ("✗", ("tokens-merged-with-features",))],
    (annotated_decoder, ""): [CHECKED, UNSURE],
    (annotated_decoder, "subsequent-mask-not-inverted"): [("✗", ("causal-mask-reversed",)), UNSURE],
    (annotated_decoder, "std-mask-or"): [("!", ("causal-mask-undone",)), UNSURE],
    (d2l_folded_heads, ""): [UNSURE, UNSURE],
    (d2l_folded_heads, "transpose-qkv-heads-outer"): [("✗", ("mask-wrong-batch-order", "projection-over-tokens")),
                                                      ("✗", ("projection-over-tokens",))],
    (d2l_folded_heads, "sequence-mask-inclusive"): [UNSURE, UNSURE],
    (timm_vit_attention, ""): [CHECKED, UNSURE],
    (timm_vit_attention, "qkv-permute-tokens-as-heads"): [("✗", ("sdpa-layout", "mixed-axis")),
                                                          ("✗", ("sdpa-layout", "tokens-merged-with-features"))],
    (timm_vit_attention, "qkv-three-innermost"): [CHECKED, UNSURE],
    (llama_left_pad_gqa, ""): [CHECKED, UNSURE],
    (llama_left_pad_gqa, "padding-mask-not-inverted"): [("✗", ("mask-hides-every-key",))] * 2,
    (llama_left_pad_gqa, "lengths-mask-assumes-right-padding"): [CHECKED, UNSURE],
}

#: bugs that keep ``✓`` at DIMS without the value measurement (see the docstring); the second is ``✗ padding-read``
#: with it, as the CLI measures
MISSED = {(timm_vit_attention, "qkv-three-innermost"), (llama_left_pad_gqa, "lengths-mask-assumes-right-padding")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, missed=frozenset(MISSED))
