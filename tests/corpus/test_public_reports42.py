"""A forty-second round of files after public bug reports about LLM / text-model attention
(tests/corpus/reports42; each file's docstring cites its report), traced at their DIMS and at equal sizes
(B = T = H = 4). First sight recorded on the working tree (main, plus the round's files).

* t5_cross_bias_from_weights — huggingface/transformers pull request #4499: ``T5Stack`` kept the first block's
  cross-attention "position bias" from ``layer_outputs[4]``, the cross-attention *weights*, where ``[5]`` holds the
  bias (the encoder's padding mask): from the second block on the padded encoder tokens are attended
  (``cross-weights-as-bias``); the same index slip on the self-attention's bias (``self-weights-as-bias``: the
  second block loses its causal mask and relative bias);
* bert_relative_key_cache — huggingface/transformers pull request #20203 (issue #19045): ``relative_key``
  positions with ``use_cache``: the one cached query given position ``arange(query_length) = [0]`` instead of
  ``key_length - 1`` (``query-at-zero``);
* whisper_decoder_pad_positions — huggingface/transformers issue #20624 (again pull request #48028): Whisper's
  decoder positions ``embed_positions.weight[0:T]`` for every row of a left-padded batch, not ``cumsum(mask) - 1``
  (``positions-without-mask``);
* qwen_cached_chunk_causal — QwenLM/Qwen issue #979: ``causal_mask = None`` whenever ``query.size(1) != key_size``,
  so a chunk of N new tokens against the cache is scored unmasked (``causal-mask-none``); the mask cut from the
  top-left rows ``[:, :, :query_size, :key_size]`` (``causal-mask-top-left``);
* mlx_minicpm3_pad_mask_list — ml-explore/mlx-lm issue #1906 (pull request #1913): MiniCPM3 (multi-head latent
  attention) hands the *list* of caches to ``create_attention_mask``, so a left-padded batch gets ``"causal"`` on
  the prompt pass and no mask on the decode step: the pads are attended (``mask-from-cache-list``).

First sight (``round_outcome`` at each DIMS / at its equal sizes; ``dependencies=True`` gives the same outcome
everywhere in this round; the CLI, ``cd /tmp && shapetrace trace FILE [bug] --dims DIMS``, in the last column).

=============================  ======================  ============================  ==============================
file                           variant                 round_outcome                 CLI at DIMS
=============================  ======================  ============================  ==============================
t5_cross_bias_from_weights     (correct)               ? / ?                         ? 89 of 91 (#44, #85 add)
t5_cross_bias_from_weights     cross-weights-as-bias   ? / ?                         ? 90 of 91, note #85
t5_cross_bias_from_weights     self-weights-as-bias    ? / ?                         ? 89 of 91, note #66
bert_relative_key_cache        (correct)               ? / ?                         ? 57 of 58 (#52 add)
bert_relative_key_cache        query-at-zero           ? / ?                         ? 57 of 58 (#52 add)
whisper_decoder_pad_positions  (correct)               ✓ / ?                         ✓ 56 ops
whisper_decoder_pad_positions  positions-without-mask  **✓** / ? (now ? / ?)          **✓** 54 ops
qwen_cached_chunk_causal       (correct)               ? / ?                         ? 63 of 63 ((N+T)[6:9] cut)
qwen_cached_chunk_causal       causal-mask-none        ? / ?                         ? 61 of 61 (the same cut)
qwen_cached_chunk_causal       causal-mask-top-left    ✗ mask-wrong-axis / ?         ✗ mask-wrong-axis (#57)
mlx_minicpm3_pad_mask_list     (correct)               ? / ?                         ? 64 of 93
mlx_minicpm3_pad_mask_list     mask-from-cache-list    ? / ?                         ? 59 of 87
=============================  ======================  ============================  ==============================

No correct file gets ``✗`` or ``!``; one bug gets ``✓`` at its DIMS (Whisper's, named in ``MISSED``), and two more
keep ``?`` only for a reason that is not their bug:

* ``whisper_decoder_pad_positions`` (bug): the positions are a slice of the table's weight,
  ``embed_positions.weight[0:T]`` ``[T, D]``, added to every row, while the model was given a mask with a row
  padded in front. The ``positions-shared-over-padding`` note (reports13's GPT-2) reads an ``embedding`` looked up
  by one shared row of ids; Whisper's ``weight[past : past + T]`` slice is no lookup, so nothing reads it. Fixed
  since: a table of the model's own cut into ``[T, D]`` rows shared by every entry gets that note
  (``rules/unread._rows_cut_for_every_entry``), so ``?``;
* ``qwen_cached_chunk_causal`` (``causal-mask-none``): N = 3 queries scored with no mask against the keys joined
  onto the cache, and no ``cached-chunk-unmasked`` warning (that rule wants a join fed by an earlier join: here one
  prefill and one chunk). Its ``?`` (as the correct file's) is the rotary table: Qwen sizes it
  ``kv_seq_len = hidden_states.size(1) + past`` (named ``N+T``) and cuts its last N rows, ``(N+T)[6:9]``, which
  "cuts N+T off the bounds of its parts". Written ``past + hidden`` (``T+N``), the correct file and this bug are
  both ``✓`` at DIMS (measured on a scratch copy): the bug is then missed;
* ``bert_relative_key_cache`` (bug): the ``?`` is the decode step's all-zero mask ``torch.zeros(B, 1, 1, T + 1)``
  (#52 add, unnamed). With no mask on the step (scratch copy) the correct file and the bug are both ``✓``: the
  query's relative position ``arange(1) = [0]`` against keys ``0..T`` is a value no name decides.

Other findings (for the engine, not fixed in this round):

* ``t5_cross_bias_from_weights`` (correct): T5's cross-attention bias ``torch.zeros((1, n_heads, qlen, klen)) +
  mask`` is left unnamed (#44/#85 add), though its sizes are ``H``, ``T`` and ``S`` read from named tensors; both bugs
  get the note ``direction-unchecked`` on the add of the borrowed weights (true: the values are not read). The CLI
  says "not measured: heads (a split's batch axis has no name)" while every ``view``'s batch axis is named ``B``: the
  op without a batch axis is the relative-bias lookup ``embedding`` ``[T, T, H]`` (#22), no head split;
* ``mlx_minicpm3_pad_mask_list``: the latent widths (``q_lora_rank``, ``q_head_dim = nope + rope``) are unnamed,
  so the query path stays ``?``; ``kv_a_proj_with_mqa``'s width (``kv_lora_rank + rope``) is called ``F``, and the
  one rotary key head repeated over the heads, ``k_pe.repeat(1, H, 1, 1)``, is named ``4`` (not ``H``); in the
  decode step (one token) the query's heads, the attention output and ``o_proj``'s ``D`` lose their names. The bug
  (the pads never masked although the model is given ``left_padding``) gets no note; the correct file gets
  ``lengths-unmeasured`` (true).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports42 import (
    bert_relative_key_cache,
    mlx_minicpm3_pad_mask_list,
    qwen_cached_chunk_causal,
    t5_cross_bias_from_weights,
    whisper_decoder_pad_positions,
)

MODULES = (t5_cross_bias_from_weights, bert_relative_key_cache, whisper_decoder_pad_positions,
           qwen_cached_chunk_causal, mlx_minicpm3_pad_mask_list)
UNSURE, SURE = ("?", ()), ("✓", ())
WRONG_AXIS = ("✗", ("mask-wrong-axis",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (t5_cross_bias_from_weights, ""): [UNSURE, UNSURE],
    (t5_cross_bias_from_weights, "cross-weights-as-bias"): [UNSURE, UNSURE],
    (t5_cross_bias_from_weights, "self-weights-as-bias"): [UNSURE, UNSURE],
    (bert_relative_key_cache, ""): [UNSURE, UNSURE],
    (bert_relative_key_cache, "query-at-zero"): [UNSURE, UNSURE],
    (whisper_decoder_pad_positions, ""): [SURE, UNSURE],
    (whisper_decoder_pad_positions, "positions-without-mask"): [UNSURE, UNSURE],   # (✓ ? at first sight)
    (qwen_cached_chunk_causal, ""): [UNSURE, UNSURE],
    (qwen_cached_chunk_causal, "causal-mask-none"): [UNSURE, UNSURE],
    (qwen_cached_chunk_causal, "causal-mask-top-left"): [WRONG_AXIS, UNSURE],
    (mlx_minicpm3_pad_mask_list, ""): [UNSURE, UNSURE],
    (mlx_minicpm3_pad_mask_list, "mask-from-cache-list"): [UNSURE, UNSURE],
}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED)
