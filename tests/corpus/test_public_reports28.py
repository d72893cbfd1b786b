"""A twenty-eighth round of files after public bug reports (tests/corpus/reports28; each file's docstring cites
its report), traced at their DIMS and, for the rows in ``EQUAL_TESTED``, at equal sizes too (B = T = H = 4, or
the module's own ``EQUAL`` reading; the other rows' equal-size outcomes were measured once and are kept in the
table: the suite's time is a budget). First sight recorded on f1b5d62 (main before the round; the files
committed in 571c044).

* bentrevett_trg_pad_query_rows — bentrevett/pytorch-seq2seq issue #96: ``make_trg_mask`` unsqueezes the target
  padding at 3 (the query rows) instead of 2 (the keys);
* everybody_compose_softmax_singleton — tsunrise/everybody-compose pull request #53: ``nn.Softmax(dim = 2)`` over
  the ``(batch, seq_len, 1)`` scores of a concat attention, a softmax of one entry (every weight 1);
* opentransformer_conformer_xl_shift — ZhengkunTian/OpenTransformer issue #25 (PR #28): Transformer-XL's relative
  shift over ``time`` positions in a bidirectional Conformer encoder (the upper triangle reads the next row);
* vigg_ribonanza_pad_rows — autosome-ru/vigg_ribonanza issue #1: the weights multiplied by the key mask after the
  softmax (``attention * mask.view(b, 1, 1, -1)``); the reporter's pair mask, still after the softmax, is the
  second bug; the correct twin hides the keys before the softmax and zeroes the padded query rows after it.

First sight (``round_outcome``, no dependency contracts: at DIMS / at equal sizes; the CLI, ``cd /tmp &&
shapetrace trace FILE [bug] --dims DIMS``, which also measures the dependency contracts, in the last column).
everybody_compose was first traced at B = 2 (its DIMS then), where the beat features' width 2 is the batch's
size and nothing names the input: that reading is now its equal-size column, and its DIMS are B = 3.

===================================  =======================  ===========================  ========================
file                                 variant                  round_outcome f1b5d62        CLI on f1b5d62
===================================  =======================  ===========================  ========================
bentrevett_trg_pad_query_rows        (correct)                ✓ / ?                        ✓ all 25
bentrevett_trg_pad_query_rows        pad-on-queries           ✗ mask-wrong-axis /          ✗ mask-wrong-axis
                                                              ✗ mask-wrong-axis
everybody_compose_softmax_singleton  (correct)                ? (B = 2) / ?                ? 2 of 30 (B = 2)
everybody_compose_softmax_singleton  softmax-singleton        ? (B = 2) / ?                ? 2 of 30 (B = 2)
opentransformer_conformer_xl_shift   (correct)                ? / ?                        ? 17 of 38
opentransformer_conformer_xl_shift   xl-shift-encoder         ? / ?                        ? 17 of 37
vigg_ribonanza_pad_rows              (correct)                ✓ / ?                        ✓ all 21
vigg_ribonanza_pad_rows              key-mask-only            **✓** / ?                    ! padding-read
vigg_ribonanza_pad_rows              pair-mask-after-softmax  ✗ mask-after-softmax / ?     ✗ mask-after-softmax
===================================  =======================  ===========================  ========================

At first sight the 4 correct files were (round_outcome at DIMS) ✓ 2, ? 2, ✗ 0 (CLI the same); the 5 bugs ✗ 2,
? 2, ✓ 1 (CLI: ✗ 2, ? 2 and one ``!``): a check mark on a bug (vigg's key mask).

Fixed (1d92804): a mask multiplied onto softmaxed weights got a row of its own only where it changed along both
the queries and the keys, and only a float one was kept; a key mask ``[B, 1, 1, S]`` broadcast over the queries,
boolean as vigg's is, went by unread. shapetrace/engine/directions.py ``weighs_scores`` now asks a change along
the keys alone and shapetrace/engine/columns.py ``kept_table`` keeps a boolean table as its 0/1 floats: vigg's
``key-mask-only`` is ``✗ mask-after-softmax`` at both sizes (and in the CLI); a per-query row mask ``[B, 1, T,
1]`` (its correct twin) still gets no row and stays ``✓``.

After the round (this module): correct ✓ 2, ? 2, ✗ 0; bugs ✗ 4 (everybody_compose's ``softmax-over-one-entry``
at B = 3, the rule that needs the tokens named beside the axis of one entry), ? 1, ✓ 0.

Open (known misses):

* opentransformer_conformer_xl_shift: ``?`` for both. The shift is the same skew trick in both variants; what
  makes the bug is the position table's length (``T`` distances ``T-1 .. 0`` rather than ``2T-1``) with no causal
  mask anywhere. No rule reads a relative shift's table length against the mask; the correct file's ``?`` is the
  sinusoid table and the padding mask made in the script (unnamed ops).
* everybody_compose at B = 2 (its equal-size column): the input ``[2, 6, 2]`` is not seeded (the features' width
  is the batch's size: equal sizes decide no name), so neither the LSTM's states nor the softmax's tokens are
  named and the one-entry rule cannot speak: ``?`` for both.
* vigg's pair mask at equal sizes is ``?``: at B = T = H = 4 the pair mask's axes are not named.

Fixed too (the commit after 1d92804): the report's literal fix written whole (the pair mask multiplied after a
softmax whose padded keys were already hidden before it) was ``✗ mask-after-softmax`` although its key half hides
nothing new (so would be a key mask laid again after a masked softmax, read since 1d92804). Zeros multiplied onto
the weights of a softmax whose scores a mask already hid now claim no error (shapetrace/engine/rules/masks.py
``_hidden_before``: which keys each hides is in their values, not compared): that file is ``✓`` at DIMS. The
correct twin zeroes the query rows only.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports28 import (
    bentrevett_trg_pad_query_rows,
    everybody_compose_softmax_singleton,
    opentransformer_conformer_xl_shift,
    vigg_ribonanza_pad_rows,
)

MODULES = (bentrevett_trg_pad_query_rows, everybody_compose_softmax_singleton, opentransformer_conformer_xl_shift,
           vigg_ribonanza_pad_rows)
UNSURE, SURE = ("?", ()), ("✓", ())
AFTER = ("✗", ("mask-after-softmax",))
WRONG_AXIS = ("✗", ("mask-wrong-axis",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then equal sizes
EXPECTED = {
    (bentrevett_trg_pad_query_rows, ""): [SURE, UNSURE],
    (bentrevett_trg_pad_query_rows, "pad-on-queries"): [WRONG_AXIS, WRONG_AXIS],
    (everybody_compose_softmax_singleton, ""): [UNSURE, UNSURE],
    (everybody_compose_softmax_singleton, "softmax-singleton"): [("✗", ("softmax-over-one-entry",)), UNSURE],
    (opentransformer_conformer_xl_shift, ""): [UNSURE, UNSURE],
    (opentransformer_conformer_xl_shift, "xl-shift-encoder"): [UNSURE, UNSURE],
    (vigg_ribonanza_pad_rows, ""): [SURE, UNSURE],
    (vigg_ribonanza_pad_rows, "key-mask-only"): [AFTER, AFTER],
    (vigg_ribonanza_pad_rows, "pair-mask-after-softmax"): [AFTER, UNSURE],
}
#: the rows also traced at equal sizes (the others' equal-size outcomes measured once, above)
EQUAL_TESTED = {(vigg_ribonanza_pad_rows, "key-mask-only"), (bentrevett_trg_pad_query_rows, "pad-on-queries")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
