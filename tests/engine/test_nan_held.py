"""shapetrace/engine/nan_held.py: all-NaN attention rows that the code itself replaces are no error.

TransformerLensOrg/TransformerLens (issue #1609's model, tests/corpus/reports4/lens_left_pad_positions.py)
masks a left-padded batch with ``-inf``, so a pad query's row is ``0 / 0``, and then writes
``torch.where(torch.isnan(pattern), torch.zeros_like(pattern), pattern)`` before the value product: on
90e1ad1 that correct code was a false ``✗ nan-rows`` ("the NaN then spreads into the output")."""

from __future__ import annotations

import torch

import shapetrace

DIMS = "B=2 T=6 D=32 H=4"


def _attention(clear):
    """Scores ``(B, H, T, T)`` with a causal mask and the last row left-padded by 2: its queries 0 and 1
    see no key. ``clear(pattern) -> weights`` is what the code does with the softmax before ``@ v``."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 6, 8) for _ in range(3))
    pad = torch.ones(2, 6, dtype=torch.bool)
    pad[-1, :2] = False
    with torch.no_grad(), shapetrace.trace(dims=DIMS) as t:
        for x in (q, k, v):
            shapetrace.name(x, "B H T d_k")
        scores = q @ k.transpose(-1, -2) / 8 ** 0.5
        keep = torch.tril(torch.ones(6, 6, dtype=torch.bool))[None, None] & pad[:, None, None, :]
        pattern = scores.masked_fill(~keep, float("-inf")).softmax(dim=-1)
        out = clear(pattern) @ v
    return t, out


def _kinds(t):
    return [d.kind for d in t.diagnostics if d.severity == "error"]


def test_rows_replaced_by_where_isnan_are_no_error():
    t, out = _attention(lambda p: torch.where(torch.isnan(p), torch.zeros_like(p), p))
    assert not torch.isnan(out).any()
    assert _kinds(t) == []
    assert t.nan_rows == []


def test_rows_carried_through_dropout_then_filled_are_no_error():
    t, out = _attention(lambda p: torch.nn.functional.dropout(p, 0.1, training=True).masked_fill(torch.isnan(p), 0.0))
    assert not torch.isnan(out).any()
    assert _kinds(t) == []


def test_rows_used_as_they_are_stay_an_error_though_a_cleared_copy_was_made():
    def unused_copy(p):
        torch.where(torch.isnan(p), torch.zeros_like(p), p)   # made, never used: the product reads p itself
        return p

    t, out = _attention(unused_copy)
    assert torch.isnan(out).any()
    assert _kinds(t) == ["nan-rows"]
    assert sorted({(b, q) for b, _h, q in t.nan_rows}) == [(1, 0), (1, 1)]


def test_rows_never_cleared_stay_an_error():
    t, out = _attention(lambda p: p)
    assert _kinds(t) == ["nan-rows"]
    assert len(t.nan_rows) == 8   # sequence 1, queries 0 and 1, in 4 heads
