"""Fixes from the first-sight rounds public55, public56, reports40 and reports41 (each test names the corpus file it
follows and what was said before):

* heads merged as ``d_k·H`` (lucidrains/vit-pytorch cross_vit ``'b h n d -> b n (d h)'``): the note
  ``nonstandard-head-split`` on the merge, which said nothing (axes.reorders_one_root, rules/head_split);
* a mixed axis of the patch grid's rows and columns says so, not "batch entries and tokens" (rules/diagnose);
* a window the model holds that no op applies (proger/hippogriff issue #7) is a note (rules/declared);
* a boolean mask or-ed with the padding by a call without a row of its own is still the padding's mask (pytorch/text
  T5's ``attn_mask.logical_or(key_padding_mask)``: "key_padding_mask never reaches a mask on the scores", padding.py);
* the value contracts say why an input of two token axes is not measured, not that its axes "have no names"
  (dependencies._unmeasured_axes);
* scores of queries turned by a rotary table against keys left plain are a warning (rotary_sides, rules/rotary);
* a join along the tokens of parts from two of the q, k, v projections is a warning (rules/joins);
* views of one mix are one error (rules/causes.holds); an integer tensor's merge is no token-feature pair; a
  projection over a mix of tokens says tokens (rules/diagnose).
"""

from __future__ import annotations

import torch
from einops import rearrange
from torch import nn

import shapetrace
from tests.corpus.helpers import traced_build
from tests.corpus.public6 import bigcode_mqa
from tests.corpus.public55 import dinov3_rope_attention, mmseg_efficient_mha, sam2_hiera_qpool, vitpytorch_cross_vit
from tests.corpus.public56 import gptneox_megatron_partial_rotary, torchtext_t5_decoder_bias
from tests.corpus.public57 import animatediff_temporal, ptv2_grouped_vector
from tests.corpus.reports40 import hippogriff_window_negative
from tests.corpus.reports42 import whisper_decoder_pad_positions


class _LucidrainsAttention(nn.Module):
    """vit-pytorch's ``Attention``: ``to_qkv``, ``'b n (h d) -> b h n d'``, softmax, and the merge ``(h d)``, or
    ``(d h)`` with ``d_major``."""

    def __init__(self, dim=32, heads=4, d_major=False):
        super().__init__()
        self.heads, self.d_major = heads, d_major
        self.to_qkv, self.to_out = nn.Linear(dim, dim * 3, bias=False), nn.Linear(dim, dim)

    def forward(self, x):
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=self.heads) for t in self.to_qkv(x).chunk(3, dim=-1))
        attn = (q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5).softmax(dim=-1)      # (B, H, N, N)
        out = attn @ v                                                              # (B, H, N, d)
        out = rearrange(out, "b h n d -> b n (d h)" if self.d_major else "b h n d -> b n (h d)")   # (B, N, D)
        return self.to_out(out)


def _traced(model, dims="B=2 N=7 D=32 H=4"):
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        model(torch.randn(2, 7, 32))
    return t


def test_heads_merged_d_major_are_a_note_on_the_merge_and_the_head_major_merge_is_silent():
    t = _traced(_LucidrainsAttention(d_major=True).eval())
    assert [(d.severity, d.kind) for d in t.diagnostics] == [("note", "nonstandard-head-split")]
    found = t.diagnostics[0]
    assert t.events[found.event].op == "reshape"   # (einops' rearrange runs a reshape)
    assert found.message == (
        f"reshape #{found.event} merges into [B=2, N=7, d_k·H=32] with axis 2 (d_k·H) in another order than the "
        "features were split: the next layer reads the same feature of every head side by side, not each head's "
        "features together. It is consistent, so a model trained this way works: the projections learn any fixed "
        "permutation of features. It does break loading weights trained with the usual split (H heads of d_k "
        "contiguous features).")
    assert _traced(_LucidrainsAttention().eval()).diagnostics == []


def test_the_cross_vit_merge_d_h_gets_the_note_and_its_correct_file_none():
    bug = traced_build(vitpytorch_cross_vit, "merge-d-h", vitpytorch_cross_vit.DIMS[0])
    assert [(d.kind, d.event) for d in bug.diagnostics] == [("nonstandard-head-split", 20)]   # (one per line)
    correct = traced_build(vitpytorch_cross_vit, "", vitpytorch_cross_vit.DIMS[0])
    assert [d.kind for d in correct.diagnostics] == []


