"""Fused projections split into more pieces than q, k and v (tests/corpus/fused: AI2 OLMo v1's
``OLMoParallelBlock``, one ``fused_attn_ff_proj`` cut ``split((d_model, n_kv·d, n_kv·d, hidden))`` into the queries,
the grouped keys and values and the feed-forward's input), traced at distinct sizes and at equal sizes, first sight
recorded on 190afd4 + the file, then after fused1's engine/infer/pieces.py (each piece named by its use).

``round_outcome`` (distinct | equal sizes):

============= ================================ ===================== ===================== =====================
file          variant                          190afd4 (DIMS)        190afd4 (equal)       after (DIMS | equal)
============= ================================ ===================== ===================== =====================
olmo_parallel (correct)                        ? 31 of 57 ops        ? 20 of 57 ops        ? 55 of 57 | ? 20 of 57
olmo_parallel kv-heads-tiled                   ?                     ?                     ✗ gqa-head-order (both)
olmo_parallel heads-merged-without-transpose   ✗ mixed-axis          ✗ projection-over-    ✗ mixed-axis |
                                                                     tokens                ✗ broadcast-mismatch
============= ================================ ===================== ===================== =====================

On 190afd4 the projection's width (D + 2·D_kv + 2·D = 256 at D = 64, H = 4, H_kv = 2) is a width of its own,
``F``, and its pieces ``F[0:64]``, ``F[64:96]``... name no heads: ``view(B, T, n_heads, C // n_heads)`` of the
queries names ``H`` only, the key/value views nothing, so ``repeat_interleave`` and the GQA head order are unchecked
and the tiled key/value heads stay ``?``. After: the piece viewed into H heads and read as sdpa's queries is ``D``,
the two viewed into H_kv heads and read as its keys and values ``D_kv``, the feed-forward's piece ``F[128:256]``
(``fused_attn_ff_proj`` is ``D+D_kv+D_kv+F[128:256]``). Why the correct file stays ``?``: at DIMS, ``ff_out``
(#28, #56) reads the SwiGLU product ``silu(gate) * x`` of the two halves ``F[128:256][64:128]`` and
``F[128:256][0:64]``, which comes out unnamed: a limit of the elementwise rule on halves of a piece, not of the
pieces' names (on 190afd4 ``Linear(D, 384)`` then ``split([128, 256])[1].chunk(2)`` leaves ``down``'s input
unnamed the same way, where one ``chunk(2)`` of ``F`` lines up and is ``✓``); at B = T = H = 4 the entered
tokens' names come from sizes alone (``not proven``). The bug ``heads-merged-without-transpose`` was ``✗`` on
190afd4 already (the queries' heads were named); at equal sizes its finding moves from ``projection-over-tokens``
to ``broadcast-mismatch`` (the residual add #26 lines up the merge's ``[B, H, 64]`` with ``[B, T, D]``: H against
T), ``✗`` both.
"""

from __future__ import annotations

from tests.corpus.fused import olmo_parallel
from tests.corpus.helpers import round_tests

MODULES = (olmo_parallel,)
UNSURE = ("?", ())
GQA = ("✗", ("gqa-head-order",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (olmo_parallel, ""): [UNSURE, UNSURE],
    (olmo_parallel, "kv-heads-tiled"): [GQA, GQA],
    (olmo_parallel, "heads-merged-without-transpose"): [("✗", ("mixed-axis",)), ("✗", ("broadcast-mismatch",))],
}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED)
