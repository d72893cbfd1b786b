"""A twenty-third round of public-style files (tests/corpus/public23: Perceiver AR's prefix-causal attention,
PatchTST's channel-independent patches with residual attention scores, VideoMAE's tubelet embedding with its
query and value biases, GroupViT's assignment attention normalised over the groups), traced at distinct sizes and
at B = T = H = 4, first sight recorded before any fix.

First sight (``round_outcome``: no dependency contracts; distinct sizes | equal sizes) on 2fe0908 + the files,
and the CLI (``shapetrace trace FILE [bug] --dims DIMS``, dependency contracts measured) at the first DIMS:

=============== ================================== ============================ ============== ==================
file            variant                            distinct (DIMS)              equal sizes    CLI
=============== ================================== ============================ ============== ==================
perceiver_ar    (correct)                          ✓                            ?              ✓ all 24
perceiver_ar    causal-mask-without-offset         ✓ (a bug passed)             ?              ✓ (a bug passed)
perceiver_ar    merge-heads-without-permute        ✗ mixed-axis                 ✗ (same)       ✗ (same)
patchtst        (correct)                          ✗ projection-over-tokens x2  ?              ✗ (same)
                                                   (false)
patchtst        channels-merged-without-permute    ✗ projection-over-tokens x2  ?              ✗ (same)
patchtst        res-scores-transposed              ✗ projection-over-tokens x2  ?              ✗ (same)
videomae        (correct)                          ? (the head's classes)       ?              ? 22 of 23
videomae        tubelets-flatten-without-transpose ✗ mixed-axis                 ✗ (same)       ✗ (same)
videomae        pool-over-channels                 ✗ projection-over-tokens,    ✗ (same)       ✗ (same)
                                                   norm-over-tokens
groupvit_assign (correct)                          ?                            ?              ? 11 of 26
groupvit_assign hard-argmax-over-tokens            ?                            ?              ? 11 of 26
groupvit_assign renormalise-over-groups            ?                            ?              ? 11 of 26
=============== ================================== ============================ ============== ==================

At distinct sizes the 4 correct files were ✓ 1, ? 2, ✗ 1 (PatchTST: two false errors); the 8 bugs ✗ 5, ? 2,
✓ 1 (Perceiver AR's mask without its prefix offset). The CLI: the same.

The fixes (each one general mechanism, tests in the engine's modules):

* ``rules/directions._off_positions`` (kind ``causal-mask-misaligned``): queries named ``K[a:b]`` by the slice
  that made them, keys the whole ``K``, so query i is key a + i; a causal mask whose values align it otherwise
  (cut from the first key, ``triu(1)``, with a > 0; or bottom-right with b short of the keys) is an error.
  Perceiver AR's ``causal-mask-without-offset`` ✓ -> ✗;
* ``axes.patch_steps``: a linear over the innermost piece ``T%P`` of a token axis alone, its patches ``T/P``
  beside it (``unfold(-1, P, P)``), is a patch embedding: its width is named as a projection of features
  (``D``), its patches become a whole token axis, ``projection-over-tokens`` skips it; the flattened readout
  allows a declared axis with no role beside the batch (PatchTST's ``nvars``). PatchTST's correct file ✗ -> ?.

Now (``round_outcome``, distinct): correct ✓ 1, ? 3, ✗ 0 (equal sizes: no ✗); bugs ✗ 6, ? 2, ✓ 0. The CLI: the same.
What stays ``?`` and why: PatchTST (the forecasting head's ``pred_len`` outputs have no name, and the previous
layer's scores added to the scores are not read as a mask; ``res-scores-transposed`` transposes a square
``[T/4, T/4]`` whose two axes carry one name: no name tells queries from keys there), VideoMAE (the classifier's
classes have no name), GroupViT (the group tokens ``G``, a parameter expanded over the batch, have no declared
role, so the assignment's scores, softmax and renormalisation stay unchecked: its two slips, the argmax and the
renormalisation over the wrong axis, are ``?``, never ``✓``). At equal sizes Perceiver AR's mask is not judged
(``T = 4`` keys and ``N = 3`` latents: ``?``).

Round 49 (tests/corpus/test_public_round49.py): videomae's correct file is ``✓`` at its DIMS (was ``?``):
its one
unchecked op was a module's ``linear`` whose new width is a declared name's size too (left unnamed), and a
projection by a module's own weight is now checked on the axes it reads and keeps, whatever its width's name
(engine/verdict ``_weight_rows``). At equal sizes it is ``✓`` too (was ``?``), and that row is traced there now.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public23 import groupvit_assign, patchtst, perceiver_ar, videomae

MODULES = (perceiver_ar, patchtst, videomae, groupvit_assign)
OK, UNSURE = ("✓", ()), ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (perceiver_ar, ""): [OK, UNSURE],
    (perceiver_ar, "causal-mask-without-offset"): [("✗", ("causal-mask-misaligned",)), UNSURE],
    (perceiver_ar, "merge-heads-without-permute"): [("✗", ("mixed-axis",))] * 2,
    (patchtst, ""): [UNSURE, UNSURE],
    (patchtst, "channels-merged-without-permute"): [("✗", ("mixed-axis",)), UNSURE],
    (patchtst, "res-scores-transposed"): [UNSURE, UNSURE],
    (videomae, ""): [("✓", ())] * 2,   # (both: ? -> ✓, round 49: a module weight's rows need no name)
    (videomae, "tubelets-flatten-without-transpose"): [("✗", ("mixed-axis",))] * 2,
    (videomae, "pool-over-channels"): [("✗", ("projection-over-tokens", "norm-over-tokens"))] * 2,
    (groupvit_assign, ""): [UNSURE, UNSURE],
    (groupvit_assign, "hard-argmax-over-tokens"): [UNSURE, UNSURE],
    (groupvit_assign, "renormalise-over-groups"): [UNSURE, UNSURE],
}

#: the rows also traced at equal sizes (the suite's time is a budget: the others' equal-size outcomes are the
#: table above, measured once): the correct file whose false ✗ the fixes removed
EQUAL_TESTED = {(patchtst, ""), (videomae, "")}


test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
