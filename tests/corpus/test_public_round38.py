"""A thirty-eighth round of public-style files (tests/corpus/public38: d2l.ai's ``MultiHeadAttention``, heads folded
into the batch by ``transpose_qkv`` and padding as ``valid_lens`` filled by ``masked_softmax``; Open-Sora's STDiT
block, spatial attention over each frame's patches and temporal attention over each patch's frames; NVIDIA Hymba's
hybrid-head layer, meta tokens prepended, attention and a state-space branch from one ``in_proj``, grouped-query
attention with rotary in a sliding window; Lag-Llama, a decoder-only forecaster over standardised lag features),
traced at distinct sizes and at equal sizes, first sight recorded before any fix (on 5774b39 + the files).

``round_outcome`` (distinct | equal sizes) and the CLI (``cd /tmp && shapetrace trace FILE [bug] --dims DIMS``, at
the first DIMS; the CLI builds the model under the trace and measures the dependency contracts on the values):

============== ================================ ===================== ===================== =========================
file           variant                          distinct (DIMS)       equal sizes           CLI (first sight)
============== ================================ ===================== ===================== =========================
d2l_mha        (correct)                        ! tokens-merged-with- ! tokens-merged-with- ! 50 of 56 ops, 1 warning
                                                features              features
d2l_mha        transpose-output-without-permute ✗ mixed-axis, tokens- ✗ broadcast-mismatch, ✗ 1 error, 1 warning
                                                merged-with-features  tokens-merged-w.-f.
d2l_mha        valid-lens-repeat                ! tokens-merged-w.-f. ! tokens-merged-w.-f. ! 1 warning
opensora_stdit (correct)                        ? 85 of 91 ops        ?                     ? 85 of 91 ops
opensora_stdit temporal-fold-patch-major        ✗ mixed-axis          ✗ mixed-axis          ✗ 1 error
opensora_stdit spatial-unfold-patch-major       ✗ mixed-axis          ✗ mixed-axis          ✗ 1 error
hymba          (correct)                        ? 55 of 87 ops        ?                     ? 55 of 87 ops
hymba          repeat-kv-tiled                  ?                     ?                     ?
hymba          meta-dropped-from-the-end        ? (not proven: #86    ?                     ✗ token-ignores-itself
                                                keeps (3+T)[0:6])                           (on the values)
lag_llama      (correct)                        ? 21 of 72 ops        ? nothing checked     ? nothing checked
lag_llama      lag-window-from-the-start        ?                     ?                     ?
lag_llama      causal-flag-dropped              ?                     ?                     ?
============== ================================ ===================== ===================== =========================

At first sight (``round_outcome``, distinct sizes): the 4 correct files ✓ 0, ? 3, ✗ 0, and d2l ``!`` (a false
warning on correct code); the 8 bugs ✗ 3, ? 5, ✓ 0 (d2l's bug also carried the false warning). The CLI: correct
✓ 0, ? 3, ``!`` 1; bugs ✗ 4 (Hymba's ``meta-dropped-from-the-end`` by the dependency contracts on the values:
output token 5 does not depend on its own input token), ? 4, ✓ 0.

The fix: engine/rules/row_folds ``_undone_untouched``: d2l's ``masked_softmax`` views the scores ``[B·H, T, T]``
as rows ``[B·H·T, T]``, fills each query's row past its sequence's length (``X[~mask] = -1e6``) and views them
back ``reshape(shape)``: a fold of batch entries, heads and tokens (no features) that only entry-by-entry ops read
(writes, fills, elementwise, dropout), keeping every axis, until a view undoes it is a round trip, not a merge
(before: a ``tokens-merged-with-features`` warning, ``!`` on correct code). A fold summed or mixed across its rows
before it is undone keeps the warning (tests/engine/test_row_folds.py, fails on 5774b39). After it: d2l correct
``?`` at both sizes, its bug ``✗ mixed-axis`` (``✗ broadcast-mismatch`` at equal sizes), no warning.

After the fix (``round_outcome``, distinct sizes): correct ✓ 0, ? 4, ✗ 0; bugs ✗ 3, ? 5, ✓ 0.

Why each stays ``?`` (what was left unnamed or cannot be decided):

* d2l_mha (25 of 28): ``valid_lens`` enters as ``[B]`` (no seed for a 1-D input), so its ``repeat_interleave``
  and the row index it is compared with are unnamed; the bug ``valid-lens-repeat`` (lengths tiled head-major where
  ``(B·H)`` is batch-major) is only in those unnamed values: a known miss for names, never ``✓``. On main after
  this stop's merges of inputs1 (the ``[B]`` seed for a one-axis argument of the model's call, with the
  ``lengths-unmeasured`` note) and r39 (a write through a boolean mask of the scores' shape checked as a fill):
  the correct file is ``?`` 28 of 28 (the padding contract not measured on a mask built from lengths) and the
  bug ``✗ mask-wrong-batch-order`` at distinct sizes (``?`` at B = T = H = 4).
* opensora_stdit (85 of 91): the timestep embedding ``t`` enters as ``[B, D]`` (no seed for a 2-D float input):
  ``t_block`` and the ``reshape(B, 6, -1)`` / ``chunk(6)`` of the modulation stay unnamed. A ``[B, D]`` seed was
  tried and left out: it names show-attend-and-tell's entered decoder state (reports21) and turns that file's
  ``sum-over-features`` bug ``✓`` (no rule reads a token-weighted sum taken over the features).
* hymba (55 of 87, on 190afd4 and after fused1's engine/infer/pieces.py): one ``in_proj`` of its own width
  ``F`` (q, k, v, and the state-space branch's x and z: ``split([64, 32, 32, 64, 64])``) left every piece's
  per-head width unnamed on 190afd4 (``view(B, N, H, d)`` of ``F[0:64]`` named ``H`` only; the key/value pieces
  ``F[64:96]`` no names, also with ``H_kv=2`` declared and B = 3), so ``repeat_kv`` and the GQA head order were
  unchecked and ``repeat-kv-tiled`` was ``?`` at B = 3 with ``H_kv=2`` (:func:`test_hymba_kv_heads_tiled_are_caught`,
  a strict xfail on 190afd4). Now each piece is named by its use (the one viewed into H heads and read as the
  queries is ``D``, the two viewed into H_kv heads and read as keys and values ``D_kv``, x and z ``F[128:192]``,
  ``F[192:256]``: ``in_proj`` is ``D+D_kv+D_kv+F[128:192]+F[192:256]``): with ``H_kv=2`` the correct file is
  ``✓ checked all 87`` and the bug ``✗ gqa-head-order``. At the table's DIMS (no ``H_kv``) the key/value pieces'
  2 heads are no declared name, and a query piece alone proves nothing, so no piece is named and the rows stay
  ``?`` (55 of 87, 55 of 79 for the bug). The meta
  tokens cut ``[:, :T]`` instead of ``[:, M:]`` is "not proven" by names (both keep T entries); the CLI's value
  witness said ``✗ token-ignores-itself`` until stop 70, and says ``?`` since: the moved last token reaches no
  output at all, as it reaches none in a decoder fed its targets shifted right (ESPnet's TTS decoder, public60,
  which that finding called wrong), and one move cannot tell a shift by M from a shift by one.
* lag_llama (21 of 72): the series enters as ``[B, P + C]`` (13 steps: no declared size), the lag windows and
  static features are unnamed, so the tokens the decoder attends over are unnamed. ``causal-flag-dropped`` is a
  decoder without ``is_causal``: nothing in the code declares it causal, so no contract is broken (a known miss);
  ``lag-window-from-the-start`` reads other values of the same series (values, not names).
"""

