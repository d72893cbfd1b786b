"""A twenty-fifth round of public-style files (tests/corpus/public25: lucidrains' BoTNet MHSA with its 2-D
absolute position table, lucidrains' LambdaLayer with global position lambdas, openai/sparse_attention's local
and strided masks, lucidrains' memory-efficient (chunked, Rabe & Staats) attention), traced at distinct sizes and
at B = T = H = 4 (Hp = Wp = 4), first sight recorded before any fix.

First sight (``round_outcome``: no dependency contracts; distinct sizes | equal sizes) on d58f65e + the files,
and the CLI (``shapetrace trace FILE [bug] --dims DIMS``, dependency contracts measured) at the first DIMS:

======================== ============================ ========================== ============== ====================
file                     variant                      distinct (DIMS)            equal sizes    CLI
======================== ============================ ========================== ============== ====================
botnet_mhsa              (correct)                    ? 17 of 19                 ? 0 of 18      ? 17 of 19
botnet_mhsa              pos-table-columns-first      ? 17 of 19                 ?              ? (same)
botnet_mhsa              merge-without-permute        ✗ mixed-axis               ✗ mixed-axis   ✗ (same)
lambda_layer             (correct)                    ? 7 of 16                  ? 0 of 16      ? 7 of 16
lambda_layer             keys-softmax-over-width      ? 7 of 16                  ?              ? (same)
lambda_layer             output-grid-transposed       ✗ mixed-axis               ?              ✗ (same)
sparse_strided           (correct)                    ✓ all 40                   ? 0 of 40      ✓ all 40
sparse_strided           strided-rows-columns-swapped ✓ all 40 (a bug: missed)   ?              ✗ causal-mask-leaks
sparse_strided           merge-without-permute        ✗ mixed-axis               ✗ broadcast-   ✗ mixed-axis,
                                                                                 mismatch       heads-mix
chunked_memory_efficient (correct)                    ? 59 of 66                 ? 1 of 44      ? 59 of 66
chunked_memory_efficient causal-offset-reversed       ✗ mask-hides-every-key     ✗ (same)       ✗ (same)
chunked_memory_efficient max-over-queries             ? 63 of 70                 ?              ✗ causal-mask-leaks
======================== ============================ ========================== ============== ====================

At distinct sizes the 4 correct files were ✓ 1, ? 3, ✗ 0; the 8 bugs ✗ 4, ? 3, ✓ 1 (the mirrored strided mask).
The CLI: correct ✓ 1, ? 3, ✗ 0; bugs ✗ 6, ? 2, ✓ 0 (its measured contracts caught the two leaks).

The fix (one general mechanism, tests in tests/engine/test_directions.py): ``directions.whole_past_hidden``: a
mask that hides every key before each query while some query sees a later key is a causal pattern mirrored (the
exact reversed triangle was already ``hides_side == "past"``); ``rules/directions`` reports it as
``causal-mask-reversed`` where queries and keys are one sequence. sparse_strided ``strided-rows-columns-swapped``:
✓ -> ✗ at distinct sizes, ? -> ✗ at equal ones, read on the mask's values, before any contract is measured.

Now (``round_outcome``, distinct): correct ✓ 1, ? 3, ✗ 0 (equal sizes: ? 4); bugs ✗ 5, ? 3, ✓ 0. What stays ``?``
and why: BoTNet (the ``height`` and ``width`` tables are parameters whose sizes alone match Hp and Wp: a name from
size would be a guess, so the position logits ``einsum('b h i d, j d -> b h i j')`` and their add stay unchecked,
and the table flattened columns-first is the same op with the same shapes: not decidable from what was recorded);
LambdaLayer (the keys' and values' 1x1 convolutions to ``dim_k`` and ``dim_u * dim_v`` and the lambdas'
``einsum`` over them carry widths no declared name covers; the softmax over ``dim_k`` is then a reduction over an
unnamed axis); the chunked attention (the per-bucket summaries stacked on a new last axis, the key buckets, and
the ``amax`` over it: an axis made by ``stack`` that no name covers; ``max-over-queries`` shifts each key's
scores by a maximum over the queries, a value-level slip that only the CLI's measured contract sees as a leak).
At equal sizes every correct file is ``?`` (B = T = H and Hp = Wp leave the layout undecided).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public25 import botnet_mhsa, chunked_memory_efficient, lambda_layer, sparse_strided

MODULES = (botnet_mhsa, lambda_layer, sparse_strided, chunked_memory_efficient)
OK, UNSURE = ("✓", ()), ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (botnet_mhsa, ""): [UNSURE, UNSURE],
    (botnet_mhsa, "pos-table-columns-first"): [UNSURE, UNSURE],
    (botnet_mhsa, "merge-without-permute"): [("✗", ("mixed-axis",))] * 2,
    (lambda_layer, ""): [UNSURE, UNSURE],
    (lambda_layer, "keys-softmax-over-width"): [UNSURE, UNSURE],
    (lambda_layer, "output-grid-transposed"): [("✗", ("mixed-axis",)), UNSURE],
    (sparse_strided, ""): [UNSURE, UNSURE],   # (✓ up to b2f62da: its local band's width, held by no window)
    (sparse_strided, "strided-rows-columns-swapped"): [("✗", ("causal-mask-reversed",))] * 2,
    (sparse_strided, "merge-without-permute"): [("✗", ("mixed-axis",)), ("✗", ("broadcast-mismatch",))],
    (chunked_memory_efficient, ""): [UNSURE, UNSURE],
    (chunked_memory_efficient, "causal-offset-reversed"): [("✗", ("mask-hides-every-key",))] * 2,
    (chunked_memory_efficient, "max-over-queries"): [UNSURE, UNSURE],
}

#: no row is traced at equal sizes here (the suite's time is a budget: the equal-size outcomes are the table
#: above, measured once; the fixed bug's equal-size finding is tested in tests/engine/test_directions.py)
EQUAL_TESTED: set = set()


test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
