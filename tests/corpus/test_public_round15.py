"""A fifteenth round of public-style files (tests/corpus/public15: TimeSformer's divided space-time attention,
Restormer's transposed channel attention, Video Swin's 3-D shifted windows, CSWin's cross-shaped stripes, BLIP-2's
Q-Former, Flamingo's perceiver resampler, x-transformers' T5 buckets, Persimmon's partial rotary with per-head
LayerNorm, Baichuan's W_pack with ALiBi, Informer's ProbSparse query selection), traced at distinct sizes and at
B = T = H = 4 (or the file's ``EQUAL``), first sight recorded before any fix.

First sight (``round_outcome``: no dependency contracts; distinct sizes | equal sizes), on 4212b85 (main + the
files of a23d9e4; video_swin_3d at B=2 D=32 H=4 and cswin_stripes at T=32 then):

========================  ========================  ======================================  ======================
file                      variant                   distinct (DIMS)                         equal sizes
========================  ========================  ======================================  ======================
timesformer_divided       (correct)                 ? 30 of 54 (the CLS copies per frame)   ?
timesformer_divided       time-back-patch-major     ✗ mixed-axis                            ✗ mixed-axis
timesformer_divided       time-batch-swapped        ✗ mixed-axis                            ✗ mixed-axis
restormer_mdta            (correct)                 ? 1 of 18 (a feature map, no grid)      ?
restormer_mdta            back-w-h                  ✗ mixed-axis                            ✗ mixed-axis
restormer_mdta            heads-back-swapped (twin) ?                                       ?
video_swin_3d             (correct)                 ? nothing was checked                   ?
video_swin_3d             reverse-without-permute   ? nothing was checked                   ?
video_swin_3d             roll-back-same-sign       ? nothing was checked                   ?
cswin_stripes             (correct)                 ? 0 of 82 (T = D = 32: equal sizes)     ?
cswin_stripes             windows2img-swapped       ? 0 of 82                               ?
cswin_stripes             lepe-heads-first          ✗ broadcast-mismatch                    ✗ broadcast-mismatch
blip2_qformer             (correct)                 ? 29 of 41 (image width 24 undeclared)  ?
blip2_qformer             mask-query-text-swapped   ?                                       ?
blip2_qformer             cross-keys-not-permuted   ?                                       ?
flamingo_resampler        (correct)                 ? 16 of 17 (the latents' repeat)        ?
flamingo_resampler        softmax-over-latents      ✗ softmax-wrong-axis                    ?
flamingo_resampler        merge-heads-swapped(twin) ?   (CLI: ✗ heads-mix, false)           ?
x_transformers_t5         (correct)                 ? 24 of 25 (the bucket embedding)       ?
x_transformers_t5         rel-pos-q-minus-k         ! bias-constant-along-keys              ! (same)
x_transformers_t5         bias-heads-last           raises                                  ✗ broadcast-mismatch
persimmon_partial_rotary  (correct)                 ✓                                       ?
persimmon_partial_rotary  rotate-the-pass (twin)    ✓                                       ?
persimmon_partial_rotary  qk-norm-after-transpose   ? (note norm-across-heads)              ?
persimmon_partial_rotary  table-head-width          ✗ rotary-pairing-mismatch               ✗ (same)
baichuan_alibi            (correct)                 ✓                                       ?
baichuan_alibi            alibi-slope-reversed      ✗ distance-bias-reversed                ✗ (same)
baichuan_alibi            future-mask-transposed    ✗ causal-mask-reversed                  ✗ (same)
informer_probsparse       (correct)                 ? 33 of 36 (the two advanced picks)     ?
informer_probsparse       sample-indices-swapped    ?                                       ?
informer_probsparse       out-without-transpose     ✗ mixed-axis                            ✗ mixed-axis
========================  ========================  ======================================  ======================

Three variants changed class after first sight, each for a reason the file states: Persimmon's rotate-the-pass
(✓, written as a bug) rotates q and k alike, a permutation of the learnt projection, so it is a twin and the bug
is table-head-width (added then); Flamingo's '(d h)' merge and Restormer's '(c head)' merge only reorder a token's
features before a learnt projection: twins. At distinct sizes the 10 correct files were ✓ 2, ? 8, ✗ 0; the 18
bugs ✗ 9, ? 7, ! 1, raises 1, ✓ 0; ``shapetrace trace FILE [bug] --dims DIMS`` gave the same marks but a false
✗ heads-mix (and two heads-talk warnings) on Flamingo's twin.

The fixes, one general mechanism each (tests in the engine's modules say what each fixes): a pick along several
axes is named by the index that names it, an unnamed index broadcast with it being that same axis, and a pick
along a stride-0 (expanded) axis picks copies and is not named (infer/elements: Informer's ``Q[arange(B)[:, None,
None], arange(H)[None, :, None], M_top]``; with the first alone its sample-indices-swapped bug was ✓); the merged
output's heads are read as the merge lays them out where its rows hold the split's features in another order
(heads: Flamingo's twin); a channels-last map or clip ``[B, Hp, Wp, D]``, ``[B, Fp, Hp, Wp, D]`` is seeded where
its grid is declared (infer/seeds: Video Swin, whose DIMS now declare the clip's grid, B=3 so that no size of the
clip equals B). cswin_stripes' DIMS are now T=24 (T = D hid every name at first sight); restormer_mdta is also
traced with its grid declared (Hp=3 Wp=5: ? attends-over-channels, the note of attention over channels by design).

Now at distinct sizes (the first DIMS of each file): correct ✓ 4 (CSWin, Persimmon, Baichuan, Informer), ? 6, ✗ 0;
bugs ✗ 12, ? 4, ! 1, raises 1, ✓ 0. What stays ``?`` and why: TimeSformer (the CLS token repeated per frame by a
literal count: no name ties those copies to the frames folded out of T, and equal sizes never decide); Restormer
(attention over channels, by design); Video Swin (the bias table picked by a buffer index of literal window
sizes); BLIP-2 (the image features' width, 24, is no declared size: its keys and values stay unnamed, so the
cross-keys bug is ``?`` too; its query/text mask swapped is a mask pattern no name or contract can judge);
Flamingo (the latents repeated per frame, as TimeSformer's CLS); x-transformers (the bucket embedding's width is
the heads', named only where the bias meets the scores); Persimmon's qk-norm-after-transpose (the note
norm-across-heads: OLMo 2 normalises across heads on purpose); Informer's sample-indices-swapped (every sample is
the query's own key: no layout shows it).

Later (engine: infer/lookup_widths): x-transformers' correct file was ? 24 of 25 (the bucket embedding) on c32db91;
the width ``rearrange(values, 'i j h -> h i j')`` names ``H`` is carried back to the embedding: ✓ at distinct
sizes (at B = T = H = 4 still ?)."""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public15 import (
    baichuan_alibi,
    blip2_qformer,
    cswin_stripes,
    flamingo_resampler,
    informer_probsparse,
    persimmon_partial_rotary,
    restormer_mdta,
    timesformer_divided,
    video_swin_3d,
    x_transformers_t5,
)

