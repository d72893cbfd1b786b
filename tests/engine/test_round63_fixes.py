"""Fixes from the first-sight rounds public63, public65 and reports46, and from tracing every corpus file the way
``shapetrace trace FILE`` runs it (the model and its inputs built under the trace). Each test names the public code
it follows and what was said before (on 06b75e7b):

* positions counted along a padding mask that also padded the ids, all built under the trace (transformers'
  Llama 4.33 ``_prepare_decoder_attention_mask``, huggingface/transformers PR #26421): the rotary tables and the
  causal mask were "not checked (unnamed axes)", since the data and the tables met in that mask; an integer or
  boolean tensor in common is no data (value_checked.counted_nodes);
* a module's ``[block_size, block_size]`` causal buffer at B = T (datawhalechina/llms-from-scratch-cn issue #54) was
  seeded ``[B, T]``: a false ``broadcast-mismatch`` on correct code (infer/seeds.held_seeds);
* a call that returns its score maps and its queries (xieenze/Trans2Seg's decoder, issue #4) was
  ``✗ tokens-never-mix`` from the score maps alone (module_state.more_outputs);
* an einops letter ``h`` given to one whole axis (lucidrains/alphafold2's axial folds ``'b h w d -> (b w) h d'``) was
  "names an axis h (heads), but ... holds pieces of the tokens" (infer/einops._whole_axis);
* a pair mask ``m_i & m_j`` on scores folded ``[B·T, H, T, T]`` hides every key of a padded row's slice: it was
  ``mask-hides-every-key`` (rules/masks._sliced_by_tokens);
* jingraham's Struct2Seq ``NeighborAttention`` (``[B, N, 1, H, 1, d] @ [B, N, K, H, d, 1]``, the K neighbours a
  batch axis without a name) was ``attends-over-wrong-axis`` (rules/diagnose._tokens_as_batch);
* ClimaX's variable aggregation (``nn.MultiheadAttention`` over the variables of each patch, its batch ``B·L``) was
  ``tokens-merged-with-features`` at the attention's own ``bsz * num_heads``: the fold is read only by batched
  products that keep it, through reorders, softmax and all, until it is undone (rules/row_folds._leading_batch);
* an argument of the model's call that the script built before the call (fairseq's padding mask ``arange(T)[None, :]
  >= lengths[:, None]``) was never named, so the ops inside the model that read it were not checked
  (infer/seeds.built_argument), nor the script's ops that built it (infer/built_inputs: named back from it);
* a model that returns its tokens merged back from strided blocks without the transpose back (openai/jukebox's
  ``transpose_block_attn``, ``[B, T%3·T/3, D]``) got no finding, and its verdict said "every axis keeps its meaning
  from input to output" (rules/order.tokens_returned_out_of_order); the fold of such blocks into the batch was
  "groups blocks of tokens" (it groups the tokens by their place in each block);
* microsoft/Focal-Transformer's ``pool_method="fc"`` (``Linear(ws * ws, 1)`` over each window's pixels, the windows on
  other axes) was ``projection-over-tokens`` (axes.patch_steps: a window's own steps, as a patch embedding's);
* LeapLabTHU/FLatten-Transformer's ``rearrange(v, "b (w h) c -> b c w h")`` (a window's tokens as a map, channels
  first, no grid declared) was "names an axis h (heads)" (infer/einops._after_features);
* fla-org/flash-linear-attention's DeltaNet state read ``einsum('bhd,bhdm->bhm', q_i, S)`` (one query vector per
  head, no query rows) was "scores whose key axis is d_k" (rules/diagnose.attention_key_axis);
* MosaicGPT's left-padded queries (mosaicml/examples PR #257: every key hidden with ``finfo.min``, the softmax even
  over all keys) in an output that joins the prefill's tokens and a decoding step's (``T+1``) were a false
  ``causal-mask-leaks`` in the CLI: the rows with no key left were matched only against tables of ``T+1`` queries
  (unattended.unattended_rows: the input's ``T`` are the output's first ``T``).
"""

from __future__ import annotations

