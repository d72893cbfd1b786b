"""A thirty-fourth round of public-style files (tests/corpus/public34: transformers' OWL-ViT text tower, CLIP-style
causal and padding masks added on the ``view(B, H, T, S)`` of ``(B·H, T, S)`` ``bmm`` scores; transformers' TrOCR
decoder, a hand-built causal mask (``mask_cond < (mask_cond + 1).view(T, 1)``) and a cross-attention to ViT patch
states; transformers' EfficientFormer Meta3D, a two-conv stem flattened to tokens, a fused per-head ``qkv`` cut
``[k, k, r·k]`` and an ``attention_biases[:, idxs]`` table; timm's VOLO outlook attention, ``F.unfold`` values
weighted by one generated ``9 x 9`` attention per position and ``F.fold``ed back; transformers' MobileBERT, q and
k from a shared bottleneck, v from the full-width states, ``d_k = D / 2H``), traced at distinct sizes and at equal
sizes, first sight recorded before any fix (on d04b913 + the files).

``round_outcome`` (distinct | equal sizes) and the CLI (``cd /tmp && shapetrace trace FILE [bug] --dims DIMS``) at
the first DIMS (the CLI agreed with ``round_outcome`` on every row):

=============== ============================ ====================== ============================ ==============
file            variant                      distinct (DIMS)        equal sizes                  after the fix
=============== ============================ ====================== ============================ ==============
owlvit_text     (correct)                    ✓ all 66               ? 2 of 66
owlvit_text     causal-mask-tril             ✗ causal-mask-reversed ✗ causal-mask-reversed
owlvit_text     merge-without-transpose      ✗ mixed-axis           ✗ broadcast-mismatch
trocr_decoder   (correct)                    ✓ all 103              ? 3 of 103
trocr_decoder   causal-cond-strict           ✗ causal-mask-hides-   ✗ causal-mask-hides-itself
                                             itself
trocr_decoder   shape-without-transpose      ✗ mixed-axis           ✗ broadcast-mismatch (x3)
efficientformer (correct)                    ? 11 of 24             ? 11 of 24
efficientformer context-without-transpose    ✗ mixed-axis           ✗ tokens-merged-with-features
efficientformer softmax-dim-2                ✗ softmax-wrong-axis   ✗ softmax-wrong-axis
efficientformer split-then-reshape (twin)    ? 12 of 26             ? 12 of 26
volo_outlook    (correct)                    ? 13 of 24             ? 13 of 24                   ? 16 of 25 (both)
volo_outlook    fold-without-permute         ? 13 of 23             ? 13 of 23                   ✗ mixed-axis (both)
volo_outlook    attn-heads-inner             ? 13 of 24             ? 13 of 24                   ? 16 of 25 (both)
mobilebert      (correct)                    ✓ all 46               ? 0 of 46
mobilebert      context-view-without-permute ✗ mixed-axis           ✗ broadcast-mismatch (x3)
mobilebert      mask-over-queries            ✗ mask-wrong-axis      ✗ mask-wrong-axis
mobilebert      value-from-bottleneck (twin) ✓ all 46               ? 0 of 46
=============== ============================ ====================== ============================ ==============

At first sight, distinct sizes: the 5 correct files ✓ 3, ? 2, ✗ 0; the 10 bugs ✗ 8, ? 2, ✓ 0; the 2 twins ✓ 1, ? 1.
No ``✓`` on a bug and no ``✗`` on correct code, at either size. Rows without an entry after the fix are unchanged.
After the fix: correct ✓ 3, ? 2, ✗ 0; bugs ✗ 9, ? 1, ✓ 0.

The fix: ``F.unfold`` had no names function (only the batch kept its name) and ``F.fold`` was not in the registry,
so VOLO's values and the grid they are folded back onto were unnamed. ``engine/blocks.py`` names im2col where
one block sits on each position in order (stride 1, centring padding): the ``L`` blocks are the grid flattened
(``Hp·Wp``), as ``Tensor.unfold``'s one window per token is named, and the columns each channel's block (the
channels outer, the kernel's offsets inner, unnamed); other blocks stay unnamed (named columns under NAT's
unpadded neighbourhoods, public8, were a false ``✗``: keys' heads named apart from any token); ``F.fold`` undoes
it. And a view that regroups two named
parts together with an unnamed one (``axis_reshape._opaque``) is now named by its named parts (``!H·Hp·Wp·d_k``):
a mix whatever the unnamed part is; on d04b913 any unnamed part left the whole mix unnamed, unjudged. Two earlier
rows change with it, both bugs still ``✗``: public12 wav2vec2 ``fold-no-transpose`` and public20 ft_transformer
``heads-without-transpose`` (distinct sizes) report ``mixed-axis`` twice where they reported
``projection-over-tokens``: at the view that folds the batch into the heads, and again at the view that cuts that
mix (``!B·N/4``: a mix already made, reported again, as it was on d04b913 for mixes of named parts alone; left).

What stays ``?`` and why (left, not forced):

* EfficientFormer: the ``qkv`` width ``2·H·k + H·r·k`` (128 = H·(8 + 8 + 16)) is no feature width the vocabulary
  knows, so it is the projected width ``F``, whose pieces are unnamed by design (a width no size explains); the
  per-head slab ``32`` and its ``[8, 8, 16]`` pieces stay unnamed, and with them q, k, v, the context and the
  ``projection`` (13 of 24 unchecked). The stem's first ``conv2d`` (stride 2, to ``6 x 10``) makes a grid no
  declared name has. The ``attention_biases[:, idxs]`` table is a bias whose meaning is in its values.
* VOLO (after the fix): the generated attention's ``H·9·9`` is the projected width ``F``, whose pieces are unnamed
  by design, and the kernel's offsets have no name; so the weights' heads and offsets stay unnamed (9 of 25
  unchecked) and ``attn-heads-inner`` (heads read as the inner axis of the generated weights: a cut of ``F``)
  stays ``?``, a known miss: nothing named is contradicted.
* Equal sizes: ``?`` where the sizes coincide, as ever (equal sizes never decide a name).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public34 import efficientformer, mobilebert, owlvit_text, trocr_decoder, volo_outlook

MODULES = (owlvit_text, trocr_decoder, efficientformer, volo_outlook, mobilebert)
UNSURE = ("?", ())
SURE = ("✓", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (owlvit_text, ""): [SURE, UNSURE],
    (owlvit_text, "causal-mask-tril"): [("✗", ("causal-mask-reversed",))] * 2,
    (owlvit_text, "merge-without-transpose"): [("✗", ("mixed-axis",)), ("✗", ("broadcast-mismatch",))],
    (trocr_decoder, ""): [SURE, UNSURE],
    (trocr_decoder, "causal-cond-strict"): [("✗", ("causal-mask-hides-itself",))] * 2,
    (trocr_decoder, "shape-without-transpose"): [("✗", ("mixed-axis",)), ("✗", ("broadcast-mismatch",) * 3)],
    (efficientformer, ""): [UNSURE, UNSURE],
    (efficientformer, "context-without-transpose"): [("✗", ("mixed-axis",)), ("✗", ("tokens-merged-with-features",))],
    (efficientformer, "softmax-dim-2"): [("✗", ("softmax-wrong-axis",))] * 2,
    (efficientformer, "split-then-reshape"): [UNSURE, UNSURE],
    (volo_outlook, ""): [UNSURE, UNSURE],
    (volo_outlook, "fold-without-permute"): [("✗", ("mixed-axis",))] * 2,
    (volo_outlook, "attn-heads-inner"): [UNSURE, UNSURE],
    (mobilebert, ""): [SURE, UNSURE],
    (mobilebert, "context-view-without-permute"): [("✗", ("mixed-axis",)), ("✗", ("broadcast-mismatch",) * 3)],
    (mobilebert, "mask-over-queries"): [("✗", ("mask-wrong-axis",))] * 2,
    (mobilebert, "value-from-bottleneck"): [SURE, UNSURE],
}

#: only one row is traced at equal sizes too (the suite's time is a budget: the others' equal-size outcomes are
#: the table above, measured once): TrOCR's strict causal condition, caught on the values where B = T = S = 4, and
#: the fix's row, VOLO's output folded without its permute
EQUAL_TESTED = {(trocr_decoder, "causal-cond-strict"), (volo_outlook, "fold-without-permute")}


test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
