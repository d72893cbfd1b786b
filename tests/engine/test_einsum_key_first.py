"""Scores written keys first (shapetrace/engine/axis_compute.py ``_query_and_key``): Keras's
``MultiHeadAttention`` takes ``einsum("aecd,abcd->acbe", key, query)``, scores ``[B, H, T_q, T_k]`` whose keys
come from the FIRST operand. On 51f5266 the operands' order alone named the last axis the queries, and the
softmax over it was a false ``softmax-wrong-axis`` (this test fails there); the operands' order and the scores'
layout now disagree, so neither names the axes. The usual order (``bhid,bhjd->bhij``) still names them: a
softmax over its queries stays an error."""

from __future__ import annotations

import torch

import shapetrace


def _attend(x, eq, first_is_key, dim):
    B, T, D = x.shape
    q = x.view(B, T, 2, D // 2)                                         # (B, T, H, d_k)
    k = (x * 2).view(B, T, 2, D // 2)                                   # (B, T, H, d_k)
    scores = torch.einsum(eq, k, q) if first_is_key else torch.einsum(eq, q, k)  # (B, H, T, T)
    return torch.einsum("acbe,aecd->abcd", scores.softmax(dim=dim), q)  # (B, T, H, d_k)


def _kinds(eq, first_is_key, dim):
    x = torch.randn(2, 5, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=5 D=8 H=2") as t:
        shapetrace.name(x, "B T D")
        _attend(x, eq, first_is_key, dim)
    return [d.kind for d in t.diagnostics if d.severity == "error"]


def test_keras_key_first_scores_are_not_read_as_query_last():
    assert _kinds("aecd,abcd->acbe", first_is_key=True, dim=-1) == []


def test_query_first_scores_keep_their_names():
    assert _kinds("abcd,aecd->acbe", first_is_key=False, dim=-2) == ["softmax-wrong-axis"]