def test_a_mixed_axis_of_the_patch_grid_names_rows_and_columns():
    t = traced_build(mmseg_efficient_mha, "hw-shape-swapped", mmseg_efficient_mha.DIMS[0])
    found = [d for d in t.diagnostics if d.kind == "mixed-axis"]
    assert len(found) == 1
    assert found[0].message == (
        "reshape #6 turns [B=2, D=32, N=60] into [B=2, D=32, !Hp·Wp=10, !Wp=6]: axis 2 (size 10) holds pieces of Hp "
        "and Wp, so its entries mix the patch grid's rows and columns. The tensor has the right shape but the wrong "
        "contents.")


def test_a_window_held_and_applied_by_no_op_is_a_note_and_one_applied_says_nothing():
    bug = traced_build(hippogriff_window_negative, "negative-window", "B=2 T=5 D=32 H=4")
    assert [(d.severity, d.kind, d.event) for d in bug.diagnostics] == [("note", "window-width-unchecked", 20)]
    assert bug.diagnostics[0].message == (
        "the model holds a window (smqa.window_size = 3), but no op of the run applies one: masked_fill #20 hides "
        "the keys after each query and none before it, so a query sees up to 5 keys, more than the window's 3. Which "
        "width the model meant is a number of its configuration, so it is not checked.")
    assert bug.report().verdict.line.startswith("? ")
    correct = traced_build(hippogriff_window_negative, "", "B=2 T=5 D=32 H=4")
    assert correct.diagnostics == [] and correct.report().verdict.line.startswith("✓")


def test_a_padding_mask_or_ed_with_the_causal_triangle_is_measured():
    t = traced_build(torchtext_t5_decoder_bias, "", torchtext_t5_decoder_bias.DIMS[0], dependencies=True)
    verdict = t.report().verdict
    assert "padding stays unread" in verdict.contracts
    assert not any("never reaches" in why for why in verdict.unmeasured)
    bug = traced_build(torchtext_t5_decoder_bias, "padding-and-for-or", torchtext_t5_decoder_bias.DIMS[0],
                       dependencies=True)
    assert [d.kind for d in bug.diagnostics if d.severity == "error"] == ["causal-mask-leaks"]


def test_an_input_with_two_token_axes_says_why_its_contracts_are_not_measured():
    t = traced_build(sam2_hiera_qpool, "", "B=5 D=16 H=4 Hp=12 Wp=18 d_k=8", dependencies=True)
    assert "(the input's tokens lie on 2 axes (Hp, Wp), and the contracts move those of one axis)" in \
        t.report().verdict.line


def test_scores_of_queries_turned_against_keys_left_plain_are_a_warning():
    """EleutherAI/gpt-neox's partial rotary with ``cat((key_rot, key_pass))`` of the unrotated ``key_rot``
    (tests/corpus/public56/gptneox_megatron_partial_rotary; ``?`` for an unrelated input mask, ``✓`` in the CLI at
    first sight): the keys' rotation is computed and dropped, the scores hold the queries' absolute positions."""
    bug = traced_build(gptneox_megatron_partial_rotary, "key-rot-unrotated", "B=2 T=5 D=64 H=4")
    assert [(d.severity, d.kind, d.event) for d in bug.diagnostics if d.severity != "note"] == [
        ("warning", "rotary-one-sided", 26)]
    assert bug.diagnostics[0].message == (
        "baddbmm #26 scores queries against keys where a rotary table turned the queries on their way from the "
        "projection and not the keys: RoPE makes q·k depend on the distance between two tokens only where both are "
        "turned, so these scores hold each query's absolute position instead.")
    correct = traced_build(gptneox_megatron_partial_rotary, "", "B=2 T=5 D=64 H=4")
    assert [d.kind for d in correct.diagnostics if d.kind == "rotary-one-sided"] == []


def test_keys_turned_by_a_write_into_their_fused_tensor_count_as_turned():
    """proger/hippogriff's ``kv[:, :, 0] = self.rotate(kv[:, :, 0], cos, sin)`` turns the keys by a write into
    ``kv``, read back by ``kv[:, :, 0]`` (flash-attn's ``apply_rotary_emb_kv_``): both sides are turned."""
    t = traced_build(hippogriff_window_negative, "", "B=2 T=5 D=32 H=4")
    assert t.analysis().one_sided_rotations == ()
    assert t.diagnostics == []


