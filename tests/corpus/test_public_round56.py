"""A fifty-sixth round of public-style files (tests/corpus/public56: decoder attention of projects and functions not
yet in the corpus: litgpt's Gemma-2 path, torchtext's T5, EleutherAI's gpt-neox, Cohere2, OLMo 2), traced at distinct
sizes and at equal sizes, first sight recorded on 8d5cfb97 (main plus the files):

* litgpt_gemma2_sliding — Lightning-AI/litgpt ``CausalSelfAttention`` (``qkv.split`` by query/key/value sizes,
  ``apply_rope`` on ``rope_n_elem``, ``repeat_interleave`` for the query groups, the sliding layer's additive mask
  ``triu(1) + tril(-sliding_window_size)``, the eager softcapping path); bugs ``window-without-causal`` (the sliding
  bias alone), ``window-one-wider`` (``tril(-w - 1)``: w + 1 keys);
* torchtext_t5_decoder_bias — pytorch/text ``T5MultiheadAttention`` in the decoder (``_compute_bias`` with
  ``bidirectional=False``, the causal ``triu`` or-ed with ``key_padding_mask``, ``position_bias += attn_mask``, no
  scaling); bugs ``bias-permute-keys-first`` (``permute([2, 1, 0])``), ``relative-position-reversed`` (``context -
  memory``: every visible key in bucket 0), ``padding-and-for-or`` (``logical_and``);
* gptneox_megatron_partial_rotary — EleutherAI/gpt-neox ``ParallelSelfAttention`` (sequence-first, ``[sq, b, np, 3 *
  hn]`` split, partial rotary ``rotary_ndims``, ``baddbmm`` on ``[b * np, sq, hn]``, query-key layer scaling);
  bugs ``key-rot-unrotated`` (the keys' unrotated slice concatenated), ``query-reshape-for-transpose``,
  ``layer-scaling-not-undone`` (the softmax without ``* coeff``);
* cohere2_sliding_nope — huggingface/transformers ``Cohere2Attention``/``Cohere2DecoderLayer`` (interleaved rotary
  with the ``repeat_interleave`` table, RoPE only on the sliding layers, the sliding mask ``torch.where(tril(...,
  -w), min, mask)`` over a left-padded 4-D causal mask); bugs ``rope-table-cat`` (Llama's ``cat`` table),
  ``sliding-diagonal-positive`` (``diagonal=+w``);
* olmo2_full_width_qknorm — huggingface/transformers ``Olmo2Attention`` (``Olmo2RMSNorm`` over ``H * d`` before
  the head split, GQA, a left-padded 4-D causal mask); bugs ``rmsnorm-mean-over-tokens`` (``mean(1)``),
  ``padding-mask-without-causal`` (the encoder helper's padding-only 4-D mask).

============================== =========================== ================================================
file                           variant                     first sight (DIMS | equal; with dependencies
                                                           where they differ)
============================== =========================== ================================================
litgpt_gemma2_sliding          (correct)                   ✓ | ?
litgpt_gemma2_sliding          window-without-causal       ✗ mask-keeps-future | ✗ mask-wrong-axis; now ✗
                                                           mask-keeps-future (both)
litgpt_gemma2_sliding          window-one-wider            ? | ?  (note window-width-unchecked)
torchtext_t5_decoder_bias      (correct)                   ? | ?
torchtext_t5_decoder_bias      bias-permute-keys-first     ? | ?
torchtext_t5_decoder_bias      relative-position-reversed  ? | ?
torchtext_t5_decoder_bias      padding-and-for-or          ? | ?  (with dependencies ✗ causal-mask-leaks | ?)
gptneox_megatron_partial_rot.  (correct)                   ? | ?  (CLI ✓)
gptneox_megatron_partial_rot.  key-rot-unrotated           ? | ?  (CLI ✓); now ! rotary-one-sided (both)
gptneox_megatron_partial_rot.  query-reshape-for-transpose ✗ mixed-axis ×4 | ✗ batch-mismatch
gptneox_megatron_partial_rot.  layer-scaling-not-undone    ? | ?  (CLI ✓)
cohere2_sliding_nope           (correct)                   ? | ?
cohere2_sliding_nope           rope-table-cat              ✗ rotary-pairing-mismatch (both)
cohere2_sliding_nope           sliding-diagonal-positive   ✗ mask-hides-every-key | ✗ mask-hides-every-key ×2
olmo2_full_width_qknorm        (correct)                   ✓ | ?
olmo2_full_width_qknorm        rmsnorm-mean-over-tokens    ! normalised-over-tokens | ?  (with dependencies ✗
                                                           causal-mask-leaks, padding-read, normalised-over-tokens)
olmo2_full_width_qknorm        padding-mask-without-causal ✓ | ?  (both; CLI ✓); now ? | ? (note
                                                           causal-declared-unmasked; with dependencies ✗
                                                           causal-mask-leaks | ?)
============================== =========================== ================================================

No correct file gets ``✗`` or ``!``. One bug keeps ``✓`` at DIMS, with dependencies too: OLMo 2's
``padding-mask-without-causal`` (a decoder whose mask is the padding alone; the module holds ``is_causal = True``:
on the same file with no row padded the CLI gives ``✗ causal-mask-leaks`` through that flag, and at equal sizes the
note ``causal-declared-unmasked`` fires, but with one row padded, on the left as here or on the right, the CLI says
``✓`` and its line lists no causal contract at all). Fixed since: the fill of OLMo's ``position_ids`` (``[B, T]``,
``masked_fill_(attention_mask == 0, 1)``) was read as a causal mask with padding, so the run "applied" one; a fill
of a tensor whose rows are batch entries is no causal mask now (``declared.masks_causally``), and the bug is the
note, ``✗ causal-mask-leaks`` with dependencies. Two bugs are ``?`` here only for a reason unrelated to them, and
``✓`` in the CLI: gpt-neox's ``key-rot-unrotated`` (RoPE on the queries only: no rule asks that both sides of the
scores be rotated by one table; fixed since: ``! rotary-one-sided``, rotary_sides.py) and
``layer-scaling-not-undone`` (the extra ``1 / layer_number`` in ``baddbmm``'s ``alpha``, a temperature slip); the
correct gpt-neox file is ``?`` for the same reason: its ltor mask ``[1, 1, T, T]`` enters as an input and
``masked_fill`` #28 is left unnamed, while the CLI traces the mask's ``tril`` and names it. The T5 file is ``?``
throughout: the ``num_heads`` axis made by ``expand(bsz, self.num_heads, -1, -1)`` and by the bias table
``nn.Embedding(num_buckets, num_heads)`` stays unnamed (#5 expand, #13 expand, #14 masked_fill, #20 embedding), and
the CLI's line on the correct file says "padding stays unread (key_padding_mask never reaches a mask on the scores
nor is multiplied into the values)", though it reaches them through ``logical_or`` and ``position_bias +=
attn_mask`` (right padding: the pads are also later keys, so the causal mask hides them already); fixed since: the
``logical_or`` with the boolean triangle, a call without a row of its own, is read as a mask made of masks
(``padding._indices_only`` reads its operands' dtypes from the calls that made them), and the contract is measured
and holds. Its ``relative-position-reversed`` (a bias flat over the visible keys: T5 left without positions) and
``bias-permute-keys-first`` (only "not proven: #22 permute moves two axes both named T past each other") get no
finding of their own. litgpt's ``window-without-causal`` at equal sizes said ``mask-wrong-axis``, "leaves query 1
... with no key at all", where the mask hides only key 0 from query 3; fixed since: a causal triangle read with rows
set aside must hide a later key of some query it keeps (``directions.rows_set_aside``). litgpt's
``window-one-wider`` is a note that reads the width 4 against ``config.sliding_window_size = 3`` and still leaves it
unchecked.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public56 import (
    cohere2_sliding_nope,
    gptneox_megatron_partial_rotary,
    litgpt_gemma2_sliding,
    olmo2_full_width_qknorm,
    torchtext_t5_decoder_bias,
)

MODULES = (litgpt_gemma2_sliding, torchtext_t5_decoder_bias, gptneox_megatron_partial_rotary, cohere2_sliding_nope,
           olmo2_full_width_qknorm)
UNSURE = ("?", ())
CHECKED = ("✓", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then equal sizes
EXPECTED = {
    (litgpt_gemma2_sliding, ""): [CHECKED, UNSURE],
    (litgpt_gemma2_sliding, "window-without-causal"): [("✗", ("mask-keeps-future",))] * 2,
    (litgpt_gemma2_sliding, "window-one-wider"): [UNSURE, UNSURE],
    (torchtext_t5_decoder_bias, ""): [UNSURE, UNSURE],
    (torchtext_t5_decoder_bias, "bias-permute-keys-first"): [UNSURE, UNSURE],
    (torchtext_t5_decoder_bias, "relative-position-reversed"): [UNSURE, UNSURE],
    (torchtext_t5_decoder_bias, "padding-and-for-or"): [UNSURE, UNSURE],
    (gptneox_megatron_partial_rotary, ""): [UNSURE, UNSURE],
    (gptneox_megatron_partial_rotary, "key-rot-unrotated"): [("!", ("rotary-one-sided",))] * 2,   # (? ? at 48917dd)
    (gptneox_megatron_partial_rotary, "query-reshape-for-transpose"): [("✗", ("mixed-axis",)),
                                                                       ("✗", ("batch-mismatch",))],
    (gptneox_megatron_partial_rotary, "layer-scaling-not-undone"): [UNSURE, UNSURE],
    (cohere2_sliding_nope, ""): [UNSURE, UNSURE],
    (cohere2_sliding_nope, "rope-table-cat"): [("✗", ("rotary-pairing-mismatch",))] * 2,
    (cohere2_sliding_nope, "sliding-diagonal-positive"): [("✗", ("mask-hides-every-key",)),
                                                          ("✗", ("mask-hides-every-key",) * 2)],
    (olmo2_full_width_qknorm, ""): [CHECKED, UNSURE],
    (olmo2_full_width_qknorm, "rmsnorm-mean-over-tokens"): [("!", ("normalised-over-tokens",)), UNSURE],
    (olmo2_full_width_qknorm, "padding-mask-without-causal"): [UNSURE, UNSURE],
}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED)


def test_a_decoder_with_a_padding_only_mask_breaks_its_causal_declaration_on_the_values():
    """OLMo 2's ``padding-mask-without-causal`` (``✓`` at first sight): the note without the values, and the
    causal contract the module's ``is_causal = True`` asks for broken on them; the correct file keeps both."""
    from tests.corpus.helpers import traced_build

    bug = traced_build(olmo2_full_width_qknorm, "padding-mask-without-causal", olmo2_full_width_qknorm.DIMS[0])
    assert [(d.severity, d.kind) for d in bug.diagnostics] == [("note", "causal-declared-unmasked")]
    measured = traced_build(olmo2_full_width_qknorm, "padding-mask-without-causal", olmo2_full_width_qknorm.DIMS[0],
                            dependencies=True)
    assert [d.kind for d in measured.diagnostics if d.severity == "error"] == ["causal-mask-leaks"]
    correct = traced_build(olmo2_full_width_qknorm, "", olmo2_full_width_qknorm.DIMS[0], dependencies=True)
    assert [d.kind for d in correct.diagnostics if d.severity != "note"] == []
