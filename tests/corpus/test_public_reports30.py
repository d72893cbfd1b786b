"""A thirtieth round of files after public bug reports (tests/corpus/reports30; each file's docstring cites
its report), traced at their DIMS and, for the rows in ``EQUAL_TESTED``, at equal sizes too (B = T = H = 4;
the other rows' equal-size outcomes were measured once and are kept in the table: the suite's time is a
budget). First sight recorded on 663112e (main at 5afe940 plus the round's files).

* kerasio_temporal_softmax — keras-team/keras-io pull request #1904: the masking guide's ``TemporalSoftmax``,
  "a softmax over the time dimension (axis 1)", sums its exponentials over ``axis=-1`` of ``Dense(1)``'s
  ``(B, T, 1)`` scores: every weight is 1;
* moviegen_mha_batch_first — kyegomez/movie-gen issue #8: ``nn.MultiheadAttention`` built with the default
  ``batch_first=False`` and called on batch-first tokens (attention across the batch);
* opacus_batch_first_merge — meta-pytorch/opacus pull request #825 (issue #774): ``DPMultiheadAttention``'s
  batch-first path viewed the ``(bsz * num_heads, tgt_len, head_dim)`` output straight as ``(bsz, tgt_len,
  embed_dim)``;
* open_lm_rotary_heads — mlfoundations/open_lm issue #4: the rotary embedding applied to ``(B, T, H, d_k)``
  tensors by a module that reads the sequence from dimension -2 (positions counted along the heads).

First sight (``round_outcome``, no dependency contracts: at DIMS / at equal sizes; the CLI, ``cd /tmp &&
shapetrace trace FILE [bug] --dims DIMS``, which also traces ``build`` and measures the dependency contracts,
in the last column).

========================  =======================  ==================================  =============================
file                      variant                  round_outcome 663112e               CLI on 663112e
========================  =======================  ==================================  =============================
kerasio_temporal_softmax  (correct)                ✓ / ?                               ✓ all 6
kerasio_temporal_softmax  sum-over-last-axis       **✓** / ?                           **✓ all 6**
moviegen_mha_batch_first  (correct)                ✓ / ?                               ✓ all 28
moviegen_mha_batch_first  sequence-first-default   ✗ attends-over-batch / ?            ✗ attends-over-batch
opacus_batch_first_merge  (correct)                ✓ / ?                               ? 23 of 28 (mask unnamed)
opacus_batch_first_merge  merge-without-transpose  ✗ mixed-axis /                      ✗ mixed-axis
                                                   ✗ broadcast-mismatch
open_lm_rotary_heads      (correct)                ✓ / ?                               ✓ all 24
open_lm_rotary_heads      rotary-over-heads        ✗ rotary-same-angle-every-token /   ✗ rotary-same-angle-every-token
                                                   ?
========================  =======================  ==================================  =============================

At first sight the 4 correct files were (round_outcome at DIMS) ✓ 4, ? 0, ✗ 0 (the CLI: ✓ 3, ? 1); the 4 bugs
✗ 3, ? 0, ✓ 1 (the CLI the same): keras-io's hand-written softmax over one entry got a check mark.

Fixed (2e47b1e, narrowed in bbf6912): a kept reduction along axes of one
entry (``e.sum(dim=-1, keepdim=True)`` on ``(B, T, 1)``) beside a named token axis, whose result is combined back
with the values through calls without a row (the division of a softmax written by hand), is now
``softmax-over-one-entry``, as ``F.softmax`` along one entry already was: the sum of one entry is that entry,
so every weight is 1 and the pooling is a plain sum. keras-io's bug is ``✗`` at DIMS and at B = T = 4 (the CLI
too); its correct twin (the sum over the tokens) stays ``✓``. A maximum along one entry is not judged
(bbf6912: a stabiliser shifts, it does not normalise; lucidrains' chunked attention takes one over a single key
chunk).

After the round (this module): correct ✓ 4, ? 0, ✗ 0 (the CLI: ✓ 3, ? 1); bugs ✗ 4, ? 0, ✓ 0.

Found at equal sizes: opacus' bug at B = T = H = 4 is ``✗ broadcast-mismatch`` at the residual ``x +
attn(x)``: the view names the merged output ``[B, H, T·d_k]`` (heads where the tokens should be) and the
residual pairs that H with the input's T; a right finding, one op after the line of the bug.

Open (left alone):

* opacus_batch_first_merge's correct file is ``?`` under the CLI only: the script's ``build`` makes the key
  padding mask from ``arange(T)`` and the lengths inside the trace, and the mask's ``[B, T]`` axes stay unnamed
  (names are not carried back from the ``masked_fill`` that lines the mask up with the scores:
  shapetrace/engine/infer/lined_up.py explains why that walk stops at tables cut from buffers), so the
  dependency contracts are not measured ("which of its axes is the batch cannot be told").
* kerasio_temporal_softmax's bug also makes 0/0 (NaN) weights at the padded steps (the guide's own code
  would); the finding names the sum, which is the cause of both.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports30 import (
    kerasio_temporal_softmax,
    moviegen_mha_batch_first,
    opacus_batch_first_merge,
    open_lm_rotary_heads,
)

MODULES = (kerasio_temporal_softmax, moviegen_mha_batch_first, opacus_batch_first_merge, open_lm_rotary_heads)
UNSURE, SURE = ("?", ()), ("✓", ())
ONE_ENTRY = ("✗", ("softmax-over-one-entry",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then equal sizes
EXPECTED = {
    (kerasio_temporal_softmax, ""): [SURE, UNSURE],
    (kerasio_temporal_softmax, "sum-over-last-axis"): [ONE_ENTRY, ONE_ENTRY],
    (moviegen_mha_batch_first, ""): [SURE, UNSURE],
    (moviegen_mha_batch_first, "sequence-first-default"): [("✗", ("attends-over-batch",)), UNSURE],
    (opacus_batch_first_merge, ""): [SURE, UNSURE],
    (opacus_batch_first_merge, "merge-without-transpose"): [("✗", ("mixed-axis",)), ("✗", ("broadcast-mismatch",))],
    (open_lm_rotary_heads, ""): [SURE, UNSURE],
    (open_lm_rotary_heads, "rotary-over-heads"): [("✗", ("rotary-same-angle-every-token",)), UNSURE],
}
#: the rows also traced at equal sizes (the others' equal-size outcomes measured once, above)
EQUAL_TESTED = {(kerasio_temporal_softmax, "sum-over-last-axis")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
