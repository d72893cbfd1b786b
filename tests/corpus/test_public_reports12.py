"""A twelfth round of files after public bug reports (tests/corpus/reports12; each file's docstring cites its
report), traced at their DIMS and at B = T = H = 4, first sight recorded on 2fe0908 before any fix.

* aft_simple_sum_batch — rish-16/aft-pytorch issue #1: the Attention Free Transformer's ``AFTSimple`` with
  ``softmax(K, 0)`` and ``.sum(0)``: the weights normalised and summed over the batch, not the timesteps;
* whitening_avg_pads — autoliuweijie/BERT-whitening-pytorch issue #13: ``first_last_avg`` pooling with
  ``.mean(dim=1)`` over the padded tokens of an encoder that masked them;
* billm_bidirectional_pads — WhereIsAI/BiLLM issue #6: a bidirectional Mistral layer whose all-open 4-d
  mask drops the padding (``attention_mask`` never read);
* llama_embeds_cache_position — huggingface/transformers PR #37403: at a cached step from ``inputs_embeds``,
  ``cache_position = arange(seq_len)`` without the past length (the new token rotated at position 0).

First sight (``round_outcome``: at DIMS / at equal sizes; the CLI, ``cd /tmp && shapetrace trace FILE [bug]
--dims "B=2 T=6 D=32 H=4"``, which measures the dependency contracts):

===========================  ==========================  ======================================  ==================
file                         variant                     first sight on 2fe0908 (DIMS/equal;     now (DIMS/equal;
                                                         CLI)                                    CLI)
===========================  ==========================  ======================================  ==================
aft_simple_sum_batch         (correct)                   ! normalised-over-tokens (false) / ?;   ✓ 7 ops / ?; CLI ✓
                                                         CLI ! the same
aft_simple_sum_batch         sum-over-batch              ✓ 7 ops / ?; CLI ✗ batch-entries-mix    ✗ softmax-wrong-axis
                                                         (measured)                              / ?; CLI ✗ (both)
whitening_avg_pads           (correct)                   ✓ 49 ops / ? 0 of 49; CLI ✓             unchanged
whitening_avg_pads           avg-over-pads               ! pooled-over-padding / ?; CLI !        unchanged
billm_bidirectional_pads     (correct)                   ✓ 40 ops / ? 13 of 40; CLI ? 23 of 40   unchanged
                                                         (no H_kv; ✓ with H_kv=2)
billm_bidirectional_pads     unmask-pads                 ? 37 of 37 / ?; CLI ? (notes            unchanged
                                                         input-unread, mask-unexercised)
llama_embeds_cache_position  (correct)                   ? 67 of 74 / ? 45 of 74; CLI ? 67 of    unchanged
                                                         74 (the decode step's mask rows)
llama_embeds_cache_position  cache-position-from-embeds  ✗ rotary-position-restarts / ?; CLI ✗   unchanged
===========================  ==========================  ======================================  ==================

At first sight, at DIMS (``round_outcome``), the 4 correct files were ✓ 2, ? 1, ! 1 (a false warning), ✗ 0 (the
CLI: ✓ 1, ? 2, ! 1); the 4 bugs ✗ 1, ! 1, ? 1, ✓ 1 (AFT's sum over the batch; the CLI: ✗ 2, ! 1, ? 1, ✓ 0).
Now: the correct files ✓ 3, ? 1 (the CLI ✓ 2, ? 2); the bugs ✗ 2, ! 1, ? 1, ✓ 0. The fixes:

* engine/infer/names: softmax weights that meet another tensor of their own shape in a call without a row
  (``torch.mul(softmax(K, 0), V)``) join the result, so the ``sum(0)`` after it is their weighted sum and
  rules/weights.softmax_weights says softmax-wrong-axis (along the batch entries);
* engine/rules/reductions.statistics_over_tokens: a sum along the tokens of softmax weights normalised along
  those same tokens (AFT's pooling) is attention pooling, not a norm's statistic read back on the tokens.

Open: BiLLM's bug is ``?``: the ``attention_mask`` it drops is never read (a note says so), and no check can
tell from an unread tensor which keys are padding; Llama's correct file is ``?`` (its decode step's mask rows,
``arange(S)[None] > cache_position[:, None]``, hide nothing and are left unnamed).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports12 import (
    aft_simple_sum_batch,
    billm_bidirectional_pads,
    llama_embeds_cache_position,
    whitening_avg_pads,
)

MODULES = (aft_simple_sum_batch, whitening_avg_pads, billm_bidirectional_pads, llama_embeds_cache_position)
OK, UNSURE = ("✓", ()), ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (aft_simple_sum_batch, ""): [OK, UNSURE],   # (! normalised-over-tokens at 2fe0908)
    (aft_simple_sum_batch, "sum-over-batch"): [("✗", ("softmax-wrong-axis",)), UNSURE],   # (✓ at 2fe0908)
    (whitening_avg_pads, ""): [OK, UNSURE],
    (whitening_avg_pads, "avg-over-pads"): [("!", ("pooled-over-padding",)), UNSURE],
    (billm_bidirectional_pads, ""): [OK, UNSURE],
    (billm_bidirectional_pads, "unmask-pads"): [UNSURE, UNSURE],
    (llama_embeds_cache_position, ""): [UNSURE, UNSURE],
    # round 15 (engine/axis_compute: a decode step's one query is a query axis): the step's causal mask, built
    # without the cache's offset, hides the step's own key, now read; at equal sizes every reading finds a bug
    (llama_embeds_cache_position, "cache-position-from-embeds"): [
        ("✗", ("rotary-position-restarts", "causal-mask-hides-itself")),
        ("✗", ("broadcast-mismatch", "broadcast-mismatch", "causal-mask-hides-itself"))],
}
#: the rows also traced at equal sizes (the others' equal-size outcomes measured once, above)
EQUAL_TESTED = {(aft_simple_sum_batch, "sum-over-batch")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