from __future__ import annotations

from tests.corpus.helpers import findings, round_outcome, round_tests, traced_build, verdict_line
from tests.corpus.public38 import d2l_mha, hymba, lag_llama, opensora_stdit

MODULES = (d2l_mha, opensora_stdit, hymba, lag_llama)
UNSURE = ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (d2l_mha, ""): [UNSURE, UNSURE],   # (! -> ? after the fix, see the docstring)
    (d2l_mha, "transpose-output-without-permute"): [("✗", ("mixed-axis",)), ("✗", ("broadcast-mismatch",))],
    (d2l_mha, "valid-lens-repeat"): [("✗", ("mask-wrong-batch-order",)), UNSURE],   # (? on 190afd4: see above)
    (opensora_stdit, ""): [UNSURE, UNSURE],
    (opensora_stdit, "temporal-fold-patch-major"): [("✗", ("mixed-axis",))] * 2,
    (opensora_stdit, "spatial-unfold-patch-major"): [("✗", ("mixed-axis",))] * 2,
    (hymba, ""): [UNSURE, UNSURE],
    (hymba, "repeat-kv-tiled"): [UNSURE, UNSURE],
    (hymba, "meta-dropped-from-the-end"): [UNSURE, UNSURE],
    (lag_llama, ""): [UNSURE, UNSURE],
    (lag_llama, "lag-window-from-the-start"): [UNSURE, UNSURE],
    (lag_llama, "causal-flag-dropped"): [UNSURE, UNSURE],
}

#: only one row is traced at equal sizes too (the suite's time is a budget: the others' equal-size outcomes are
#: the table above, measured once)
EQUAL_TESTED = {(d2l_mha, "")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)


def test_hymba_kv_heads_tiled_are_caught():
    """A strict xfail on 190afd4 (``?``: the fused ``in_proj``'s pieces unnamed); ``✗`` since engine/infer/pieces.py."""
    assert round_outcome(hymba, "repeat-kv-tiled", "B=3 T=6 D=64 H=4 H_kv=2") == ("✗", ("gqa-head-order",))


def test_hymba_correct_with_kv_heads_declared_is_checked_throughout():
    """Every op is named and checked; ``✓`` until ab16b63, ``?`` since: its mask (a causal window of 4 in which the
    meta tokens stay visible to every query) is a pattern no reader of masks knows, so which keys each query should
    see is said to be unchecked (engine/mask_patterns.py), as a window's width is."""
    t = traced_build(hymba, "", "B=3 T=6 D=64 H=4 H_kv=2")
    line = verdict_line(t)
    assert line.startswith("? checked 87 of 87 ops") and findings(t) == ()
    assert [part.split("'s mask")[0] for part in line.split("not proven: ")[1:]] == \
        ["each of #35, #75 scaled_dot_product_attention"]   # (said once for both since b008656)
