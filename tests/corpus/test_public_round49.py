"""A forty-ninth round of public-style files (tests/corpus/public49: transformers' GPT-2 with its legacy tuple
cache driven as ``generate`` drives it, a prefill and then one step fed the next token's ids ``(B, 1)``; NRMS's
user encoder after microsoft/recommenders and yusanshi/news-recommendation, the clicked titles entering as a batch
of sets of sequences ``(B, N, T)`` folded into ``(B*N, T)`` for the news encoder), traced at distinct sizes and at
equal sizes, first sight recorded before any fix (on f946d52 + the files).

``round_outcome`` (distinct | equal sizes) and the CLI (``cd /tmp && shapetrace trace FILE [bug] --dims DIMS``, at
the first DIMS, run on f946d52: the same marks as the distinct column):

================= ==================== ============================== ============================ ============
file              variant              distinct (first sight)         equal (first sight)          after fixes
================= ==================== ============================== ============================ ============
gpt2_past_step    (correct)            ? 46 of 52 (#27 embedding)     ?                            ✓ | ?
gpt2_past_step    mask-rows-from-start ✗ causal-mask-hides-itself     ✗ causal-mask-hides-itself   ✗ | ✗
nrms_user_encoder (correct)            ? 0 of 45 (nothing named)      ?                            ✓ | ?
nrms_user_encoder unfold-set-major     ? 0 of 46 (nothing named)      ?                            ✗ | ✗ mixed-axis
================= ==================== ============================== ============================ ============

At first sight (distinct sizes): the 2 correct files ✓ 0, ? 2, ✗ 0; the 2 bugs ✗ 1, ? 1, ✓ 0. After the fixes:
correct ✓ 2, ? 0, ✗ 0 (and no ✗ at equal sizes); bugs ✗ 2, ? 0, ✓ 0.

The fixes (tests/engine/test_infer_seeds.py and tests/engine/test_verdict.py; each test fails on f946d52):

* a step's next ids fed batch-first ``(B, 1)`` are seeded ``[B, 1]`` (the token axis of one entry needs no name),
  beside the sequence-first ``[1, B]`` and under its condition (B's size no other declared name's: at B = T a
  ``[4, 1]`` may be positions ``[T, 1]``). GPT-2's step embedding ``#27`` was ``[2, 1, D]`` with its batch unnamed.
* a batch of sets of sequences ``[B, N, T]`` (ids) or ``[B, N, T, D]`` is seeded where N is declared, wherever it
  stands among the declared names (the declared order already named ``B=2 N=3 T=5``, not ``B=2 T=5 ... N=3``); at
  B = T the batch last, ``[T, N, B]``, stands beside it as another reading, never a seed alone. NRMS's fold and
  unfold are named ``B*N``; ``unfold-set-major`` (the fold read back set-major) is ``✗ mixed-axis``.

* engine/verdict ``_weight_rows``: a projection by a module's own weight (``nn.Linear``) that reads a named axis is
  checked whatever its new width's name. NRMS's additive attention ``linear(D, 16)`` makes 16 = 2·d_k at these sizes,
  a width left unnamed (which name, sizes cannot say), and its two ``linear`` ops were the file's only unchecked ops
  (43 of 45). Any order of a weight's rows is another weight; the ops that then split, move or meet the width have
  names to check of their own. Four correct files of earlier rounds go ``?`` -> ``✓`` the same way (public23
  videomae, reports3 widedeep_fastformer, reports34 text_cls_view_heads, reports5 tabformer_seq_first).
* engine/verdict ``_pads_unhidden`` (with ``op_args._pads_looked_up``): pad tokens that entered (ids holding a
  table's declared ``padding_idx``) in a run where nothing hides any key (no mask fill, no mask to a fused
  attention, no mask added to scores) are ``not proven``. Without it, reports33's ``pads-unmasked`` (an encoder
  called without its ``src_key_padding_mask``) became ``✓`` with the weight rows, its ``?`` having rested on its
  unnamed latent head alone; it stays ``?`` now, for its own reason.

Why each stays ``?`` at equal sizes: gpt2_past_step's next ids ``[4, 1]`` are not seeded (``[T, 1]`` fits as well);
nrms_user_encoder's ``[4, 3, 4]`` reads ``[B, N, T]`` or ``[T, N, B]``.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public49 import gpt2_past_step, nrms_user_encoder

MODULES = (gpt2_past_step, nrms_user_encoder)
UNSURE = ("?", ())
HIDES = ("✗", ("causal-mask-hides-itself",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (gpt2_past_step, ""): [("✓", ()), UNSURE],                        # (distinct: ? -> ✓ after the seeds fix)
    (gpt2_past_step, "mask-rows-from-start"): [HIDES, HIDES],
    (nrms_user_encoder, ""): [("✓", ()), UNSURE],                     # (distinct: ? -> ✓ after the weight rows)
    (nrms_user_encoder, "unfold-set-major"): [("✗", ("mixed-axis",))] * 2,   # (both: ? -> ✗ after the seeds fix)
}

#: the rows traced at equal sizes too (the suite's time is a budget: the others' equal-size outcomes are the table
#: above, measured once)
EQUAL_TESTED = {(gpt2_past_step, "mask-rows-from-start"), (nrms_user_encoder, "unfold-set-major")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
