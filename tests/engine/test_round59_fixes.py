"""Fixes from the first-sight rounds public58, public59 and reports43 (each test names the corpus file it follows and
what was said before):

* a product that sums one flattening of a grid against another order of it (CompVis/taming-transformers
  ``AttnBlock`` with the keys flattened width-first) is ``contracts-different-axes`` (rules/contracts,
  ``reordered_factors``): it got ``✓``;
* an einsum's sentence names the axis it sums over, wherever the letter sits (SuperGlue's ``'bdhn,bdhm->bhnm'`` was
  "sums over T"; LoFTR's ``'nshd,nshv->nhdv'`` "sums over d_k"): sentences._summed;
* one cross-attention layer run both ways (SuperGlue's ``AttentionalGNN``) is no ``keys-change-sequence``;
* a padding mask copied (``clone``) and multiplied by itself (RibonanzaNet's pair mask) still reaches the scores
  (padding._masks);
* a per-head table shared by the batch (RibonanzaNet's pair bias ``[1, T, T, H]``, T5's bias looked up ``[T, T, H]``)
  is no head split (heads.py): the heads contract was "not measured: a split's batch axis has no name";
* a band that lost its causal half applies the window it holds: no "no op of the run applies one" note
  (rules/declared);
* a mixed axis of a join and another axis is spelled ``H·(1+T)``, not ``H·1+T`` (formatting.spelled);
* the rotary hint says which axis the table was counted along (rules/rotary); "Also seen at" never repeats an op
  its own message names (rules/causes);
* a ``cat`` of one tensor (einops ``pack([t], '* n d')``, lucidrains/local-attention) keeps every axis as it was:
  the heads folded into ``B·H`` came back as ``[B·H/4, B·H%4, T, d_k]`` and the correct file was a false ``✗
  projection-over-tokens`` (axis_moves.cat_axes); a slice of a flattened product is no cut of a join (axes);
* a last input token that reaches no output at all (ESPnet's TTS decoder fed its targets shifted right) leaves
  "each token depends on itself" not measured, not a false ``✗ token-ignores-itself`` (dependencies);
* a folded axis without a name is not spelled ``(None)`` in ``mask-wrong-batch-order`` (reczoo/FuxiCTR issue #130);
* a fold ``[B·N·H, F, d_k]`` that every product keeps as its batch while it scores frames whose role the dims do
  not say (diffusers' ``TransformerTemporalModel``) is a batch, no ``tokens-merged-with-features`` (rules/row_folds);
* an einops group of several letters, one a length read from an axis (``repeat(t, 'j -> 1 1 1 (n j)', n=n)``), is
  named from the pattern's frame, so einops' recipe cache (a former call's int handed to its ops) changes no
  outcome: open_flamingo's ``latents-outer-repeat`` was ``✗`` on a process's first trace and ``?`` after it.
"""

from __future__ import annotations

from tests.corpus.helpers import traced_build
from tests.corpus.public15 import x_transformers_t5
from tests.corpus.public58 import mistral_packed_seqlens
from tests.corpus.public59 import loftr_linear, superglue_gnn, taming_attnblock
from tests.corpus.public60 import espnet_tts_decoder
from tests.corpus.public61 import local_attention_lookaround
from tests.corpus.public62 import open_flamingo_masked_cross
from tests.corpus.reports43 import (
    mlx_gemma3_sliding_mask,
    ribonanza_pair_mask_pads,
    tpa_mla_rotary_heads,
    vitcifar_scale_total_feats,
)
from tests.corpus.reports44 import fuxictr_bst_heads_mask
from tests.corpus.reports45 import diffusers_temporal_out_reshape


def _kinds(t) -> list[tuple[str, str]]:
    return [(d.severity, d.kind) for d in t.diagnostics]


def _annotations(t, op: str) -> list[str]:
    from shapetrace.engine.sentences import annotate
    return [annotate(e) for e in t.events if e.op == op]


def test_keys_flattened_in_another_order_than_the_values_is_an_error_at_every_size():
    for dims in (taming_attnblock.DIMS[0], taming_attnblock.EQUAL[taming_attnblock.DIMS[0]]):
        t = traced_build(taming_attnblock, "keys-column-major", dims)
        assert _kinds(t) == [("error", "contracts-different-axes")]
        found = t.diagnostics[0]
        assert found.message.endswith(
            "and sums over N of the first with Wp·Hp of the second: both hold the same Hp and Wp positions, "
            "flattened Hp·Wp in one and Wp·Hp in the other, so entry i of one is another position than entry i "
            "of the other.")
        assert found.fix == ("Flatten both operands from the same axis order (Hp then Wp): drop the transpose or "
                             "permute before the reshape of the one flattened the other way.")
    assert _kinds(traced_build(taming_attnblock, "", taming_attnblock.DIMS[0])) == []


def test_an_einsums_sentence_names_the_axis_it_sums_over():
    glue = _annotations(traced_build(superglue_gnn, "", superglue_gnn.DIMS[0]), "einsum")
    assert glue[0].startswith("scores: sums over D/4, giving one [T, T] matrix per (B, D%4)")
    loftr = _annotations(traced_build(loftr_linear, "", loftr_linear.DIMS[0]), "einsum")
    assert loftr[0].startswith("sums over T: [B, T, H, d_k] @ [B, T, H, d_k] -> [B, H, d_k, d_k]")


def test_one_cross_attention_run_both_ways_changes_no_sequence():
    t = traced_build(superglue_gnn, "", superglue_gnn.DIMS[0])
    assert "keys-change-sequence" not in [d.kind for d in t.diagnostics]
    assert _kinds(t) == [("note", "nonstandard-head-split")]
    assert t.diagnostics[0].message.endswith("It does break loading weights trained with the usual split (H heads "
                                             "of d_k contiguous features).")


