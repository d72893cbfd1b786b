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
* pixart (34 of 70) and stable_audio_dit (14 of 72): the timestep enters as ``[B]`` (no seed for a 1-D input: a
  length-2 vector is a batch of steps or anything else), the timestep embedding and every modulation it feeds stay
  unnamed; PixArt's captions ``[B, S, 48]`` and Stable Audio's latents ``[B, 8, T]`` (channels first) are not
  seeded either (the own-width seed reads ``[B, T, F_in]`` only).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public37 import bamba, pixart, sam_two_way, stable_audio_dit

MODULES = (sam_two_way, pixart, stable_audio_dit, bamba)
UNSURE = ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (sam_two_way, ""): [UNSURE, UNSURE],
    (sam_two_way, "separate-heads-without-transpose"): [
        ("✗", ("mixed-axis",)),
        ("✗", ("attends-over-wrong-axis", "broadcast-mismatch", "batch-mismatch", "broadcast-mismatch",
               "broadcast-mismatch", "broadcast-mismatch"))],
    (sam_two_way, "recombine-heads-without-transpose"): [("✗", ("mixed-axis",)), ("✗", ("broadcast-mismatch",) * 4)],
    (pixart, ""): [UNSURE, UNSURE],
    (pixart, "qkv-permute-tokens-as-heads"): [
        ("✗", ("sdpa-layout", "tokens-merged-with-features")),
        ("✗", ("sdpa-layout", "tokens-merged-with-features", "broadcast-mismatch"))],
    (pixart, "cross-out-reshape-without-transpose"): [("✗", ("tokens-merged-with-features",)),
                                                      ("✗", ("projection-over-tokens", "broadcast-mismatch"))],
    (stable_audio_dit, ""): [UNSURE, UNSURE],
    (stable_audio_dit, "out-reshape-without-transpose"): [("✗", ("mixed-axis",))] * 2,
    (stable_audio_dit, "rotate-half-interleaved"): [("✗", ("rotary-pairing-mismatch",))] * 2,
    (bamba, ""): [UNSURE, UNSURE],
    (bamba, "conv-trim-keeps-future"): [UNSURE, UNSURE],
    (bamba, "causal-mask-diagonal"): [("✗", ("causal-mask-hides-itself",))] * 2,
}

#: only one row is traced at equal sizes too (the suite's time is a budget: the others' equal-size outcomes are
#: the table above, measured once)
EQUAL_TESTED = {(bamba, "")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
