"""A forty-seventh round of files after public bug reports about tensor layout in attention: an einsum label that
sums the query's head copies, an output einsum that reads a weight's diagonal, a multi-query output laid out
token-major under a channels-first reshape, a rotary table cut by the batch size, positions counted on a mask cut
before its running sum (tests/corpus/reports47; each file's docstring cites its report), traced at their DIMS and at
equal sizes (B = T = H = 4, or the file's ``EQUAL``). First sight recorded on the working tree (main, plus the
round's files).

* lens_gqa_split_qkv_query — TransformerLensOrg/TransformerLens pull request #520 (issue #519):
  ``GroupedQueryAttention`` with ``use_split_qkv_input``, the query's einsum ``"batch pos kv_head_index d_model,
  head_index d_model d_head -> ..."`` sums the n_heads copies of the input (``q-labelled-kv-heads``: every query
  H times too large); k and v expanded with ``repeat`` instead of ``repeat_interleave`` (``kv-heads-tiled``);
* timm_mqa_v2_out_layout — huggingface/pytorch-image-models pull request #2388: ``MultiQueryAttentionV2``'s
  ``einsum('bnhv,dhv->bnd')`` then ``reshape(s)`` to ``[b, c, h, w]`` (``out-token-major``); the scores left
  unscaled (``no-scale``);
* tokenformer_rotary_batch_cut — kroggen/tokenformer-minimal issue #1: GPT-NeoX's ``cos[offset : q.shape[0] +
  offset]`` on batch-first pieces (``cut-by-batch``: the table cut to B rows, lined up with the batch); the rotary
  applied after ``transpose(1, 2)`` (``rotary-after-transpose``: cut to H rows, lined up with the heads). Both
  rotate every token of a row by one shared angle, so both give the outputs of no rotary at all (tested below);
* acooney_wo_einsum_diagonal — alan-cooney/transformer-from-scratch pull request #52: ``einsum("batch pos
  d_model, d_model d_model -> batch pos d_model")`` reads ``weight_out``'s diagonal (``wo-diagonal``: the heads are
  never mixed); the heads concatenated ``(d_head head)`` (``concat-d-head-major``);
* mosaic_pad_cache_cumsum — mosaicml/examples pull request #257: ``cumsum((attention_mask == 0)[:, past_position:],
  dim=1)``, the mask cut before the running count of pads (``cumsum-after-cut``: the decoded token of a
  left-padded row two positions ahead of its prompt); the count cut to the first S columns
  (``cumsum-first-columns``).

First sight (``round_outcome`` at each DIMS / at its equal sizes; ``dependencies=True`` gives the same outcome
everywhere; the CLI, ``cd /tmp && shapetrace trace FILE [bug] --dims DIMS``, agrees at DIMS except where noted).

============================  ======================  ================================================================
file                          variant                 round_outcome (DIMS / EQUAL)
============================  ======================  ================================================================
lens_gqa_split_qkv_query      (correct)               ? / ?   (10 of 21: H_kv, d_k and the output's D unnamed)
lens_gqa_split_qkv_query      q-labelled-kv-heads     ? / ?   (7 of 21; nothing on the einsum that sums H)
lens_gqa_split_qkv_query      kv-heads-tiled          ? / ?   (10 of 21, the same as the correct file)
timm_mqa_v2_out_layout        (correct)               ? / ?   (4 of 12: the heads and widths of the parameters)
timm_mqa_v2_out_layout        out-token-major         ✗ mixed-axis / ?   (a misleading message)
timm_mqa_v2_out_layout        no-scale                ? / ?   (4 of 12, the same as the correct file)
tokenformer_rotary_batch_cut  (correct)               ✓ / ?
tokenformer_rotary_batch_cut  cut-by-batch            ✗ broadcast-mismatch, rotary-same-angle-every-token / ✗ broadcast-
                                                      mismatch
tokenformer_rotary_batch_cut  rotary-after-transpose  ✗ broadcast-mismatch, rotary-same-angle-every-token / ✗ broadcast-
                                                      mismatch
acooney_wo_einsum_diagonal    (correct)               ? / ?   (6 of 13: d_head never named, the value's heads unnamed)
acooney_wo_einsum_diagonal    wo-diagonal             ? / ?   (6 of 13, the same; nothing on the diagonal)
acooney_wo_einsum_diagonal    concat-d-head-major     ? / ?   (6 of 13, the same; the merge d_k·H unjudged)
mosaic_pad_cache_cumsum       (correct)               ? / ?   (56 of 61; CLI at DIMS: **✗ causal-mask-leaks**, false)
mosaic_pad_cache_cumsum       cumsum-after-cut        ? / ?   (the same; CLI: the same false ✗)
mosaic_pad_cache_cumsum       cumsum-first-columns    ? / ?   (the same; CLI: the same false ✗)
============================  ======================  ================================================================

No bug gets ``✓`` (``MISSED`` is empty), but seven keep ``?`` only for reasons that are not their bug, with no
diagnostic at all:

* ``lens_gqa_split_qkv_query`` (``q-labelled-kv-heads``): einsum #10 contracts the query input's named H axis
  (``[B, T, H, D]``, the n_heads copies) against ``W_Q [head_index, d_model, d_head]``; its output's heads lose
  their name (``[B, T, None, None]``) and nothing says an einsum summed over the heads. ``kv-heads-tiled``: H_kv=2
  is given but never named (the ``einops.repeat`` to H_kv copies, #5/#8, and the key and value einsums #11/#12 stay
  ``[B, T, None, ...]``), so ``repeat`` against ``repeat_interleave`` (#13/#14) cannot be told apart;
* ``timm_mqa_v2_out_layout`` (``no-scale``): the heads come from ``query_proj [num_heads, key_dim, dim]`` alone,
  every einsum's head and width axes stay unnamed (#4 ``[B, N, None, None]``), the unscaled scores go unread;
* ``acooney_wo_einsum_diagonal`` (both): ``einsum("batch pos d_model, d_model d_model -> ...")`` (#12) reads the
  square weight's diagonal, so output feature i is ``attn_concat[..., i] * W[i, i]``: no note. ``d_head`` is never
  named on the einsum outputs, so ``rearrange(..., "batch pos (d_head head)")`` (#10/#11, ``[B, T, None, H]`` to
  ``[B, T, None]``) is not judged as a merge in the wrong order;
* ``mosaic_pad_cache_cumsum`` (both): the decoding step's positions (#31 cumsum ``[2, 7]``, #32, #34 embedding) are
  unnamed, as is the mask's ``view((b, 1, 1, s_k))`` (#47); the prefill's are ``[B, T]``.

False or misleading messages (for the engine, not fixed in this round):

* ``mosaic_pad_cache_cumsum`` in the CLI (``round_outcome(..., dependencies=True, built_inside=True)``): the correct
  file gets ``✗ causal-mask-leaks``, "output token 0 of batch 0 depends on input token 5, a later token, though the
  code declares a causal mask (tril #20)". Tokens 0 and 1 of batch 0 are the left padding: their query rows have
  every key masked (the pads by the key padding mask, the rest by the causal mask), MosaicGPT fills them with
  ``finfo.min`` and the softmax spreads them evenly over all keys, by design (their outputs are never read; tested
  below). Without the padding the correct file is ``✓`` in the CLI. Through the API (inputs built outside the
  trace) the contracts are not measured: "full_mask [2, 7] has an unnamed axis as long as the batch: which of its
  axes is the batch cannot be told" (only its axis 0 is 2 long);
* ``timm_mqa_v2_out_layout`` (``out-token-major``): caught, but "reshape #11 turns [B=2, N=6, 32] into [B=2,
  !Hp·Wp=32, 2, 3]: axis 1 (size 32) holds pieces of Hp and Wp, so its entries mix the patch grid's rows and
  columns" names the size-32 channel axis ``Hp·Wp`` and leaves the channels out (each output channel holds pieces
  of tokens and features), and the CLI's advice, "Split the features where they are: view(B, T, H, d_k), then
  transpose(1, 2) to move the heads ahead of the tokens", is not the fix: the channels must come first
  (``einsum('bnhv,dhv->bdn')`` or ``transpose(1, 2)``) before ``reshape(b, -1, h, w)``; at equal sizes (4 tokens)
  nothing is reported.

Since first sight (tests/engine/test_round63_fixes.py): the rows with no key left of a prefill joined with a
decoding step's in the output (``T+1`` tokens) are matched to the output's first ``T`` (unattended.unattended_rows):
mosaic_pad_cache_cumsum's correct file is no longer a false ``✗ causal-mask-leaks`` in the CLI (``✓``, "the causal
mask holds").
"""

