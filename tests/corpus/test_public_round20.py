"""A twentieth round of public-style files (tests/corpus/public20: RWKV-4's time-mix, Hyena's FFT long
convolution, the FT-Transformer's feature tokens, the TabTransformer's column embeddings, the Memorizing
Transformer's kNN memory attention, Mamba-2's SSD as masked attention, gated linear attention's chunk form,
Griffin's local attention, Zamba2's shared attention block, U-ViT's long skips), traced at distinct sizes and at
B = T = H = 4 (or the file's ``EQUAL``), first sight recorded before any fix.

First sight (``round_outcome``: no dependency contracts; distinct sizes | equal sizes) on f0e0295 + the files,
and the CLI (``shapetrace trace FILE [bug] --dims DIMS``, dependency contracts measured) at the first DIMS:

=============== ========================= ============================= ======================= ================
file            variant                   distinct (DIMS)               equal sizes             CLI
=============== ========================= ============================= ======================= ================
rwkv_timemix    (correct)                 ? 18 of 22 ([C, T, T] table)  ? 0 of 22               ? 18 of 22
rwkv_timemix    shift-from-the-future     ?                             ?                       ?
rwkv_timemix    decay-mask-transposed     ?                             ?                       ?
hyena_fftconv   (correct)                 ? 7 of 8 (irfft's [..., :T])  ? 0 of 8                ? 7 of 8
hyena_fftconv   fft-size-seqlen           ?                             ?                       ?
hyena_fftconv   short-conv-not-cut        ?                             ?                       ?
ft_transformer  (correct)                 ? 2 of 26 (the CLS cat)       ? nothing named         ? 2 of 26
ft_transformer  heads-without-transpose   ✗ projection-over-tokens      ?                       ✗ (same)
ft_transformer  cls-readout-first         ?                             ?                       ?
tab_transformer (correct)                 ? 17 of 19 (x_cont's norm)    ? 0 of 19               ? 1 of 20
tab_transformer softmax-over-queries      ✗ softmax-wrong-axis          ✗ softmax-wrong-axis    ✗ (same)
tab_transformer embed-without-offset      ?                             ?                       ?
memorizing_knn  (correct)                 ? 13 of 17 (top-k memories)   ? 1 of 17               ? 13 of 17
memorizing_knn  mem-softmax-over-queries  ?                             ?                       ?
memorizing_knn  causal-mask-transposed    ? (hides own key)             ✗ mask-wrong-axis       ?
mamba2_ssd      (correct)                 ? 11 of 15 (segsum, einsum)   ? 0 of 15               ? 11 of 15
mamba2_ssd      decay-mask-upper          ?                             ?                       ✗ causal-mask-leaks
mamba2_ssd      L-transposed              ?                             ?                       ✗ causal-mask-leaks
gla_chunk       (correct)                 ✓                             ? 0 of 23               ✓
gla_chunk       gate-cumsum-over-features ✓ (missed)                    ?                       ✓ (missed)
gla_chunk       mask-keeps-upper          ✓ (missed)                    ?                       ✗ causal-mask-leaks
griffin_local   (correct)                 ? 17 of 31 (MQA, half rotary) ? 4 of 31               ? 11 of 32
griffin_local   window-off-by-one         ?                             ?                       ?
griffin_local   window-direction-reversed ?                             ?                       ?
zamba_shared    (correct)                 ? 32 of 36 (LoRA rank)        ? 0 of 36               ? 32 of 36
zamba_shared    adapter-of-first-depth    ?                             ?                       ?
zamba_shared    concat-along-tokens       ? 6 of 38                     ?                       ✗ causal-mask-leaks
uvit_skips      (correct)                 ? 72 of 78 (time embedding)   ? 72 of 78              ? 72 of 78
uvit_skips      merge-without-transpose   ✗ mixed-axis                  ✗ mixed-axis            ✗ heads-mix x4,
                                                                                                  mixed-axis
uvit_skips      time-token-kept           ? (the cut (1+N)[0:16])       ?                       ?
=============== ========================= ============================= ======================= ================

At distinct sizes (``round_outcome``) the 10 correct files were ✓ 1, ? 9, ✗ 0; the 20 bugs ✗ 3, ? 15, ✓ 2 (gated
linear attention's gates summed over a head's features, and its causal mask kept upper). The CLI (dependency
contracts): correct ✓ 1, ? 9; bugs ✗ 7, ? 12, ✓ 1.

The fixes (one general mechanism each):

* ``rules/scans``: a ``cumsum``/``cumprod`` along one head's features (``d_k``) is ``scan-over-wrong-axis``, as
  along the heads or the batch: a projection's outputs have no order a prefix could mean (test in
  tests/engine/test_scans.py). GLA's ``gate-cumsum-over-features`` ✓ -> ✗ (also at equal sizes, where ``d_k`` is
  the one size unlike the others);
* ``rules/directions``: a ``masked_fill`` with zeros whose every reader is a product (scores that weigh the values
  with no softmax to undo the zeros: linear and gated linear attention, RetNet, Mamba-2's masked form) hides
  keys, so its direction is read as a large negative fill's is (test in tests/engine/test_directions.py). GLA's
  ``mask-keeps-upper`` ✓ -> ✗ ``causal-mask-reversed``.

Now (``round_outcome``, distinct): correct ✓ 1, ? 9, ✗ 0; bugs ✗ 5, ? 15, ✓ 0. CLI: bugs ✗ 8, ? 12, ✓ 0. What
stays ``?`` and why: RWKV (the ``[C, T, T]`` decay table built from ``arange`` and a per-channel decay: the
fill, ``where`` and gathers on it are named only in part), Hyena (no ``torch.fft`` call is among the recorded
events, so ``irfft(n=2·T)``'s output enters unnamed and its cut ``[..., :T]`` is unchecked; the short conv's
padded steps are ``N``, cut ``N[0:6]``), the FT-Transformer (its ``T + 1`` tokens after the CLS ``cat``
at distinct sizes: the CLS token's ``expand`` and the ``cat`` are unnamed), the TabTransformer (the continuous
features' norm and the joined MLP input), the Memorizing Transformer (the top-k memories per query: a size no
dims or module names), Mamba-2 (the ``(h p)`` fold and the four-operand einsum with the state size), Griffin
(one key/value head, a rotary on half of each head), Zamba2 (the LoRA rank), U-ViT (the sinusoidal time
embedding's ``[:, None]`` and ``cat``, the unpatchify). The bugs that stay ``?`` are value-level (RWKV's shift
and decay, Hyena's FFT size and conv cut, the CLS read from the first token, the embedding offsets, the
adapter index, Griffin's window edge) or sit on those unnamed ops (the memory softmax over the queries).

Round 25 (``directions.whole_past_hidden``: a mask hiding every earlier key while a query sees a later one is
a causal pattern mirrored): memorizing_knn ``causal-mask-transposed``
is ``✗ causal-mask-reversed`` at distinct sizes too (was ``?``).

Branch inputs1 (infer/seeds.py ``batch_seed``): uvit_skips' timesteps ``[B]`` are named, ``? 73 of 78`` (72 on
5774b39); the sinusoidal embedding's frequencies (``#4 __getitem__``, ``#5 cat``) stay unnamed: still ``?``.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public20 import (
    ft_transformer,
    gla_chunk,
    griffin_local,
    hyena_fftconv,
    mamba2_ssd,
    memorizing_knn,
    rwkv_timemix,
    tab_transformer,
    uvit_skips,
    zamba_shared,
)

MODULES = (rwkv_timemix, hyena_fftconv, ft_transformer, tab_transformer, memorizing_knn, mamba2_ssd, gla_chunk,
           griffin_local, zamba_shared, uvit_skips)
OK, UNSURE = ("✓", ()), ("?", ())
MIXED = ("✗", ("mixed-axis",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (rwkv_timemix, ""): [UNSURE, UNSURE],
    (rwkv_timemix, "shift-from-the-future"): [UNSURE, UNSURE],
    (rwkv_timemix, "decay-mask-transposed"): [UNSURE, UNSURE],
    (hyena_fftconv, ""): [UNSURE, UNSURE],
    (hyena_fftconv, "fft-size-seqlen"): [UNSURE, UNSURE],
    (hyena_fftconv, "short-conv-not-cut"): [UNSURE, UNSURE],
    (ft_transformer, ""): [UNSURE, UNSURE],
    # (the view that folds batch into the heads is a mix now named, since 1c7ffc9: mixed-axis there, and again at
    # the view that cuts that mix, which hides the projection-over-tokens behind it as "also seen")
    (ft_transformer, "heads-without-transpose"): [("✗", ("mixed-axis",)), UNSURE],
    (ft_transformer, "cls-readout-first"): [UNSURE, UNSURE],
    (tab_transformer, ""): [UNSURE, UNSURE],
    (tab_transformer, "softmax-over-queries"): [("✗", ("softmax-wrong-axis",))] * 2,
    (tab_transformer, "embed-without-offset"): [UNSURE, UNSURE],
    (memorizing_knn, ""): [UNSURE, UNSURE],
    # (? -> ✗ after f946d52: weights normalised over the queries and summed over the memories, the values
    # recognised by their unnamed width: tests/engine/test_untold_weights_summed.py)
    (memorizing_knn, "mem-softmax-over-queries"): [("✗", ("softmax-wrong-axis",))] * 2,
    (memorizing_knn, "causal-mask-transposed"): [("✗", ("causal-mask-reversed",)),
                                                ("✗", ("mask-wrong-axis", "causal-mask-reversed"))],
    (mamba2_ssd, ""): [UNSURE, UNSURE],
    (mamba2_ssd, "decay-mask-upper"): [UNSURE, UNSURE],
    (mamba2_ssd, "L-transposed"): [UNSURE, UNSURE],
    (gla_chunk, ""): [OK, UNSURE],
    (gla_chunk, "gate-cumsum-over-features"): [("✗", ("scan-over-wrong-axis",))] * 2,
    (gla_chunk, "mask-keeps-upper"): [("✗", ("causal-mask-reversed",))] * 2,
    (griffin_local, ""): [UNSURE, UNSURE],
    (griffin_local, "window-off-by-one"): [UNSURE, UNSURE],
    (griffin_local, "window-direction-reversed"): [UNSURE, UNSURE],
    (zamba_shared, ""): [UNSURE, UNSURE],
    (zamba_shared, "adapter-of-first-depth"): [UNSURE, UNSURE],
    (zamba_shared, "concat-along-tokens"): [UNSURE, UNSURE],
    (uvit_skips, ""): [UNSURE, UNSURE],
    (uvit_skips, "merge-without-transpose"): [MIXED, MIXED],
    (uvit_skips, "time-token-kept"): [UNSURE, UNSURE],
}

#: the rows also traced at equal sizes (the suite's time is a budget: the others' equal-size outcomes are the
#: table above, measured once): those the fixes changed there
EQUAL_TESTED = {(gla_chunk, "gate-cumsum-over-features"), (gla_chunk, "mask-keeps-upper"),
                (memorizing_knn, "mem-softmax-over-queries")}


test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