import torch
from einops import rearrange
from torch import nn

import shapetrace
from tests.corpus.helpers import traced_build, verdict_line
from tests.corpus.public7 import fairseq_mha
from tests.corpus.public9 import bart
from tests.corpus.public53 import flux_double_stream
from tests.corpus.public63 import lucidrains_af2_pairwise, struct2seq_neighbor
from tests.corpus.public64 import jukebox_transpose_block
from tests.corpus.public65 import climax_variable_agg
from tests.corpus.public66 import fla_delta_rule_recurrent
from tests.corpus.public67 import flatten_focused_linear, focal_window_pooled
from tests.corpus.reports46 import llama_expand_mask_transposed, llmsfs_cn_causal_softmax_dim, trans2seg_decoder_heads
from tests.corpus.reports47 import mosaic_pad_cache_cumsum


def _kinds(t) -> list[str]:
    return [d.kind for d in t.diagnostics if d.severity != "note"]


def test_rotary_tables_from_positions_along_the_padding_mask_are_checked_when_built_under_the_trace():
    t = traced_build(llama_expand_mask_transposed, "", llama_expand_mask_transposed.DIMS[0], built_inside=True)
    line = verdict_line(t)
    assert line.startswith("✓ checked all 48 ops that could carry a layout bug (10 of them on the values of the "
                           "rotary tables or causal masks they build)"), line
    # the bug is still found the same way
    bug = traced_build(llama_expand_mask_transposed, "mask-transposed", llama_expand_mask_transposed.DIMS[0],
                       built_inside=True)
    assert _kinds(bug) == ["mask-wrong-axis"]


def test_a_causal_buffer_of_block_size_is_never_read_with_a_batch_axis():
    t = traced_build(llmsfs_cn_causal_softmax_dim, "", "B=4 T=4 D=32")
    assert _kinds(t) == []
    fill = next(e for e in t.events if e.op == "masked_fill_")
    assert fill.inputs[1].dims == ("T", "T")
    assert verdict_line(t)[0] == "?"   # (names from sizes alone at B = T: not proven)
    assert _kinds(traced_build(llmsfs_cn_causal_softmax_dim, "softmax-dim-1", "B=4 T=4 D=32")) == [
        "softmax-wrong-axis"]