from __future__ import annotations

import einops
import torch

from tests.corpus.helpers import round_tests
from tests.corpus.reports47 import (
    acooney_wo_einsum_diagonal,
    lens_gqa_split_qkv_query,
    mosaic_pad_cache_cumsum,
    timm_mqa_v2_out_layout,
    tokenformer_rotary_batch_cut,
)

MODULES = (lens_gqa_split_qkv_query, timm_mqa_v2_out_layout, tokenformer_rotary_batch_cut, acooney_wo_einsum_diagonal,
           mosaic_pad_cache_cumsum)
UNSURE, SURE = ("?", ()), ("✓", ())
ROTARY = ("✗", ("broadcast-mismatch", "rotary-same-angle-every-token"))
BROADCAST = ("✗", ("broadcast-mismatch",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (lens_gqa_split_qkv_query, ""): [UNSURE, UNSURE],
    (lens_gqa_split_qkv_query, "q-labelled-kv-heads"): [UNSURE, UNSURE],
    (lens_gqa_split_qkv_query, "kv-heads-tiled"): [UNSURE, UNSURE],
    (timm_mqa_v2_out_layout, ""): [UNSURE, UNSURE],
    (timm_mqa_v2_out_layout, "out-token-major"): [("✗", ("mixed-axis",)), UNSURE],
    (timm_mqa_v2_out_layout, "no-scale"): [UNSURE, UNSURE],
    (tokenformer_rotary_batch_cut, ""): [SURE, UNSURE],
    (tokenformer_rotary_batch_cut, "cut-by-batch"): [ROTARY, BROADCAST],
    (tokenformer_rotary_batch_cut, "rotary-after-transpose"): [ROTARY, BROADCAST],
    (acooney_wo_einsum_diagonal, ""): [UNSURE, UNSURE],
    (acooney_wo_einsum_diagonal, "wo-diagonal"): [UNSURE, UNSURE],
    (acooney_wo_einsum_diagonal, "concat-d-head-major"): [UNSURE, UNSURE],
    (mosaic_pad_cache_cumsum, ""): [UNSURE, UNSURE],
    (mosaic_pad_cache_cumsum, "cumsum-after-cut"): [UNSURE, UNSURE],
    (mosaic_pad_cache_cumsum, "cumsum-first-columns"): [UNSURE, UNSURE],
}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED)