def test_keys_joined_from_the_key_prefix_and_the_query_patches_are_a_warning():
    """facebookresearch/dinov3's ``k = rope_apply(q[:, :, prefix:, :], ...)`` copied from the line above it
    (tests/corpus/public55/dinov3_rope_attention; ``✓`` at first sight): the keys' prefix tokens joined with the
    rotated query patches. The correct file's joins (each projection's prefix with its own rotated patches) and
    q, k, v stacked along a new axis say nothing."""
    bug = traced_build(dinov3_rope_attention, "k-rotated-from-q", dinov3_rope_attention.DIMS[0])
    assert [(d.severity, d.kind, d.event) for d in bug.diagnostics] == [("warning", "projections-joined", 30)]
    assert bug.diagnostics[0].message == (
        "cat #30 joins along the tokens [B=2, H=4, (5+N)[0:5]=5, d_k=8] from the k projection, [B=2, H=4, N=15, "
        "d_k=8] from the q projection: one tensor's tokens come from two projections, so some of its keys (or "
        "queries, or values) are another projection's. Names and shapes are those of a right join; only where each "
        "element came from tells.")
    assert traced_build(dinov3_rope_attention, "", dinov3_rope_attention.DIMS[0]).diagnostics == []


def test_views_of_one_mix_are_one_error_at_the_op_that_made_it():
    """EleutherAI/gpt-neox's queries given to ``baddbmm`` as ``reshape(b * np, sq, hn)`` for ``transpose(0, 1)``
    (tests/corpus/public56/gptneox_megatron_partial_rotary): four ``mixed-axis`` errors at first sight, three on the
    views that carry the one mix on (rules/causes.holds: a piece of a mix is held by any piece of the same mix)."""
    t = traced_build(gptneox_megatron_partial_rotary, "query-reshape-for-transpose", "B=2 T=5 D=64 H=4")
    errors = [d for d in t.diagnostics if d.severity == "error"]
    assert [(d.kind, d.event, d.also) for d in errors] == [("mixed-axis", 23, (27, 31, 34, 37, 38))]


def test_an_index_tensor_flattened_for_a_gather_is_no_token_feature_merge():
    """Pointcept's PTv2 ``idx.view(-1)`` of its ``[N, K]`` neighbour indices (tests/corpus/public57/
    ptv2_grouped_vector, read with ``N``): "(token, feature) pair" twice at first sight, on an int64 tensor."""
    t = traced_build(ptv2_grouped_vector, "", "N=11 K=5 D=32 H=4")
    assert [d.kind for d in t.diagnostics if d.kind == "tokens-merged-with-features"] == []


def test_a_projection_over_a_mix_of_tokens_says_tokens():
    """GPT-BigCode's ``heads-first`` (tests/corpus/public6/bigcode_mqa): the linear over ``!T·d_k`` said "which
    holds batch entries" (a mixed root has no role of its own; its parts do)."""
    t = traced_build(bigcode_mqa, "heads-first", "B=2 T=6 D=32 H=4")
    found = next(d for d in t.diagnostics if d.kind == "projection-over-tokens")
    assert "over its last axis (T and d_k), which holds tokens: the projection mixes different tokens" in \
        found.message


def test_heads_folded_into_a_temporal_batch_read_through_a_transpose_are_a_batch():
    """guoyww/AnimateDiff's temporal attention over diffusers 0.11's ``CrossAttention`` (tests/corpus/public57/
    animatediff_temporal, frames named ``Fp``): the keys' ``[B·N·H, Fp, d_k]`` fold is transposed before ``baddbmm``
    batches it; ``! tokens-merged-with-features`` at first sight, now the batch it is."""
    t = traced_build(animatediff_temporal, "", "B=2 D=32 H=4 Fp=3 Hp=5 Wp=7")
    assert [d.kind for d in t.diagnostics] == []
    assert t.report().verdict.line.startswith("✓")


def test_a_position_table_cut_for_every_entry_of_a_left_padded_batch_is_the_shared_positions_note():
    """Whisper's decoder positions ``embed_positions.weight[0:seq_len]`` for every row of a left-padded batch
    (huggingface/transformers issue #20624; tests/corpus/reports42/whisper_decoder_pad_positions, ``✓`` at first
    sight); the correct file counts each row's positions from its mask and says nothing."""
    bug = traced_build(whisper_decoder_pad_positions, "positions-without-mask", "B=2 T=6 D=32 H=4 S=5")
    assert [(d.severity, d.kind, d.event) for d in bug.diagnostics] == [("note", "positions-shared-over-padding", 1)]
    assert bug.diagnostics[0].message.startswith(
        "__getitem__ #1 cuts a table of the model's own into [T=6, D=32], one row per token shared by every batch "
        "entry, while the model was given `attention_mask` [B=2, T=6] with a row padded in front")
    assert traced_build(whisper_decoder_pad_positions, "", "B=2 T=6 D=32 H=4 S=5").diagnostics == []
