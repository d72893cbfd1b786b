"""shapetrace/engine/axis_moves.py: indexing by a list of constant positions picks entries of a named axis.

transformers' padding check (``warn_if_padding_and_no_attention_mask``: ``input_ids[:, [-1, 0]]``, the last and
the first token of each row) ran in LayoutLM, DeBERTa-v2 and ConvBERT on first sight; on d04b913 its pick was
``(B, None)`` and each model was ``? ... not checked (unnamed axes): #0 __getitem__``."""

from __future__ import annotations

import torch

import shapetrace


def _picks(*indexes):
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32") as t:
        x = torch.randn(2, 6, 32)
        shapetrace.name(x, "B T D")
        for index in indexes:
            x[index]
    return t


def test_a_list_of_positions_picks_those_tokens():
    """Fails on d04b913 (``('B', None, 'D')`` and ``?``): the pick is named by its positions, keeps the tokens' role,
    and is checked."""
    t = _picks((slice(None), [-1, 0]), (slice(None), [0, 3, 5]))
    assert [e.outputs[0].dims for e in t.events] == [("B", "T[-1,0]", "D"), ("B", "T[0,3,5]", "D")]
    assert {t.namer.role(e.outputs[0].dims[1]) for e in t.events} == {"tokens"}
    assert t.report().verdict.mark == "✓"


def test_a_tensor_of_positions_and_a_nested_list_are_left_to_the_later_passes():
    """Only a flat list of ints is read here: positions in a tensor are named by the index pass (``T[index]``), and
    a nested list's two axes by element provenance where its positions walk ``T`` (the inner pair ``T%2``; the
    outer, 0 and 2, no whole piece of it: unnamed), as before this change."""
    t = _picks((slice(None), torch.tensor([5, 0])), (slice(None), [[0, 1], [2, 3]]))
    assert [e.outputs[0].dims for e in t.events] == [("B", "T[index]", "D"), ("B", None, "T%2", "D")]
    assert t.report().verdict.mark == "?"


def _kv_heads_widened(dim):
    """Key/value heads ``[B, H_kv, T, d_k]`` widened to H by ``unsqueeze(dim)``, ``expand`` and ``reshape`` (einops'
    ``repeat(k, "b g t d -> b (g r) t d")`` at ``dim=2``, ``"b g t d -> b (r g) t d"`` at ``dim=1``), then read by
    ``scaled_dot_product_attention`` with queries of H heads."""
    torch.manual_seed(0)
    q, k = torch.randn(2, 4, 6, 16), torch.randn(2, 2, 6, 16)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=64 H=4 H_kv=2") as t:
        shapetrace.name(q, "B H T d_k")
        shapetrace.name(k, "B H_kv T d_k")
        shape = (2, 2, 2, 6, 16)
        wide = k.unsqueeze(dim).expand(*shape).reshape(2, 4, 6, 16)
        torch.nn.functional.scaled_dot_product_attention(q, wide, wide)
    return t


def test_copies_expanded_just_before_the_kv_heads_tile_them():
    """Fails on 3224f6a (``('B', None, 'T', 'd_k')``, ``?``): the copies an ``expand`` grows just before ``H_kv``
    keep their name, so merged with the key/value heads they tile them (``2·H_kv``) and the GQA head order is
    checked (tests/corpus/public39/moirai_gqa.py ``kv-repeat-heads-outer``); grown after ``H_kv`` they are
    ``n_rep`` (``H_kv·n_rep``, repeat_kv's order), as before."""
    tiled = _kv_heads_widened(1)
    assert [e.outputs[0].dims for e in tiled.events if e.op in ("expand", "reshape")] == [
        ("B", "2", "H_kv", "T", "d_k"), ("B", "2*H_kv", "T", "d_k")]
    assert [d.kind for d in tiled.diagnostics if d.severity == "error"] == ["gqa-head-order"]
    grouped = _kv_heads_widened(2)
    assert [e.outputs[0].dims for e in grouped.events if e.op == "reshape"] == [("B", "H", "T", "d_k")]
    assert [d.kind for d in grouped.diagnostics if d.severity in ("error", "warning")] == []
