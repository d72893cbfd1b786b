"""A thirty-seventh round of public-style files (tests/corpus/public37: segment-anything's two-way transformer,
prompt tokens and image attending to each other at half width; PixArt-α's DiT block with adaLN-single, timm
self-attention and cross-attention to caption tokens; stable-audio-tools' DiT over audio latents, a prepended
timestep token and rotary over part of each head; transformers' Bamba, a Mamba2 hybrid, a gated causal-conv mixer
and grouped-query attention with partial rotary), traced at distinct sizes and at equal sizes, first sight recorded
before any fix (on eefe532 + the files).

``round_outcome`` (distinct | equal sizes) and the CLI (``cd /tmp && shapetrace trace FILE [bug] --dims DIMS``, at
the first DIMS; the CLI builds the model under the trace and measures the dependency contracts on the values):

================ =================================== ==================== ===================== =====================
file             variant                             distinct (DIMS)      equal sizes           CLI (first sight)
================ =================================== ==================== ===================== =====================
sam_two_way      (correct)                           ?                    ?                     ? 57 of 130 ops
sam_two_way      separate-heads-without-transpose    ✗ mixed-axis         ✗ attends-over-wrong- ✗ 1 error
                                                                          axis, broadcast-
                                                                          mismatch, batch-
                                                                          mismatch, broadcast-
                                                                          mismatch (x3)
sam_two_way      recombine-heads-without-transpose   ✗ mixed-axis         ✗ broadcast-mismatch  ✗ 2 errors (+ heads-
                                                                          (x4)                  mix, on the values)
pixart           (correct)                           ?                    ?                     ? 34 of 70 ops
pixart           qkv-permute-tokens-as-heads         ✗ sdpa-layout,       ✗ sdpa-layout, tokens ✗ 2 errors
                                                     tokens-merged-with-  -merged-with-f.,
                                                     features             broadcast-mismatch
pixart           cross-out-reshape-without-transpose ✗ tokens-merged-     ✗ projection-over-    ✗ 1 error
                                                     with-features        tokens, broadcast-m.
stable_audio_dit (correct)                           ?                    ?                     ? 14 of 72 ops
stable_audio_dit out-reshape-without-transpose       ✗ mixed-axis         ✗ mixed-axis          ✗ 1 error
stable_audio_dit rotate-half-interleaved             ✗ rotary-pairing-    ✗ rotary-pairing-     ✗ 1 error
                                                     mismatch             mismatch
bamba            (correct)                           ?                    ?                     ? 62 of 63 ops
bamba            conv-trim-keeps-future              ?                    ?                     ✗ causal-mask-leaks
                                                                                                (on the values)
bamba            causal-mask-diagonal                ✗ causal-mask-hides- ✗ causal-mask-hides-  ✗ 1 error
                                                     itself               itself
================ =================================== ==================== ===================== =====================

At first sight (``round_outcome``, distinct sizes): the 4 correct files ✓ 0, ? 4, ✗ 0; the 8 bugs ✗ 7, ? 1, ✓ 0.
The CLI: correct ✓ 0, ? 4, ✗ 0; bugs ✗ 8, ? 0, ✓ 0 (Bamba's future-reading conv trim is caught there by the
dependency contracts measured on the values: output token 2 depends on input token 5 though the code declares a
causal mask; ``shapetrace.trace`` does not measure them unless asked, so ``round_outcome`` stays ``?``: no name or
layout contract sees a slice ``[..., k-1:]`` of a padded conv's positions as wrong, both are ``T`` long).

Why each correct file is ``?`` (what was left unnamed):

* bamba (62 of 63): the mixer's gate ``F[0:128]`` times its conv branch ``F[128:256]`` (two pieces of one
  ``in_proj``'s output, Mamba's ``z`` and ``xBC``) left the product's features unnamed (``_projected_met``: a
  projection's own width met by another name), so ``out_proj`` (#19) had unnamed input features and output.
* sam_two_way (57 of 130): the positional map enters as ``[1, D, Hp, Wp]`` (one map for the batch, then
  ``repeat_interleave``d over it): no seed fits a leading 1, so the keys' positional half stays unnamed.
  (On branch inputs1, engine/infer/seeds.py seeds that map ``[1, D, Hp, Wp]``: ? 60 of 130; what stays unnamed
  is the half-width cross-attention, ``internal_dim = D // 2`` of no declared name. Still ?.)
* pixart (34 of 70) and stable_audio_dit (14 of 72): the timestep enters as ``[B]`` (no seed for a 1-D input: a
  length-2 vector is a batch of steps or anything else), the timestep embedding and every modulation it feeds stay
  unnamed; PixArt's captions ``[B, S, 48]`` and Stable Audio's latents ``[B, 8, T]`` (channels first) are not
  seeded either (the own-width seed reads ``[B, T, F_in]`` only).

The fixes (priority: the first made a ✓ on a bug appear, the second removed it):

1. engine/axis_compute ``_pieces_of_projections``: two pieces of one projection's own width met elementwise
   (``F[0:128]`` times ``F[128:256]``: Mamba's gate, a SwiGLU's ``chunk`` halves) pair feature i with feature i
   as the weight laid them out, and any order of its rows is another weight: the product keeps the first piece's
   name (before: unnamed, so the next projection was unchecked). Bamba correct ``? 62 of 63`` -> ✓; Jamba (round
   27) and OpenELM (round 31) correct ? -> ✓. tests/engine/test_axis_compute.py, fails on eefe532.
2. engine/verdict ``_padded_positions_cut``: with (1) alone, Bamba's ``conv-trim-keeps-future`` and Jamba's
   ``conv-future-taps`` turned ✓ (both trims name the kept positions alike, ``N[3:9]`` / ``N[0:6]``). A slice
   that cuts a padded conv's positions back to the tokens' count is now proven only by its window (start s,
   padding p, kernel k: token j reads ``j + s - p`` to ``j + s - p + k - 1``): ending at j (causal) or, where the
   code declares no causal mask, centred on j (HuBERT's even-kernel positional conv, round 28: stays ✓); any other
   window is ``? ... not proven: #16 __getitem__ cuts N, the positions #15 conv1d made from T, back to N[3:9]``.
   engine/op_args records a conv's ``padding`` and ``dilation``. tests/engine/test_verdict.py, fails on eefe532.

After the fixes (``round_outcome``, distinct sizes): correct ✓ 1 (Bamba), ? 3, ✗ 0; bugs ✗ 7, ? 1, ✓ 0; equal
sizes unchanged. The CLI: correct ✓ 1 (Bamba: ``✓ checked all 63 ops``), ? 3; bugs ✗ 8.
Bamba's ``conv-trim-keeps-future`` stays ``?`` (a known miss for names: that the model is causal
is in the attention's mask, and the window j..j+3 is only "not proven", never "wrong"; the CLI's value witness
says ✗). Checked on every corpus file with a conv, ``chunk``, ``split`` or ``unbind`` (172 files, 426 variants,
at their first DIMS): only Jamba, OpenELM and Bamba changed.

Branch inputs1 (infer/seeds.py ``batch_seed``): the ``[B]`` timesteps of pixart and stable_audio_dit are named (``?
35 of 70``, ``? 15 of 72``; 34 and 14 on 5774b39); their sinusoidal frequencies stay unnamed, and so do PixArt's
captions ``[B, S, 48]`` (48 is ``D+2*d_k``'s size: a width another name may have names nothing): both still ``?``.
Stable Audio's channels-first latents ``[B, 8, T]`` are seeded ``[B, F_in, T]`` (infer/seeds.py
``own_width_seed``, channels first as ``Conv1d`` takes them): ``? 67 of 72`` (15 before), what stays unnamed is
the timestep's Fourier features (``#2 matmul``, ``#3 cat``, ``#4 linear``) and what they reach.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public37 import bamba, pixart, sam_two_way, stable_audio_dit

MODULES = (sam_two_way, pixart, stable_audio_dit, bamba)
UNSURE, SURE = ("?", ()), ("✓", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (sam_two_way, ""): [UNSURE, UNSURE],
    (sam_two_way, "separate-heads-without-transpose"): [
        ("✗", ("mixed-axis", "projection-over-tokens")),
        ("✗", ("attends-over-wrong-axis", "broadcast-mismatch", "batch-mismatch", "broadcast-mismatch",
               "broadcast-mismatch", "broadcast-mismatch"))],
    (sam_two_way, "recombine-heads-without-transpose"): [("✗", ("mixed-axis", "projection-over-tokens")),
                                                          ("✗", ("broadcast-mismatch",) * 4)],
    (pixart, ""): [UNSURE, UNSURE],
    (pixart, "qkv-permute-tokens-as-heads"): [
        ("✗", ("sdpa-layout", "tokens-merged-with-features")),
        ("✗", ("sdpa-layout", "tokens-merged-with-features", "broadcast-mismatch"))],
    (pixart, "cross-out-reshape-without-transpose"): [("✗", ("tokens-merged-with-features",)),
                                                      ("✗", ("projection-over-tokens", "broadcast-mismatch"))],
    (stable_audio_dit, ""): [UNSURE, UNSURE],
    (stable_audio_dit, "out-reshape-without-transpose"): [("✗", ("mixed-axis",))] * 2,
    (stable_audio_dit, "rotate-half-interleaved"): [("✗", ("rotary-pairing-mismatch",))] * 2,
    (bamba, ""): [SURE, UNSURE],   # (? -> ✓ after the fixes, see the docstring)
    (bamba, "conv-trim-keeps-future"): [UNSURE, UNSURE],
    (bamba, "causal-mask-diagonal"): [("✗", ("causal-mask-hides-itself",))] * 2,
}

#: only one row is traced at equal sizes too (the suite's time is a budget: the others' equal-size outcomes are
#: the table above, measured once)
EQUAL_TESTED = {(bamba, "")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