class _ScoresAndQueries(nn.Module):
    """Trans2Seg's decoder in miniature: returns the scores ``[B, H, T, S]`` (each key column made of its key alone)
    and the class queries that read every key."""

    def __init__(self, d=32, h=4, n=3):
        super().__init__()
        self.h, self.queries, self.k, self.v = h, nn.Parameter(torch.randn(n, d)), nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, feat):                                                         # (B, S, D)
        b, s, d = feat.shape
        q = self.queries.expand(b, -1, -1).reshape(b, -1, self.h, d // self.h).transpose(1, 2)   # (B, H, N, d_k)
        k = self.k(feat).reshape(b, s, self.h, d // self.h).transpose(1, 2)                     # (B, H, S, d_k)
        v = self.v(feat).reshape(b, s, self.h, d // self.h).transpose(1, 2)                     # (B, H, S, d_k)
        attn = q @ k.transpose(-2, -1)                                                         # (B, H, N, S)
        out = (attn.softmax(-1) @ v).transpose(1, 2).reshape(b, -1, d)                          # (B, N, D)
        return attn.permute(0, 2, 1, 3), out                                                   # (B, N, H, S)


def test_tokens_never_mix_is_not_claimed_from_one_of_several_outputs():
    t = traced_build(trans2seg_decoder_heads, "", trans2seg_decoder_heads.DIMS[0], dependencies=True)
    assert "tokens-never-mix" not in _kinds(t)
    torch.manual_seed(0)
    with torch.no_grad(), shapetrace.trace(dims="B=2 S=6 D=32 H=4", dependencies=True) as small:
        _ScoresAndQueries()(torch.randn(2, 6, 32))
    assert "tokens-never-mix" not in _kinds(small)


def test_an_einops_letter_on_one_whole_axis_is_no_head_split_and_a_piece_still_is():
    t = traced_build(lucidrains_af2_pairwise, "", lucidrains_af2_pairwise.DIMS[0])
    assert _kinds(t) == []
    x = torch.randn(2, 12, 32)
    with shapetrace.trace(dims="B=2 T=12 D=32 H=4") as split:
        rearrange(x, "b (h n) d -> b h n d", h=4)                                  # (B, T/3, 3, D): tokens cut
    assert _kinds(split) == ["mixed-axis"]


def test_a_padded_row_of_a_pair_folded_into_the_batch_is_no_reversed_mask():
    t = traced_build(lucidrains_af2_pairwise, "", "B=4 T=4 D=32 H=4")
    assert "mask-hides-every-key" not in _kinds(t)


def test_neighbour_attention_over_gathered_keys_is_no_attention_over_the_wrong_axis():
    for dims in (struct2seq_neighbor.DIMS[0], struct2seq_neighbor.EQUAL[struct2seq_neighbor.DIMS[0]]):
        assert _kinds(traced_build(struct2seq_neighbor, "", dims)) == [], dims


def test_rows_folded_into_the_batch_with_the_heads_are_not_tokens_merged_with_features():
    t = traced_build(climax_variable_agg, "", climax_variable_agg.DIMS[0])
    assert _kinds(t) == []
    bug = traced_build(climax_variable_agg, "einsum-patch-outer", climax_variable_agg.DIMS[0])
    assert _kinds(bug) == ["broadcast-mismatch"]


def test_a_batch_first_input_given_to_a_sequence_first_attention_still_merges_tokens_with_heads():
    mha = nn.MultiheadAttention(32, 4).eval()
    x = torch.randn(2, 6, 32)                                                          # (B, T, D) read as (L, N, E)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        mha(x, x, x)
    assert "tokens-merged-with-features" in _kinds(t) or "attends-over-batch" in _kinds(t)


def test_a_padding_mask_the_script_builds_before_the_call_is_named_inside_the_model_and_where_it_was_built():
    inside = traced_build(fairseq_mha, "", fairseq_mha.DIMS[0], dependencies=True, built_inside=True)
    assert verdict_line(inside) == (
        "✓ checked all 23 ops that could carry a layout bug: every axis keeps its meaning from input to output; held "
        "on the values: batch entries stay apart, each token depends on itself, padding stays unread; not measured: "
        "heads (the model cannot take a copy of its batch per head)")
    # the script's own build(): arange(T)[None, :] >= lengths[:, None], named back from the mask it made
    built = [(e.op, e.inputs[0].dims, e.outputs[0].dims) for e in inside.events[:2]]
    assert built == [("__getitem__", ("T",), (None, "T")), ("__getitem__", ("B",), ("B", None))]


def test_a_causal_triangle_plus_padding_built_by_the_script_is_named_back_to_its_triangle():
    """transformers' 4-D mask as BART's tests build it (tests/corpus/public9/bart): ``full((T, T), -inf).triu(1)
    [None, None] + (1 - keep)[:, None, None, :] * min``, built before the model's call."""
    inside = traced_build(bart, "", bart.DIMS[0], built_inside=True)
    triangle = next(e for e in inside.events if e.op == "triu")
    assert (triangle.inputs[0].dims, triangle.outputs[0].dims) == (("T", "T"), ("T", "T"))
    assert verdict_line(inside).startswith("✓ checked all 26 ops")


class _StridedBlocks(nn.Module):
    """Strided attention in miniature (the Sparse Transformer's strided pattern, Jukebox's ``transpose_block_attn``):
    the tokens regrouped by their place in each block of 3, attended, and (``back``) put back in order."""

    def __init__(self, back: bool):
        super().__init__()
        self.lin, self.back = nn.Linear(32, 32), back

    def forward(self, x):                                                            # (B, T, D)
        b, t, d = x.shape
        y = self.lin(x).view(b, t // 3, 3, d).transpose(1, 2)                         # (B, T%3, T/3, D)
        y = y.reshape(b * 3, t // 3, d)                                               # (B·T%3, T/3, D)
        w = ((y @ y.transpose(1, 2)).softmax(-1) @ y).view(b, 3, t // 3, d)           # (B, T%3, T/3, D)
        if self.back:
            w = w.transpose(1, 2)                                                     # (B, T/3, T%3, D)
        return self.lin(w.reshape(b, t, d))                                           # (B, T, D)


def test_tokens_returned_in_another_order_than_they_came_are_an_error_at_the_merge():
    torch.manual_seed(0)
    found = {}
    for back in (True, False):
        with torch.no_grad(), shapetrace.trace(dims="B=2 T=12 D=32") as t:
            _StridedBlocks(back)(torch.randn(2, 12, 32))
        found[back] = t
    assert _kinds(found[True]) == []
    wrong = [d for d in found[False].diagnostics if d.severity == "error"]
    assert [(d.kind, d.event) for d in wrong] == [("mixed-axis", 9)]
    assert wrong[0].message == (
        "reshape #9 turns [B=2, T%3=3, T/3=4, D=32] into [B=2, T%3·T/3=12, D=32]: axis 1 joins T%3·T/3, every token "
        "of T but in another order than T's own, and the model returns them so ([B=2, T%3·T/3=12, D=32]): output "
        "token i is another input token than i. Torch sees the right shape and says nothing.")
    assert wrong[0].fix == ("Put the pieces back in T's order before the reshape: .permute(0, 2, 1, 3) on [B=2, "
                            "T%3=3, T/3=4, D=32] (then .contiguous()), undoing the regrouping in reverse.")
    note = next(d for d in found[True].diagnostics if d.kind == "tokens-regrouped-with-batch")
    assert "groups the tokens by their place in each block (with batch entries, if any): each entry holds tokens " \
           "a stride apart." in note.message
    for dims in (jukebox_transpose_block.DIMS[0], jukebox_transpose_block.EQUAL[jukebox_transpose_block.DIMS[0]]):
        assert _kinds(traced_build(jukebox_transpose_block, "transpose-back-missing", dims)) == ["mixed-axis"]


def test_a_projection_over_each_windows_own_pixels_is_no_projection_over_tokens():
    t = traced_build(focal_window_pooled, "", focal_window_pooled.DIMS[0])
    assert "projection-over-tokens" not in _kinds(t)
    assert _kinds(traced_build(focal_window_pooled, "pool-view-for-transpose", focal_window_pooled.DIMS[0])) == [
        "mixed-axis"]


def test_a_height_letter_after_the_channels_is_no_head_split():
    assert _kinds(traced_build(flatten_focused_linear, "", flatten_focused_linear.DIMS[0])) == []
    assert _kinds(traced_build(flatten_focused_linear, "heads-merge-head-outer", flatten_focused_linear.DIMS[0])) == [
        "projection-over-tokens"]


def test_a_state_read_by_one_query_vector_per_head_is_no_scores():
    t = traced_build(fla_delta_rule_recurrent, "", fla_delta_rule_recurrent.DIMS[0], dependencies=True)
    assert _kinds(t) == []


def test_padded_queries_of_a_prefill_joined_with_a_decoding_step_are_no_causal_leak():
    t = traced_build(mosaic_pad_cache_cumsum, "", mosaic_pad_cache_cumsum.DIMS[0], dependencies=True,
                     built_inside=True)
    assert _kinds(t) == []
    assert "the causal mask holds" in verdict_line(t)


def test_position_ids_repeated_over_the_batch_by_the_script_are_seeded_as_the_models_input():
    """Flux's image ids (h, w, 3) built by the script and .repeat(B, 1, 1) (tests/corpus/public53/flux_double_stream:
    the copies axis holds one entry for any batch): seeded [B, T, F_in], so the ids given in the wrong order are
    found in the CLI as through the API (they were ? there: the ids' token axis never named)."""
    t = traced_build(flux_double_stream, "ids-image-first", flux_double_stream.DIMS[0], dependencies=True,
                     built_inside=True)
    assert _kinds(t) == ["broadcast-mismatch", "broadcast-mismatch", "contracts-different-axes"]
