"""A fortieth round of files after public bug reports (tests/corpus/reports40; each file's docstring cites its
report), traced at their DIMS and at equal sizes (B = T = H = 4). First sight recorded on the working tree (main at
8d5cfb97, plus the round's files).

* hippogriff_window_negative — proger/hippogriff issue #7: Griffin's local MQA calls flash-attn with
  ``window_size=(-window, 0)``, which flash-attn reads as no left limit (global causal attention); also
  ``window-plus-one`` (``(window, 0)``: window + 1 keys, the off-by-one of huggingface/transformers issue #39408);
* lagllama_kv_cache — time-series-foundation-models/lag-llama issue #81 (pull request #84): with the cache in use
  the prefill ran ``is_causal=False`` (``prefill-not-causal``) and the decoding step's rotary tables were built for
  the step's length 1 (``rope-step-length``: query and every cached key rotated for position 0);
* te_microbatch_rotary — NVIDIA/TransformerEngine pull request #536 (NVIDIA/Megatron-LM pull request #412): the
  second micro-batch of a prompt is taken for a decoding step and its queries rotated with
  ``q_pos_emb[sequence_end - 1:sequence_end]`` (``last-position-query``); also ``cache-rows-from-zero`` (the keys
  read back from rows ``[:b]`` of the memory, not ``[batch_start:batch_end]``);
* torchbrain_bias_inverted — neuro-galaxy/torch_brain pull request #74: POYO's rotary cross-attention turns its
  keep-mask into the xformers bias with ``masked_fill(attn_mask, -inf)``, so the latents attend to the padding only
  (``bias-inverted``); twin ``sdpa-path``, the module's own SDPA kernel;
* perceiver_scale_divided — esceptico/perceiver-io issue #9: the scores divided by ``self.scale = head_dim ** -0.5``
  (``scale-divided``).

First sight (``round_outcome`` at each DIMS / at its equal sizes; ``dependencies=True`` gives the same outcome
everywhere in this round; the CLI, ``cd /tmp && shapetrace trace FILE [bug] --dims DIMS``, in the last column).

==========================  ====================  ===========================================  =====================
file                        variant               round_outcome                                CLI at DIMS
==========================  ====================  ===========================================  =====================
hippogriff_window_negative  (correct)             ✓ / ?                                        ✓ 29 ops
hippogriff_window_negative  negative-window       **✓** / ?                                    **✓** 29 ops
hippogriff_window_negative  window-plus-one       ? / ? (note window-width-unchecked)          ? 29 of 29
lagllama_kv_cache           (correct)             **✗ rotary-same-angle-every-token** / ?      **✗** (#108)
lagllama_kv_cache           prefill-not-causal    ✗ rotary-same-angle-every-token / ?          ✗ (#108)
lagllama_kv_cache           rope-step-length      ✗ rotary-same-angle-every-token / ?          ✗ (#108)
te_microbatch_rotary        (correct)             ✓ / ?                                        ✓ 68 ops
te_microbatch_rotary        last-position-query   ✗ rotary-same-angle-every-token / ?          ✗ (#46)
te_microbatch_rotary        cache-rows-from-zero  **✓** / ?                                    **✓** 68 ops
torchbrain_bias_inverted    (correct)             ✓ / ?                                        ? 40 of 48
torchbrain_bias_inverted    bias-inverted         **✓** / ?                                    ? 40 of 48
torchbrain_bias_inverted    sdpa-path (twin)      ✓ / ?                                        ? 37 of 41
perceiver_scale_divided     (correct)             ? / ?                                        ? 8 of 42
perceiver_scale_divided     scale-divided         ? / ?                                        ? 8 of 42
==========================  ====================  ===========================================  =====================

Three bugs get ``✓`` at their DIMS, named in ``MISSED`` (below); the correct lag-llama file got ``✗`` at first
sight (a false error, fixed since: it is ``?`` now, and so is ``prefill-not-causal``).

* ``lagllama_kv_cache`` (correct, false ``✗``): lag-llama's decoding branch computes
  ``q, _ = apply_rotary_pos_emb(q, k, cos, sin, position_ids=[-1])``: the keys rotated there by the query's one
  angle are thrown away (``_``), and the next line rotates the keys with the table of every position. The error
  (``cat #108 turns [B=2, H=4, (T+1)[1:6]=5, d_k=8] by the same angles at every token``) is on that discarded
  value, and its hint ("Count the positions along the tokens ... not from the batch axis") does not apply. Fixed
  since: a finding on an op whose results reach nothing the first outermost call returned is dropped
  (``unread.dropped_records``, ``rules/diagnose._on_what_reaches_the_output``; tests/engine/test_dropped_results.py).
  The same error was the only finding on ``prefill-not-causal`` (so that bug's ``✗`` is not about it: the non-causal
  prefill itself is not found); on ``rope-step-length`` the error is on the real slip (the cached keys turned by
  the length-1 table).
* ``te_microbatch_rotary`` ``last-position-query`` is caught with the right op and axis (``cat #46 turns [T=5,
  B[3:6]=3, H=4, d_k=8] by the same angles at every token along T``), and the CLI's value check adds "one sequence
  run at batch places 0 and 1 gives two outputs".

Open (for the engine, not fixed in this round):

* ``hippogriff_window_negative`` (``negative-window``, ``✓``): the model holds ``smqa.window_size = 3`` and the
  mask applies no window at all (plain causal); the note that catches a window of the wrong width
  (``window-plus-one``: "a causal sliding window of 4 keys per query ... no window the model holds is 4") says
  nothing when a held window is applied nowhere; fixed since: a window the model holds that no op applies, while a
  causal mask lets a query see more keys than it, is that note too (``rules/declared.window_applied_nowhere``:
  "the model holds a window (smqa.window_size = 3), but no op of the run applies one"), so ``?``;
* ``te_microbatch_rotary`` (``cache-rows-from-zero``, ``✓``): the second micro-batch reads the memory's rows
  ``[0:3]``, written by the first micro-batch, as its own keys and values; the rows a read takes from a buffer
  written in parts by batch offset are not compared with the rows the same call wrote;
* ``torchbrain_bias_inverted`` (``bias-inverted``, ``✓``): the bias ``masked_fill(keep_mask, -inf)`` is the
  inverse of the mask ``scaled_dot_product_attention`` receives in the twin; with padding in every row nothing is
  all ``-inf``, and which polarity a boolean input means is a value no name decides;
* ``perceiver_scale_divided``: 9 of 39 ops checked (the latents are a parameter ``(N, D)`` repeated over the
  batch: ``repeat #1`` is ``[B, _, _]``, so the queries, the ``(B, H, N, T)`` scores and the self-attention stay
  unnamed although ``N=3`` is declared); both variants read ``?``.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports40 import (
    hippogriff_window_negative,
    lagllama_kv_cache,
    perceiver_scale_divided,
    te_microbatch_rotary,
    torchbrain_bias_inverted,
)

MODULES = (hippogriff_window_negative, lagllama_kv_cache, te_microbatch_rotary, torchbrain_bias_inverted,
           perceiver_scale_divided)
UNSURE, SURE = ("?", ()), ("✓", ())
SAME_ANGLE = ("✗", ("rotary-same-angle-every-token",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (hippogriff_window_negative, ""): [SURE, UNSURE],
    (hippogriff_window_negative, "negative-window"): [UNSURE, UNSURE],   # (✓ | ? at 48917dd)
    (hippogriff_window_negative, "window-plus-one"): [UNSURE, UNSURE],
    (lagllama_kv_cache, ""): [UNSURE, UNSURE],   # (✗ rotary-same-angle-every-token at 48917dd: see the docstring)
    (lagllama_kv_cache, "prefill-not-causal"): [UNSURE, UNSURE],
    (lagllama_kv_cache, "rope-step-length"): [SAME_ANGLE, UNSURE],
    (te_microbatch_rotary, ""): [SURE, UNSURE],
    (te_microbatch_rotary, "last-position-query"): [SAME_ANGLE, UNSURE],
    (te_microbatch_rotary, "cache-rows-from-zero"): [SURE, UNSURE],
    (torchbrain_bias_inverted, ""): [SURE, UNSURE],
    (torchbrain_bias_inverted, "bias-inverted"): [SURE, UNSURE],
    (torchbrain_bias_inverted, "sdpa-path"): [SURE, UNSURE],
    (perceiver_scale_divided, ""): [UNSURE, UNSURE],
    (perceiver_scale_divided, "scale-divided"): [UNSURE, UNSURE],
}

#: bugs that keep ``✓`` (see the docstring): cache rows read from another micro-batch, a keep-mask used as the mask
#: of what to drop
MISSED = {(te_microbatch_rotary, "cache-rows-from-zero"), (torchbrain_bias_inverted, "bias-inverted")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, missed=frozenset(MISSED))
