"""A twenty-ninth round of files after public bug reports (tests/corpus/reports29; each file's docstring cites
its report), traced at their DIMS and, for the rows in ``EQUAL_TESTED``, at equal sizes too (B = T = H = 4, or
the module's own ``EQUAL`` reading; the other rows' equal-size outcomes were measured once and are kept in the
table: the suite's time is a budget). First sight recorded on 6e894e7 (main at 99e5d98 plus the round's files).

* clip_heads_scale — tenstorrent/tt-metal pull request #56789: the CLIP tutorial's attention scaled by
  ``1/sqrt(num_heads)`` instead of ``1/sqrt(head_dim)``;
* nlp_study_softmax_batch — ssw-nlp-study-group/nlp_study pull request #2: a sequence-first GRU seq2seq's
  attention weights softmaxed over axis 1 (the batch) instead of axis 0 (the letters);
* t5gemma_cross_window — huggingface/transformers pull request #41890 (issue #41875): T5Gemma's cross-attention
  cache built with the decoder's sliding-window layer type keeps only the last ``window`` encoder keys;
* torchtext_cross_query_roles — rexrex9/nlp_torchtext pull request #2: the decoder's encoder-decoder attention
  called with the encoder output as the queries (and the residual) and the decoder's states as keys and values.

First sight (``round_outcome``, no dependency contracts: at DIMS / at equal sizes; the CLI, ``cd /tmp &&
shapetrace trace FILE [bug] --dims DIMS``, which also measures the dependency contracts, in the last column).

===========================  ===================  ============================  ==============================
file                         variant              round_outcome 6e894e7         CLI on 6e894e7
===========================  ===================  ============================  ==============================
clip_heads_scale             (correct)            ✓ / ?                         ✓ all 20
clip_heads_scale             scale-by-heads       ! scale-not-head-dim /        ! scale-not-head-dim
                                                  ! scale-not-head-dim
nlp_study_softmax_batch      (correct)            ? / ?                         ? 12 of 13 (#2 embedding)
nlp_study_softmax_batch      softmax-over-batch   ✗ softmax-wrong-axis / ?      ✗ softmax-wrong-axis
t5gemma_cross_window         (correct)            ? / ?                         ? 21 of 57 (✓ with H_kv=2)
t5gemma_cross_window         cross-cache-sliding  ? / ?                         ? 22 of 60 (**✓** with H_kv=2)
torchtext_cross_query_roles  (correct)            ? / ?                         **✗ causal-mask-leaks**
torchtext_cross_query_roles  enc-as-query         ? / ?                         ? 45 of 45
===========================  ===================  ============================  ==============================

At first sight the 4 correct files were (round_outcome at DIMS) ✓ 1, ? 3, ✗ 0 (the CLI: ✓ 1, ? 2, ✗ 1: a false
error); the 4 bugs ✗ 1, ? 2, ! 1, ✓ 0 (the CLI the same; with ``H_kv=2`` declared, T5Gemma's bug is ✓).

Fixed (09201e1): the CLI's ``✗ causal-mask-leaks`` on torchtext's correct decoder. S = T, so every name came
from sizes alone; the dependency probe took the first float argument (the encoder output) as the input, moved
its last *source* token and read the decoder's outputs as that sequence: the full cross-attention reads every
source token, and the target's causal mask made that a "leak". Where names come from sizes alone, another
argument of integer token ids as long as the input (the target ids; not a 0/1 mask, not positions, never floats:
narrowed in ec7ae64) now stops the token contracts, with the reason in the verdict
(shapetrace/engine/probe_inputs.py ``companions``): ``?``.

Fixed (ead12dc): nlp_study's correct file was ``? 12 of 13 (#2 embedding)``: the decoder's one
token per entry fed sequence-first, ``(1, B)``, fitted no seed, so the embedding's batch had no name. Its ids are
now seeded ``[1, B]`` (shapetrace/engine/infer/seeds.py, beside the ``[1, B, D]`` step): ``✓ all 13``; the bug
stays ``✗ softmax-wrong-axis``, and at B = T = 4 both stay ``?``.

After the round (this module): correct ✓ 2, ? 2, ✗ 0 (the CLI too); bugs ✗ 1, ? 2, ! 1, ✓ 0.

Open (known misses):

* t5gemma_cross_window ``cross-cache-sliding`` with ``H_kv=2`` declared is ``✓`` (the CLI): the cross keys,
  values and mask are cut to ``S[4:8]`` (the last 4 encoder tokens), and a cut of the keys keeps each axis's
  meaning; no rule asks whether a cross-attention reads all of the memory it was given (a rotating cache cuts
  a self-attention's keys by design). Without ``H_kv`` the grouped key heads are unnamed and both are ``?``.
* torchtext_cross_query_roles ``enc-as-query``: ``?`` (S = T, the only sizes at which the swapped call runs:
  which tokens are the source's cannot be told from sizes); the correct file is ``?`` for the same reason, and
  its source ids go unread by the tracer (the tutorial's ``seq_k.data.eq(0)``: ``.data`` is not traced).
* clip_heads_scale ``scale-by-heads`` is a warning (``!``), not an error: a scale that is not 1/sqrt(d_k) is
  a choice some models make (the rule's own wording).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports29 import (
    clip_heads_scale,
    nlp_study_softmax_batch,
    t5gemma_cross_window,
    torchtext_cross_query_roles,
)

MODULES = (clip_heads_scale, nlp_study_softmax_batch, t5gemma_cross_window, torchtext_cross_query_roles)
UNSURE, SURE = ("?", ()), ("✓", ())
SCALE = ("!", ("scale-not-head-dim",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then equal sizes
EXPECTED = {
    (clip_heads_scale, ""): [SURE, UNSURE],
    (clip_heads_scale, "scale-by-heads"): [SCALE, SCALE],
    (nlp_study_softmax_batch, ""): [SURE, UNSURE],
    (nlp_study_softmax_batch, "softmax-over-batch"): [("✗", ("softmax-wrong-axis",)), UNSURE],
    (t5gemma_cross_window, ""): [UNSURE, UNSURE],
    (t5gemma_cross_window, "cross-cache-sliding"): [UNSURE, UNSURE],
    (torchtext_cross_query_roles, ""): [UNSURE, UNSURE],
    (torchtext_cross_query_roles, "enc-as-query"): [UNSURE, UNSURE],
}
#: the rows also traced at equal sizes (the others' equal-size outcomes measured once, above)
EQUAL_TESTED = {(clip_heads_scale, "scale-by-heads"), (nlp_study_softmax_batch, "softmax-over-batch")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
