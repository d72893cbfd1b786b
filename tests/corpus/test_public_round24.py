"""A twenty-fourth round of public-style files (tests/corpus/public24: CLIP's ``AttentionPool2d``, the Non-local
block with subsampled keys, Music Transformer's relative global attention with its skew, lucidrains' axial
attention), traced at distinct sizes and at B = T = H = 4 (Hp = Wp = 4), first sight recorded before any fix.

First sight (``round_outcome``: no dependency contracts; distinct sizes | equal sizes) on 062deef + the files, and
the CLI (``shapetrace trace FILE [bug] --dims DIMS``, dependency contracts measured) at the first DIMS:

===================== ============================= ================================ ============== ==============
file                  variant                       distinct (DIMS)                  equal sizes    CLI
===================== ============================= ================================ ============== ==============
clip_attnpool         (correct)                     ! normalised-over-tokens (false) ?              ! (same)
clip_attnpool         flatten-without-permute       ✗ mixed-axis x2                  ✗ mixed-axis   ✗ (same)
clip_attnpool         batch-first-port              ✗ attends-over-batch,            ✗ attends-     ✗ (same)
                                                    normalised-over-tokens           over-batch
nonlocal_block        (correct)                     ? 3 of 16                        ?              ? 3 of 16
nonlocal_block        y-view-without-permute        ✗ mixed-axis                     ?              ✗ (same)
nonlocal_block        softmax-over-queries          ✗ softmax-wrong-axis             ✗ (same)       ✗ (same)
music_transformer_rga (correct)                     ? 21 of 30                       ?              ? 21 of 30
music_transformer_rga merge-heads-without-permute   ✗ mixed-axis                     ✗ broadcast-   ✗ (same)
                                                                                     mismatch
music_transformer_rga mask-not-causal               ✗ causal-mask-hides-itself       ✗ (same)       ✗ (same)
axial_attention       (correct)                     ! tokens-merged-with-features    ! (same)       ! (same)
                                                    (false)
axial_attention       heads-split-without-transpose ✗ mixed-axis x3                  ✗ attends-     ✗ (same)
                                                                                     over-heads, …
axial_attention       softmax-over-queries          ✗ softmax-wrong-axis,            ✗ (same)       ✗ (same)
                                                    tokens-merged-with-features
===================== ============================= ================================ ============== ==============

At distinct sizes the 4 correct files were ✓ 0, ? 2, ! 2 (two false warnings), ✗ 0; the 8 bugs ✗ 8, ? 0, ✓ 0.
The CLI: the same.

The fixes (each one general mechanism, tests in the engine's modules):

* ``rules/reductions._broadcast_back``: only an op that lines its operands up position by position (broadcasting
  arithmetic, an expand) spreads a statistic back onto the tokens it was taken from; a join
  (``cat([x.mean(dim=0, keepdim=True), x])``, the positions' mean prepended as CLIP's query token) puts it beside
  them. clip_attnpool correct: ! -> ✓ all 23;
* ``rules/row_folds._batched_attention``: a fold of tokens with heads (and the batch) that every product reading
  it keeps as a batch axis of each operand and its result, while the product pairs queries with keys along
  another token axis, is a batch, not a merge (``[B·Wp·H, Hp, d_k]``, ``einsum('bie,bje->bij')``).
  axial_attention correct: ! -> ✓ all 46 (equal sizes: ! -> ?).

Now (``round_outcome``, distinct): correct ✓ 2, ? 2, ✗ 0 (equal sizes: ? 4); bugs ✗ 8, ? 0, ✓ 0. The CLI: the
same. What stays ``?`` and why: the Non-local block (its 1x1 convolutions' ``inter_channels = C // 2`` is a width
no declared name covers, and a name from its size alone would be a guess: the convolutions, pools and products
that carry it stay unchecked; ``y-view-without-permute`` at Hp = Wp = 4 is ``?`` for the same reason); Music
Transformer (the relative table's rows ``E[max_seq - T:]`` are offsets, not tokens, and the skew's ``pad``,
``reshape(B, h, T + 1, T)`` and ``[:, :, 1:]`` turn offsets into keys: no name survives the skew, as round 16's
Longformer). At equal sizes every file is ``?`` (Hp = Wp and B = H leave the grid and the batch undecided).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public24 import axial_attention, clip_attnpool, music_transformer_rga, nonlocal_block

MODULES = (clip_attnpool, nonlocal_block, music_transformer_rga, axial_attention)
OK, UNSURE = ("✓", ()), ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (clip_attnpool, ""): [OK, UNSURE],
    # (one mixed-axis since a14e172's mend: the second was the positional embedding's cut, named with the view's mix)
    (clip_attnpool, "flatten-without-permute"): [("✗", ("mixed-axis",)), ("✗", ("mixed-axis",))],
    (clip_attnpool, "batch-first-port"): [("✗", ("attends-over-batch",))] * 2,
    (nonlocal_block, ""): [UNSURE, UNSURE],
    (nonlocal_block, "y-view-without-permute"): [("✗", ("mixed-axis",)), UNSURE],
    (nonlocal_block, "softmax-over-queries"): [("✗", ("softmax-wrong-axis",))] * 2,
    (music_transformer_rga, ""): [UNSURE, UNSURE],
    (music_transformer_rga, "merge-heads-without-permute"): [("✗", ("mixed-axis",)),
                                                             ("✗", ("broadcast-mismatch",))],
    (music_transformer_rga, "mask-not-causal"): [("✗", ("causal-mask-hides-itself",))] * 2,
    (axial_attention, ""): [OK, UNSURE],
    (axial_attention, "heads-split-without-transpose"): [
        ("✗", ("mixed-axis",)),
        ("✗", ("attends-over-heads", "reduction-over-wrong-axis", "tokens-merged-with-features",
               "broadcast-mismatch"))],
    (axial_attention, "softmax-over-queries"): [("✗", ("softmax-wrong-axis",))] * 2,
}

#: the rows also traced at equal sizes (the suite's time is a budget: the others' equal-size outcomes are the
#: table above, measured once): the correct files whose false warnings the fixes removed
EQUAL_TESTED = {(clip_attnpool, ""), (axial_attention, "")}


test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
