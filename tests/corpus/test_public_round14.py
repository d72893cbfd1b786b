"""A fourteenth round of public-style files (tests/corpus/public14: Hiera's mask units, MobileViT's unfold/fold,
EfficientViT's ReLU linear attention, Decision Transformer's interleaved tokens, modded-nanogpt's value
embeddings, DBRX's clipped fused qkv, Mllama's gated cross-attention, Funnel's pooled queries, Twins-SVT's local
and sub-sampled attention, Reformer's LSH sort and unsort), traced at distinct sizes and at B = T = H = 4 (or
the file's ``EQUAL``), first sight recorded before any fix.

First sight (``round_outcome``: no dependency contracts; distinct sizes | equal sizes), on 354eb0b (main + the
files):

====================  ======================  ==========================================  ========================
file                  variant                 distinct (DIMS)                             equal sizes
====================  ======================  ==========================================  ========================
hiera_mask_unit       (correct)               ✓                                           ?
hiera_mask_unit       out-transpose-1-2       ✗ mixed-axis                                ✗ mixed-axis
mobilevit_unfold      (correct)               ✗ mixed-axis x2 (false: unfold, fold)       ✗ mixed-axis x2 (false)
mobilevit_unfold      fold-without-transpose  ✗ mixed-axis x3                             ✗ mixed-axis x3
efficientvit_linear   (correct)               ? 1 of 13 (the conv's 3·h·d channels)       ?
efficientvit_linear   ones-row-first          ? 1 of 13                                   ?
decision_transformer  (correct)               ? 2 of 30 (states [B, T, 3] not seeded)     ?
decision_transformer  stack-without-permute   ✗ mixed-axis                                ✗ mixed-axis
decision_transformer  readout-from-actions    ? 2 of 30                                   ?
modded_nanogpt        (correct)               ? 20 of 24 (the cos/sin table's columns)    ?
modded_nanogpt        ve-head-major           ✗ mixed-axis                                ✗ broadcast-mismatch
modded_nanogpt        norm-over-heads         ? 20 of 24                                  ?
dbrx_clip_qkv         (correct)               ✓                                           ?
dbrx_clip_qkv         causal-mask-transposed  ✗ causal-mask-reversed                      ✗ causal-mask-reversed
mllama_cross          (correct)               ? 20 of 26 (the cross mask from tile ids)   ?
mllama_cross          heads-split-wrong       ✗ mixed-axis                                ✗ (5 findings)
funnel_pool           (correct)               ? 6 of 15 (avg_pool2d drops the names)      ?
funnel_pool           pool-by-halves          ✓ (false)                                   ?
twins_svt             (correct)               ✓                                           ✓
twins_svt             sr-without-permute      ✗ mixed-axis                                ✗ mixed-axis
twins_svt             windows-not-transposed  ✗ mixed-axis                                ✗ mixed-axis
reformer_lsh          (correct)               ! mask-hides-own-key (by design)            ! mask-hides-own-key
reformer_lsh          restore-forgotten       ! mask-hides-own-key                        ! mask-hides-own-key
====================  ======================  ==========================================  ========================

At distinct sizes the 10 correct files were ✓ 3, ? 5, ! 1, ✗ 1 (MobileViT); the 13 bugs ✗ 7, ? 4, ! 1, ✓ 1
(Funnel's). ``shapetrace trace FILE [bug] --dims DIMS`` (dependency contracts measured) gave the same marks but
for Decision Transformer's ``stack-without-permute`` (``?``: the script builds ``timesteps`` from ``arange`` under
the tracer, and its inputs ``[B, T, 3]`` are not seeded, so the interleaving has no names there either).

The fixes, one general mechanism each (tests in the engine's modules say what each fixes): a mixed-axis
regrouping that only moves read and that ends in clean axes before anything computes is no mix
(``rules/undone_regroups``: MobileViT's ``reshape(B * C * n_h, p, n_w, p)``, a loop index undone by the next
transpose and reshape); a reduction along a coarse piece of a token axis keeping a finer piece is not proven
(``verdict._pooled_apart``: Funnel's ``view(B, 2, T // 2, D).mean(1)`` pools tokens T/2 apart, which Hiera's
unrolled mask units do by design, so ``?``, never ``✗``); pooling ops in the registry (``propagate.pool``: an
axis whose windows tile it exactly is named by its coarse piece, ``T`` pooled by 2 is ``T/2``), which names
Funnel's ``avg_pool2d`` queries.

Now at distinct sizes: correct ✓ 4 (MobileViT, DBRX, Twins, Funnel), ? 5, ! 1, ✗ 0; bugs ✗ 7, ? 5, ! 1, ✓ 0. Hiera went
✓ -> ? (the pooling over unrolled units is not proven: its layout is set before the stage). What stays ``?``
and why: EfficientViT (a 1x1 conv's 3·h·d output channels have no name, so the head split after it is
unnamed); Decision Transformer (the inputs ``[B, T, 3]`` and ``[B, T, 2]`` fit no declared seed; its
``readout-from-actions`` picks ``x[:, 2]`` of a stack of three kinds, which no name tells from ``x[:, 1]``);
modded-nanogpt (its cos/sin table's columns are unnamed; ``norm-over-heads``, ``rms_norm`` over ``(H, d_k)``, is
OLMo 2's norm over the whole width before the split, correct there); Mllama (the cross mask built from image
tile starts); Reformer (the hash sort's gathers: ``!`` from its
deliberate self-mask, a warning, both variants).

After the lead's d1f34ff: modded-nanogpt's correct file is ✓ (its cos/sin columns named by what they are added
to: infer/lined_up), and its ``norm-over-heads`` carries the note norm-across-heads (``?``, rules/norm_heads: it
was ✓ once the table had names); Reformer's self-mask is the note mask-hides-own-key (``?``, not ``!``), both
variants. At distinct sizes now: correct ✓ 5, ? 5, ✗ 0; bugs ✗ 7, ? 6, ✓ 0.

Branch inputs1 (infer/seeds.py ``batch_seed``: a ``[B]`` given beside the input is ``[B]``; engine/lengths_read.py):
mllama_cross's per-entry ``image_start`` is named, the correct file ``? checked 26 of 26`` (was 20 of 26 on 5774b39)
``; not proven: the pads of a mask the model builds from its lengths were not measured unread``: still ``?``.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public14 import (
    dbrx_clip_qkv,
    decision_transformer,
    efficientvit_linear,
    funnel_pool,
    hiera_mask_unit,
    mllama_cross,
    mobilevit_unfold,
    modded_nanogpt,
    reformer_lsh,
    twins_svt,
)

MODULES = (hiera_mask_unit, mobilevit_unfold, efficientvit_linear, decision_transformer, modded_nanogpt,
           dbrx_clip_qkv, mllama_cross, funnel_pool, twins_svt, reformer_lsh)
OK, UNSURE = ("✓", ()), ("?", ())
MIXED = ("✗", ("mixed-axis",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then the equal sizes
EXPECTED = {
    (hiera_mask_unit, ""): [UNSURE, UNSURE],
    (hiera_mask_unit, "out-transpose-1-2"): [MIXED, MIXED],
    (mobilevit_unfold, ""): [OK, OK],
    (mobilevit_unfold, "fold-without-transpose"): [("✗", ("mixed-axis", "mixed-axis"))] * 2,
    (efficientvit_linear, ""): [UNSURE, UNSURE],
    (efficientvit_linear, "ones-row-first"): [UNSURE, UNSURE],
    (decision_transformer, ""): [UNSURE, UNSURE],
    (decision_transformer, "stack-without-permute"): [MIXED, MIXED],
    (decision_transformer, "readout-from-actions"): [UNSURE, UNSURE],
    (modded_nanogpt, ""): [OK, UNSURE],   # (its cos/sin columns named by what they are added to: infer/lined_up)
    (modded_nanogpt, "ve-head-major"): [MIXED, ("✗", ("broadcast-mismatch",))],
    (modded_nanogpt, "norm-over-heads"): [UNSURE, UNSURE],
    (dbrx_clip_qkv, ""): [OK, UNSURE],
    (dbrx_clip_qkv, "causal-mask-transposed"): [("✗", ("causal-mask-reversed",))] * 2,
    (mllama_cross, ""): [UNSURE, UNSURE],
    (mllama_cross, "heads-split-wrong"): [MIXED, ("✗", ("batch-mismatch", "broadcast-mismatch",
                                                          "attends-over-wrong-axis", "broadcast-mismatch",
                                                          "broadcast-mismatch"))],
    (funnel_pool, ""): [OK, UNSURE],
    (funnel_pool, "pool-by-halves"): [UNSURE, UNSURE],
    (twins_svt, ""): [OK, OK],
    (twins_svt, "sr-without-permute"): [MIXED, MIXED],
    (twins_svt, "windows-not-transposed"): [MIXED, MIXED],
    (reformer_lsh, ""): [UNSURE, UNSURE],   # Reformer hides each token's own key by design: a note, not a warning
    (reformer_lsh, "restore-forgotten"): [UNSURE, UNSURE],
}

# (the hard rules, no ✓ on a bug and only ✓ or ? on correct code, now hold for Reformer's deliberate self-mask
# too: mask-hides-own-key is a note, ?, where it was a warning, !, on d5659a5)
test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED)
