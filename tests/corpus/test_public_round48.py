"""A forty-eighth round of public-style files (tests/corpus/public48: Latte's alternating spatial and temporal DiT
blocks over video latents, ``'(b f) t d -> (b t) f d'`` folds between them; torchaudio's Conformer, time-major
``(T, B, D)`` for ``nn.MultiheadAttention`` and batch-first again for the convolution module; Qwen3-Next's gated
attention, a per-head query/gate split of one fused ``q_proj`` and ``sigmoid(gate)`` on the attention output;
diffusers' Sana linear attention, ReLU features, a padded row of ones as the normaliser, ``(B, H, d, N)``
products, and ``GLUMBConv`` over the tokens as an image), traced at distinct sizes and at equal sizes, first
sight recorded before any fix (on d191292: main f946d52 + the files).

``round_outcome`` (distinct | equal sizes) and the CLI (``cd /tmp && shapetrace trace FILE [bug] --dims DIMS``, at
the first DIMS, run on d191292):

==================== ========================== ======================= ======================= ==================
file                 variant                    distinct (first sight)  equal (first sight)     CLI (first sight)
==================== ========================== ======================= ======================= ==================
latte_spatiotemporal (correct)                  ? 0 of 74               ? 0 of 74               ? (false H name)
latte_spatiotemporal temporal-fold-reshape      ? 0 of 72               ?                       ?
latte_spatiotemporal unfold-rows-token-major    ? 0 of 74               ?                       ?
latte_spatiotemporal timestep-repeat-interleave ? 0 of 72               ?                       ?
torchaudio_conformer (correct)                  ? 80 of 89              ?                       ?
torchaudio_conformer conv-over-batch            ? 80 of 89              ?                       ✗ batch-entries-mix
torchaudio_conformer convolution-first (twin)   ? 80 of 89              ?                       ?
qwen3_next_gated     (correct)                  ? 37 of 43              ?                       ?
qwen3_next_gated     gate-flat-halves           ? 37 of 42              ?                       ?
qwen3_next_gated     output-no-transpose        ✗ mixed-axis            ✗ broadcast-mismatch    ✗ mixed-axis
sana_linear_attn     (correct)                  ? 22 of 37              ?                       ?
sana_linear_attn     output-fold-no-transpose   ✗ mixed-axis            ✗ broadcast-mismatch    ✗ mixed-axis
sana_linear_attn     ffn-unflatten-no-permute   ✗ mixed-axis            ✗ mixed-axis            ✗ mixed-axis
sana_linear_attn     ones-row-first (twin)      ? 22 of 37              ?                       ?
==================== ========================== ======================= ======================= ==================

At first sight (distinct sizes): the 4 correct files ✓ 0, ? 4, ✗ 0; the 7 bugs ✗ 3, ? 4, ✓ 0; the 3 twins ? 3.
At equal sizes no correct file or twin is ✗. After the fix: correct ✓ 0, ? 4, ✗ 0; bugs ✗ 4, ? 3, ✓ 0 (Latte's
``temporal-fold-reshape`` ? -> ✗ ``mixed-axis`` ×3 at distinct sizes, still ? at equal sizes); twins ? 3.

The fix (its test fails on f946d52, main):

* engine/infer/einops ``_heads_passed_through``: a one-letter ``h`` that the pattern's input side holds whole on an
  unnamed axis is not named ``H`` (heads are cut from features, ``'(h d)'``, or come named by provenance; a
  letter that is a spelling of heads and an equal size prove nothing) (tests/engine/test_infer_einops.py). Latte's
  ``'b f c h w -> (b f) c h w'`` named the latent height ``H``; without that false name the patch convolution's
  output is read ``[B·F, D, Hp, Wp]``, the frame tokens ``N = Hp·Wp``, and the bug's ``x.reshape(batches * t,
  frames, d)`` is a ``mixed-axis`` at the line of the bug (#35: the ``B·F`` rows cut with the tokens); the two
  later findings are its consequences downstream. At equal sizes (``Hp = Wp = 2``, ``F = 4``) nothing is named
  still: ``?``. No other row of the corpus changed at distinct sizes (the subset passes unchanged).

What first sight found wrong, and why each ``?`` stays:

* latte_spatiotemporal: at first sight the CLI printed a false name. The video ``[B, F, 4, 2·Hp, 2·Wp]`` enters
  unnamed (no seed reads a 5-d clip) and ``rearrange(x, 'b f c h w -> (b f) c h w')`` named the latent HEIGHT
  ``H`` (heads) only because the letter ``h`` spells heads and the height (4) equals ``H = 4`` (fixed, above).
  The correct file stays ``?`` (the ``B·F`` rows are never named: no seed reads a clip), so
  ``unfold-rows-token-major`` (a fold of unnamed rows in the wrong order) is ``?``; a 5-d clip seed ``[B, F, C,
  h, w]`` would decide it. The twin repeats the timestep rows as einops does: the same rows.
* torchaudio_conformer ``conv-over-batch``: the CLI's value check (``dependencies``) sees the depthwise
  convolution mix utterances (``batch-entries-mix``); ``round_outcome`` traces without it, so ``?``. The layout
  reading cannot see it: ``Conv1d`` over ``[T, D, B]`` names the sliding axis nothing, and a convolution along a
  batch axis has no contract yet (a row rule for ``conv1d``: its last axis must not be the batch) — a general
  rule, not tried here.
* qwen3_next_gated ``gate-flat-halves``: which fused layout ``q_proj``'s rows were trained for is not in the code;
  both cuts give a query and a gate of the right sizes per head, so only a value-level witness (a checkpoint)
  could tell. ``?`` (the chunk of the unnamed ``2·d_k`` per-head width is one of the 6 unchecked ops), never ✓.
* sana_linear_attn (correct, 22 of 37): ``F.pad`` on the feature axis (the ones row) and the ``(B, H, d+1, N)``
  products have no naming rule for a padded width, so the products and the normaliser's cut stay unnamed. The twin
  pads on top and divides by row 0: the same values, rightly not flagged.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public48 import latte_spatiotemporal, qwen3_next_gated, sana_linear_attn, torchaudio_conformer

MODULES = (latte_spatiotemporal, torchaudio_conformer, qwen3_next_gated, sana_linear_attn)
UNSURE = ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (latte_spatiotemporal, ""): [UNSURE, UNSURE],
    (latte_spatiotemporal, "temporal-fold-reshape"): [       # (distinct: ? -> ✗ after the einops fix)
        ("✗", ("mixed-axis",)), UNSURE],
    (latte_spatiotemporal, "unfold-rows-token-major"): [UNSURE, UNSURE],
    (latte_spatiotemporal, "timestep-repeat-interleave"): [UNSURE, UNSURE],
    (torchaudio_conformer, ""): [UNSURE, UNSURE],
    (torchaudio_conformer, "conv-over-batch"): [UNSURE, UNSURE],
    (torchaudio_conformer, "convolution-first"): [UNSURE, UNSURE],
    (qwen3_next_gated, ""): [UNSURE, UNSURE],
    (qwen3_next_gated, "gate-flat-halves"): [UNSURE, UNSURE],
    (qwen3_next_gated, "output-no-transpose"): [("✗", ("mixed-axis",)), ("✗", ("broadcast-mismatch",))],
    (sana_linear_attn, ""): [UNSURE, UNSURE],
    (sana_linear_attn, "output-fold-no-transpose"): [("✗", ("mixed-axis",)), ("✗", ("broadcast-mismatch",))],
    (sana_linear_attn, "ffn-unflatten-no-permute"): [("✗", ("mixed-axis",)), ("✗", ("mixed-axis",))],
    (sana_linear_attn, "ones-row-first"): [UNSURE, UNSURE],
}

#: only the row the fix changed is traced at equal sizes too (the suite's time is a budget: the others'
#: equal-size outcomes are the table above, measured once)
EQUAL_TESTED = {(latte_spatiotemporal, "temporal-fold-reshape")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