def test_the_lens_query_string_sums_the_head_copies_and_tiling_pairs_heads_modulo():
    """``q-labelled-kv-heads``: the query's einsum sums the H copies (H times the query, biases zero);
    ``kv-heads-tiled``: query head h reads kv head h % H_kv instead of h // (H / H_kv)."""
    model, (x,) = lens_gqa_split_qkv_query.build("")
    bugged, _ = lens_gqa_split_qkv_query.build("q-labelled-kv-heads")
    q_in = x[:, :, None].expand(3, 6, 4, 32)
    kv_in = x[:, :, None].expand(3, 6, 2, 32)
    with torch.no_grad():
        q, _, _ = model.attn.calculate_qkv_matrices(q_in, kv_in, kv_in)
        q_bug, _, _ = bugged.attn.calculate_qkv_matrices(q_in, kv_in, kv_in)
    assert torch.allclose(q_bug, 4 * q, atol=1e-4)
    kv = torch.arange(2.0).view(1, 1, 2, 1)
    tiled, _ = lens_gqa_split_qkv_query.build("kv-heads-tiled")
    assert model.attn.expand_kv(kv).flatten().tolist() == [0, 0, 1, 1]
    assert tiled.attn.expand_kv(kv).flatten().tolist() == [0, 1, 0, 1]


def test_the_rotary_bugs_give_the_outputs_of_no_rotary_at_all():
    """Both cuts turn every token of a row (an entry, or a head) by one angle, which q·k cancels: the outputs are
    those of the correct block with its tables set to no rotation."""
    model, inputs = tokenformer_rotary_batch_cut.build("")
    with torch.no_grad():
        model.rotary_emb.cos_cached.fill_(1.0)
        model.rotary_emb.sin_cached.zero_()
        unrotated = model(*inputs)
        for bug in tokenformer_rotary_batch_cut.BUGS:
            bugged, _ = tokenformer_rotary_batch_cut.build(bug)
            assert torch.allclose(bugged(*inputs), unrotated, atol=1e-5), bug
        correct, _ = tokenformer_rotary_batch_cut.build("")
        assert not torch.allclose(correct(*inputs), unrotated, atol=1e-5)


def test_the_diagonal_einsum_keeps_each_feature_to_itself():
    """``d_model d_model`` on one operand reads the diagonal: feature i times ``W[i, i]``, no sum."""
    model, _ = acooney_wo_einsum_diagonal.build("wo-diagonal")
    w = model.attention.weight_out.detach()
    concat = torch.randn(2, 6, 32)
    out = einops.einsum(concat, w, "batch pos d_model, d_model d_model -> batch pos d_model")
    assert torch.allclose(out, concat * w.diagonal(), atol=1e-6)


def test_mosaic_pad_rows_read_every_token_and_the_bugs_move_only_the_padded_rows_decoded_token():
    """The false ``causal-mask-leaks``: batch 0's pad rows (tokens 0 and 1) have every key masked and spread evenly
    over all six, by design; its first real token reads only itself. Each bug changes only the decoded token of
    the padded entry."""
    model, (prompt, prompt_mask, next_token, full_mask) = mosaic_pad_cache_cumsum.build("")
    embedded = []
    hook = model.wte.register_forward_hook(lambda module, args, out: (out.retain_grad(), embedded.append(out))[-1])
    reads = []
    with torch.enable_grad():
        out = model(prompt, prompt_mask, next_token, full_mask)
        for token in (0, 1, 2):
            embedded[0].grad = None
            out[0, token].sum().backward(retain_graph=True)
            reads.append((embedded[0].grad[0].abs().sum(-1) > 0).nonzero().flatten().tolist())
    hook.remove()
    assert reads == [[0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5], [2]]
    with torch.no_grad():
        ref = model(prompt, prompt_mask, next_token, full_mask)
        for bug in mosaic_pad_cache_cumsum.BUGS:
            bugged, inputs = mosaic_pad_cache_cumsum.build(bug)
            changed = (bugged(*inputs) - ref).abs().amax(-1) > 1e-5
            assert changed.nonzero().tolist() == [[0, 6]], bug