def test_a_pair_mask_made_from_a_copy_of_the_padding_reaches_the_scores():
    t = traced_build(ribonanza_pair_mask_pads, "", ribonanza_pair_mask_pads.DIMS[0], dependencies=True)
    report = t.report()
    assert "padding stays unread" in report.contracts
    assert "heads (a split's batch axis has no name)" not in report.unmeasured
    tiny = traced_build(ribonanza_pair_mask_pads, "mask-fill-tiny", ribonanza_pair_mask_pads.DIMS[0],
                        dependencies=True)
    assert [d.kind for d in tiny.diagnostics if d.severity == "error"] == ["padding-read"]


def test_a_band_without_its_causal_half_is_the_keys_error_alone():
    t = traced_build(mlx_gemma3_sliding_mask, "window-not-causal", mlx_gemma3_sliding_mask.DIMS[0])
    assert _kinds(t) == [("error", "mask-keeps-future")]


def test_a_mix_of_a_join_and_another_axis_puts_the_join_in_parentheses():
    t = traced_build(vitcifar_scale_total_feats, "einsum-heads-first", vitcifar_scale_total_feats.DIMS[0])
    assert "into [B=2, !H·(1+T)=6, !(1+T)·d_k=32]: axis 1 (size 6) holds pieces of H and 1+T" in \
        t.diagnostics[0].message


def test_the_rotary_hint_says_which_axis_the_table_was_counted_along():
    t = traced_build(tpa_mla_rotary_heads, "rope-after-transpose", tpa_mla_rotary_heads.DIMS[0])
    found = next(d for d in t.diagnostics if d.kind == "rotary-same-angle-every-token")
    assert found.fix.endswith("(offset by the cache length when decoding), not along the heads axis (H).")


def test_also_seen_at_never_repeats_an_op_the_message_names():
    t = traced_build(mistral_packed_seqlens, "repeat-kv-tiled", "N=10 D=32 H=4 H_kv=2")
    found = next(d for d in t.diagnostics if d.kind == "gqa-head-order")
    assert "matmul #26 pairs them with q" in found.message
    assert found.message.endswith("The shapes agree, so torch cannot complain. Also seen at #35 matmul.")


def test_a_t5_bias_looked_up_per_head_is_no_split_and_the_heads_are_measured():
    # (lucidrains/x-transformers' T5 relative position bias: ``rel_pos_bias(bucket)`` is [T, T, H], no batch)
    report = traced_build(x_transformers_t5, "", x_transformers_t5.DIMS[0], dependencies=True).report()
    assert "heads stay apart" in report.contracts
    assert not any("a split's batch axis has no name" in u for u in report.unmeasured)


def test_a_pack_of_one_tensor_keeps_the_heads_folded_into_the_batch():
    t = traced_build(local_attention_lookaround, "", local_attention_lookaround.DIMS[0])
    assert [d for d in t.diagnostics if d.severity == "error"] == []
    merge = [e for e in t.events if e.outputs and e.outputs[0].dims[:2] == ("B", "H")]
    assert merge and merge[-1].outputs[0].dims == ("B", "H", "T", "d_k")


def test_a_slice_of_a_flattened_product_is_no_cut_of_a_join():
    # (local-attention's windows flattened back, ``(T+1%3)*(T+1/3)[0:5]``, were read as the join
    # ``T+1%3)*(T+1/3`` and said to be "cut off the bounds of its parts")
    from shapetrace.engine.axes import indexed_join

    assert indexed_join("(T+1%3)*(T+1/3)[0:5]") is None
    assert indexed_join("(T+S)[5:17]") == "T+S" and indexed_join("((T+1)+S)[0:3]") == "(T+1)+S"


def test_a_decoder_fed_its_targets_shifted_right_is_not_judged_on_its_own_token():
    report = traced_build(espnet_tts_decoder, "", espnet_tts_decoder.DIMS[0], dependencies=True).report()
    assert [d.kind for d in report.diagnostics if d.severity == "error"] == []
    assert "each token depends on itself (the last input token reaches no output: a decoder fed its targets " \
           "shifted right drops it)" in report.unmeasured
    assert "batch entries stay apart" in report.contracts and "the causal mask holds" in report.contracts


def test_an_unnamed_fold_is_not_spelled_none():
    t = traced_build(fuxictr_bst_heads_mask, "mask-heads-outer", fuxictr_bst_heads_mask.DIMS[0])
    (found,) = [d for d in t.diagnostics if d.kind == "mask-wrong-batch-order"]
    assert "(None)" not in found.message
    assert "axis 0 of the scores counts batch entries first, but the bias folds them in another place" in \
        found.message


def test_a_fold_into_the_batch_for_attention_over_unsaid_frames_is_a_batch():
    t = traced_build(diffusers_temporal_out_reshape, "", diffusers_temporal_out_reshape.DIMS[0])
    assert [(d.severity, d.kind) for d in t.diagnostics if d.severity in ("error", "warning")] == []
    fold = t.events[13].outputs[0]
    assert fold.dims == ("B*N*H", "F", "d_k")


def test_an_einops_repeat_is_named_the_same_on_every_trace():
    outcomes = []
    for _ in range(3):   # (the first fills einops' recipe cache; the later ones read it)
        t = traced_build(open_flamingo_masked_cross, "latents-outer-repeat", open_flamingo_masked_cross.DIMS[0])
        outcomes.append([d.kind for d in t.diagnostics if d.severity == "error"])
        mask = next(e for e in t.events if e.op == "reshape" and e.outputs[0].dims[-1] in ("S*N", None)
                    and e.outputs[0].shape[:3] == (1, 1, 1))
        assert mask.outputs[0].dims[-1] == "S*N"
    assert outcomes == [["mixed-axis"]] * 3
