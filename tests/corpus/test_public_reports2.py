"""A second round of files after public bug reports (tests/corpus/reports2; each file's docstring cites its
report), traced at distinct sizes and at B = T = H = 4 (or the file's own ``EQUAL``), first sight recorded
before any fix.

* ajhalthor_merge — ajhalthor/Transformer-Neural-Network PR #4 (issue #8): heads merged by ``reshape``
  straight from ``(B, H, T, d)``, no permute;
* labml_ddpm_softmax — labmlai/annotated_deep_learning_paper_implementations issue #146: DDPM's
  ``AttentionBlock`` normalising ``einsum('bihd,bjhd->bijh')`` over the queries (``softmax(dim=1)``);
* karpathy_head_scale — karpathy/ng-video-lecture PR #6: per-head modules scaled by ``C**-0.5`` (n_embd);
* pytorchnlp_softmax_dim0 — PetrochukM/PyTorch-NLP issue #2: Luong attention's ``nn.Softmax(dim=0)`` on the
  ``(B·L_out, L_q)`` scores;
* label_attention_mask — InseeFrLab/torchTextClassifiers PR #92: the padding mask (True at padding) handed
  to SDPA, whose boolean mask means keep;
* cached_causal_tril — tinygrad PR #15949, hyprstream PR #1521: ``ones(T, P + T).tril()`` without the
  cache's offset, at a decoding step;
* roformer_past_positions — huggingface/transformers PR #22416: RoFormer's rotary positions from
  ``arange(T)`` at a cached step;
* mpt_alibi_slopes — ml-explore/mlx PR #3071: ALiBi's slopes for H = 6 heads as a plain geometric series (a
  twin: other numbers in a table of the same shape);
* fairseq_cross_padding — facebookresearch/fairseq issue #318: the encoder's padding mask never passed to
  the encoder attention.

First sight on 8110233 (``round_outcome``: no dependency contracts; at DIMS):

=======================  ===================  ==========================================  ===========================
file                     variant              first sight                                 now
=======================  ===================  ==========================================  ===========================
ajhalthor_merge          (correct)            ✓ 11 ops                                    ✓
ajhalthor_merge          merge-no-permute     ✗ mixed-axis                                ✗ mixed-axis
labml_ddpm_softmax       (correct)            ? nothing was checked (input unseeded)      ✓
labml_ddpm_softmax       softmax-queries      ? nothing was checked                       ✗ softmax-wrong-axis
karpathy_head_scale      (correct)            ? 16 of 38 (each head's Linear(D, d_k))     ✓ (infer/module_heads)
karpathy_head_scale      scale-n-embd         ! scale-not-head-dim                        ! scale-not-head-dim
pytorchnlp_softmax_dim0  (correct)            ✓ 13 ops                                    ✓
pytorchnlp_softmax_dim0  softmax-dim0         ✗ softmax-wrong-axis                        ✗ softmax-wrong-axis
label_attention_mask     (correct)            ? 7 of 13 (the labels' axis: no name)       ?
label_attention_mask     mask-inverted        ✗ mask-polarity                             ✗ mask-polarity
cached_causal_tril       (correct)            ? 36 of 38 (the step's mask unnamed)        ?
cached_causal_tril       tril-no-offset       ? 36 of 38                                  ✗ causal-mask-hides-itself
roformer_past_positions  (correct)            ? 51 of 62 (the step's table unnamed)       ?
roformer_past_positions  positions-from-zero  ? 51 of 62                                  ✗ rotary-position-restarts
mpt_alibi_slopes         (correct)            ? 18 of 24 (the slopes' table)              ?
mpt_alibi_slopes         slopes-geometric     ? 18 of 20 (twin)                           ?
fairseq_cross_padding    (correct)            ✓ 39 ops                                    ✓
fairseq_cross_padding    no-encoder-mask      ✓ 34 ops (false ✓)                          ? input-unread note
=======================  ===================  ==========================================  ===========================

At first sight the 9 correct files were ✓ 3, ? 6, ✗ 0; the 8 bugs ✗ 3, ! 1, ? 3, ✓ 1 (fairseq #318); the twin
?. Now: correct ✓ 5, ? 4, ✗ 0; bugs ✗ 6, ! 1, ? 1, ✓ 0. The fixes, one general mechanism each: a tensor the
model was given that none of its ops read is an ``input-unread`` note (``unread``, ``rules/unread``); a
feature map ``[B, D, Hp, Wp]`` is seeded where its grid is declared (``infer/seeds``; with it, an einops ``h``
that is one whole grid axis is the image's height, not heads: ``infer/einops``); a rotation at position 0
appended to a cache is read along the name the join gives a step's one-entry token axis (``rules/rotary``);
a step's mask that hides its newest key, where the keys are a cache joined with the step's own, hides the step
from itself (``rules/steps``); heads written as sibling modules of one ``ModuleList``, joined, are named from
that structure (``infer/module_heads``: Karpathy's ``Linear(D, d_k)`` is ``d_k``, the cat ``H·d_k``). What
stays ``?`` on correct code: the label queries' axis (an undeclared L), a decoding step's
masks and tables of one query (no name needs an axis of one entry, and the mask hid nothing), MPT's slopes
table (built from literals).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports2 import (
    ajhalthor_merge,
    cached_causal_tril,
    fairseq_cross_padding,
    karpathy_head_scale,
    label_attention_mask,
    labml_ddpm_softmax,
    mpt_alibi_slopes,
    pytorchnlp_softmax_dim0,
    roformer_past_positions,
)

MODULES = (ajhalthor_merge, labml_ddpm_softmax, karpathy_head_scale, pytorchnlp_softmax_dim0, label_attention_mask,
           cached_causal_tril, roformer_past_positions, mpt_alibi_slopes, fairseq_cross_padding)
OK, UNSURE = ("✓", ()), ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (ajhalthor_merge, ""): [OK, UNSURE],
    (ajhalthor_merge, "merge-no-permute"): [("✗", ("mixed-axis",)), ("✗", ("tokens-merged-with-features",))],
    (labml_ddpm_softmax, ""): [OK, OK],   # (at B = Hp = Wp = H = 4 the seed fits one way: channels first)
    (labml_ddpm_softmax, "softmax-queries"): [("✗", ("softmax-wrong-axis",))] * 2,
    (karpathy_head_scale, ""): [OK, UNSURE],
    (karpathy_head_scale, "scale-n-embd"): [("!", ("scale-not-head-dim",)), UNSURE],
    (pytorchnlp_softmax_dim0, ""): [OK, UNSURE],
    (pytorchnlp_softmax_dim0, "softmax-dim0"): [("✗", ("softmax-wrong-axis",))] * 2,
    (label_attention_mask, ""): [UNSURE, UNSURE],
    (label_attention_mask, "mask-inverted"): [("✗", ("mask-polarity",))] * 2,
    (cached_causal_tril, ""): [OK, UNSURE],   # (? -> ✓ on 2026-12-02: the step's mask [1, T+1] named)
    (cached_causal_tril, "tril-no-offset"): [("✗", ("causal-mask-hides-itself",))] * 2,
    (roformer_past_positions, ""): [UNSURE, UNSURE],
    (roformer_past_positions, "positions-from-zero"): [("✗", ("rotary-position-restarts",)), UNSURE],
    (mpt_alibi_slopes, ""): [UNSURE, UNSURE],
    (mpt_alibi_slopes, "slopes-geometric"): [UNSURE, UNSURE],
    (fairseq_cross_padding, ""): [OK, UNSURE],
    (fairseq_cross_padding, "no-encoder-mask"): [UNSURE, UNSURE],   # (an input-unread note: ✓ at 8110233)
}


test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED)
