"""A forty-eighth round of public-style files (tests/corpus/public48: transformers' GPT-2 with its legacy tuple
cache driven as ``generate`` drives it, a prefill and then one step fed the next token's ids ``(B, 1)``; NRMS's
user encoder after microsoft/recommenders and yusanshi/news-recommendation, the clicked titles entering as a batch
of sets of sequences ``(B, N, T)`` folded into ``(B*N, T)`` for the news encoder), traced at distinct sizes and at
equal sizes, first sight recorded before any fix (on f946d52 + the files).

``round_outcome`` (distinct | equal sizes) and the CLI (``cd /tmp && shapetrace trace FILE [bug] --dims DIMS``, at
the first DIMS, run on f946d52: the same marks as the distinct column):

================= ==================== ============================== ============================ ============
file              variant              distinct (first sight)         equal (first sight)          after fixes
================= ==================== ============================== ============================ ============
gpt2_past_step    (correct)            ? 46 of 52 (#27 embedding)     ?                            ? | ?
gpt2_past_step    mask-rows-from-start ✗ causal-mask-hides-itself     ✗ causal-mask-hides-itself   ✗ | ✗
nrms_user_encoder (correct)            ? 0 of 45 (nothing named)      ?                            ? | ?
nrms_user_encoder unfold-set-major     ? 0 of 46 (nothing named)      ?                            ? | ?
================= ==================== ============================== ============================ ============

At first sight (distinct sizes): the 2 correct files ✓ 0, ? 2, ✗ 0; the 2 bugs ✗ 1, ? 1, ✓ 0.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public48 import gpt2_past_step, nrms_user_encoder

MODULES = (gpt2_past_step, nrms_user_encoder)
UNSURE = ("?", ())
HIDES = ("✗", ("causal-mask-hides-itself",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (gpt2_past_step, ""): [UNSURE, UNSURE],
    (gpt2_past_step, "mask-rows-from-start"): [HIDES, HIDES],
    (nrms_user_encoder, ""): [UNSURE, UNSURE],
    (nrms_user_encoder, "unfold-set-major"): [UNSURE, UNSURE],
}

#: the rows traced at equal sizes too (the suite's time is a budget: the others' equal-size outcomes are the table
#: above, measured once)
EQUAL_TESTED = {(gpt2_past_step, "mask-rows-from-start")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
