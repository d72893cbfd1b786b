"""A thirty-first round of public-style files (tests/corpus/public31: apple/corenet's OpenELM, a fused ``qkv_proj``
split along the heads ``(Hq, Hk, Hk)`` with per-head q/k RMSNorm and ``repeat_interleave`` for GQA; transformers'
XGLM, sinusoidal positions from an offset and a BART-style ``(B H, T, d)`` ``bmm`` attention with a causal mask
joined to an expanded padding mask; kyutai-labs/moshi's streaming attention, ``einops.rearrange`` of a fused
projection, interleaved-pair rotary and a context-limited causal bias built from positions; transformers'
Qwen2-Audio encoder, strided convolutions over a mel spectrogram, a padding mask from the lengths and an
``AvgPool1d`` over time), traced at distinct sizes and at B = T = H = 4, first sight recorded before any fix.

First sight on fbe7f8f + the files (``round_outcome``: distinct sizes | equal sizes), and the CLI (``cd /tmp &&
shapetrace trace FILE [bug] --dims DIMS``, the same verdicts) at the first DIMS:

=============== ======================= ============================ ============================ ===============
file            variant                 distinct (DIMS)              equal sizes                  after the fix
=============== ======================= ============================ ============================ ===============
openelm         (correct)               ? 26 of 27                   ? 8 of 27                    (same)
openelm         repeat-kv-tiled         ✗ gqa-head-order             ✗ gqa-head-order             (same)
openelm         merge-without-transpose ✗ mixed-axis                 ✗ broadcast-mismatch         (same)
xglm            (correct)               ? 34 of 36                   ? 0 of 36                    (same)
xglm            padding-on-queries      ? 34 of 36                   ? 4 of 36                    ✗ mask-wrong-axis
xglm            shape-without-transpose ✗ mixed-axis                 ✗ broadcast-mismatch ×2      (same)
moshi_streaming (correct)               ? 21 of 25                   ? 7 of 25                    (same)
moshi_streaming delta-reversed          ✗ causal-mask-reversed       ✗ causal-mask-reversed       (same)
moshi_streaming context-off-by-one      ? 21 of 25                   ? 9 of 25                    (same)
qwen2_audio     (correct)               ? 28 of 32                   ? 28 of 32                   (same)
qwen2_audio     pool-over-features      ? 25 of 29                   ? 25 of 29                   (same)
qwen2_audio     mask-on-queries         ✗ mask-wrong-axis            ✗ mask-wrong-axis            (same)
=============== ======================= ============================ ============================ ===============

Branch inputs1 (infer/seeds.py ``batch_seed``, engine/lengths_read.py): Qwen2-Audio's ``feature_lengths``
``[B]`` is named, every op checked (correct 32 of 32, ``pool-over-features`` 29 of 29), and both stay ``?``: the
pads of the mask built from those lengths were not measured unread. Names alone made ``pool-over-features`` ``✓``
(an ``AvgPool1d`` over the features is no name's contract): no check catches it yet.

At distinct sizes the 4 correct files were ✓ 0, ? 4, ✗ 0; the 8 bugs ✗ 5, ? 3, ✓ 0 (after the fix ✗ 6, ? 2).

The fix (engine/mask_parts): XGLM's ``padding-on-queries`` expands ``mask[:, None, :, None]`` to ``(B, 1, T, T)``
before adding it to the causal triangle; the combined mask's part was read at the expand's shape, which varies
along the keys too, so the rule for a padding part on the queries (rules/masks ``_query_only_part``) never saw it.
An ``expand`` (``expand_as``, ``broadcast_to``) is now followed to its source, which broadcasts exactly as the
expand did: the part is ``[B, 1, T, 1]``. (Qwen2-Audio's ``mask-on-queries``, the same expand but no causal part,
was already ✗: a one-part mask is read on its strides.)

What stays ``?`` and why (left, not forced):

* OpenELM: #26, the FFN's ``proj_2``: its input is a ``chunk`` half of the SwiGLU's ``4 D`` (``F[0:128]``, no
  declared name), so its output width (64, the size of ``D``) stays unnamed: equal sizes never decide a name. At
  B = T = H = 4 only 8 ops are checked, all on the values of the rotary tables and the causal mask.
  (Round 37, branch r37: the SwiGLU's product of the two ``chunk`` halves keeps ``F[0:128]``, two pieces of one
  projection paired as its weight laid them out (engine/axis_compute ``_pieces_of_projections``), so ``proj_2``
  makes ``D`` as every projection of features does: ✓ at DIMS, still ``?`` at equal sizes.)
* XGLM: the sinusoidal table ``weights.index_select(0, positions)`` ``(64, D)`` is cut by position ids made by an
  ``arange`` plus the padding offset: #2 and #3 stay unnamed. (Since lib15 named, its columns by the ``D`` they
  are added to (engine/infer/lined_up ``_rows_of_a_held_table``): ✓ at distinct sizes, ? still at equal ones.)
* Moshi: the interleaved-pair rotary (``view(..., d/2, 2)``, ``stack(dim=-1)``, ``view``) leaves its pairs
  unnamed (#12-#15). ``context-off-by-one`` (``delta <= context``) widens the window by one key: only the mask's
  values say so, and no declared size states the context (a known miss, a value-level slip).
* Qwen2-Audio: the mel spectrogram ``(B, n_mels, 2T)`` is undeclared, and the padding mask from the lengths is
  unnamed at its cuts (#5-#7) and at the position table's add (#23). ``pool-over-features`` halves ``D`` (the pool
  runs over the last axis, the features) and the result is returned without another op reading it: no contract
  sees the halved features (a known miss at first sight: nothing downstream lines ``D/2`` up against ``D``).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public31 import moshi_streaming, openelm, qwen2_audio, xglm

MODULES = (openelm, xglm, moshi_streaming, qwen2_audio)
OK, UNSURE = ("✓", ()), ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (openelm, ""): [OK, UNSURE],   # (r37: ? -> ✓ at DIMS, see the docstring)
    (openelm, "repeat-kv-tiled"): [("✗", ("gqa-head-order",))] * 2,
    (openelm, "merge-without-transpose"): [("✗", ("mixed-axis",)), ("✗", ("broadcast-mismatch",))],
    (xglm, ""): [("✓", ()), UNSURE],          # (? ? until lib15: the sinusoidal lookup's columns unnamed)
    (xglm, "padding-on-queries"): [("✗", ("mask-wrong-axis",))] * 2,
    (xglm, "shape-without-transpose"): [("✗", ("mixed-axis",)), ("✗", ("broadcast-mismatch", "broadcast-mismatch"))],
    (moshi_streaming, ""): [UNSURE, UNSURE],
    (moshi_streaming, "delta-reversed"): [("✗", ("causal-mask-reversed",))] * 2,
    (moshi_streaming, "context-off-by-one"): [UNSURE, UNSURE],
    (qwen2_audio, ""): [UNSURE, UNSURE],
    (qwen2_audio, "pool-over-features"): [UNSURE, UNSURE],
    (qwen2_audio, "mask-on-queries"): [("✗", ("mask-wrong-axis",))] * 2,
}

#: only one row is traced at equal sizes too (the suite's time is a budget: the others' equal-size outcomes are
#: the table above, measured once): XGLM's padding mask on the queries, the row the fix turned ✗
EQUAL_TESTED = {(xglm, "padding-on-queries")}


test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