MODULES = (timesformer_divided, restormer_mdta, video_swin_3d, cswin_stripes, blip2_qformer, flamingo_resampler,
           x_transformers_t5, persimmon_partial_rotary, baichuan_alibi, informer_probsparse)
OK, UNSURE = ("✓", ()), ("?", ())
MIXED = ("✗", ("mixed-axis",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (timesformer_divided, ""): [UNSURE, UNSURE],
    (timesformer_divided, "time-back-patch-major"): [MIXED, MIXED],
    (timesformer_divided, "time-batch-swapped"): [MIXED, MIXED],
    (restormer_mdta, ""): [UNSURE] * 4,   # (with its grid declared: the note attends-over-channels)
    (restormer_mdta, "back-w-h"): [MIXED, MIXED, MIXED, UNSURE],   # (a square 4 x 4 map: (w h) is (h w) by size)
    (restormer_mdta, "heads-back-swapped"): [UNSURE] * 4,
    (video_swin_3d, ""): [UNSURE, UNSURE],
    (video_swin_3d, "reverse-without-permute"): [MIXED, UNSURE],
    (video_swin_3d, "roll-back-same-sign"): [("✗", ("roll-not-undone",))] * 2,
    (cswin_stripes, ""): [OK, OK],
    (cswin_stripes, "windows2img-swapped"): [MIXED, MIXED],
    (cswin_stripes, "lepe-heads-first"): [("✗", ("broadcast-mismatch",))] * 2,
    (blip2_qformer, ""): [UNSURE, UNSURE],
    (blip2_qformer, "mask-query-text-swapped"): [UNSURE, UNSURE],
    (blip2_qformer, "cross-keys-not-permuted"): [UNSURE, UNSURE],
    (flamingo_resampler, ""): [UNSURE, UNSURE],
    # (at equal sizes ? until reports5's weights-summed-elsewhere: the weights' product sums along another axis)
    (flamingo_resampler, "softmax-over-latents"): [("✗", ("softmax-wrong-axis",))] * 2,
    (flamingo_resampler, "merge-heads-swapped"): [UNSURE, UNSURE],
    (x_transformers_t5, ""): [OK, UNSURE],
    (x_transformers_t5, "rel-pos-q-minus-k"): [("!", ("bias-constant-along-keys",))] * 2,
    (x_transformers_t5, "bias-heads-last"): [("raises", ()), ("✗", ("broadcast-mismatch",))],
    (persimmon_partial_rotary, ""): [OK, UNSURE],
    (persimmon_partial_rotary, "table-head-width"): [("✗", ("rotary-pairing-mismatch",))] * 2,
    (persimmon_partial_rotary, "qk-norm-after-transpose"): [UNSURE, UNSURE],
    (persimmon_partial_rotary, "rotate-the-pass"): [OK, UNSURE],
    (baichuan_alibi, ""): [OK, UNSURE],
    (baichuan_alibi, "alibi-slope-reversed"): [("✗", ("distance-bias-reversed",))] * 2,
    (baichuan_alibi, "future-mask-transposed"): [("✗", ("causal-mask-reversed",))] * 2,
    (informer_probsparse, ""): [OK, OK],
    (informer_probsparse, "sample-indices-swapped"): [UNSURE, UNSURE],
    (informer_probsparse, "out-without-transpose"): [MIXED, MIXED],
}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED)
