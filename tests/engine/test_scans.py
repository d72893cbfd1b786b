"""Scans read against the role of the axis they run along (issue 33 item 4): a cumsum over the heads is
a finding; Bloom's ``attention_mask.cumsum(-1)`` positions (over the tokens) are not. At distinct sizes
and at equal ones (B = T = H = 4): the axis comes from the recorded ``dim`` and the names, never sizes."""

from __future__ import annotations

import pytest
import torch

import shapetrace

SIZES = [(2, 5, 24, 3), (4, 4, 16, 4)]


def _weights(x, H):
    B, T, D = x.shape                                                   # (B, T, D)
    q = x.view(B, T, H, D // H).transpose(1, 2)                         # (B, H, T, d_k)
    return (q @ q.transpose(-2, -1)).softmax(dim=-1)                    # (B, H, T, T)


@pytest.mark.parametrize(("B", "T", "D", "H"), SIZES)
def test_a_cumsum_over_the_heads_is_a_finding(B, T, D, H):
    """The issue's held-out case: a cumulative attention (as in cumulative-attention / "attention
    rollout" code) written with dim=1, which on [B, H, T, T] runs over the heads."""
    x = torch.randn(B, T, D)
    with shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        shapetrace.name(x, "B T D")
        _weights(x, H).cumsum(dim=1)                                    # (B, H, T, T): over H
    assert [(d.kind, d.event) for d in t.diagnostics] == [("scan-over-wrong-axis", 5)]
    assert t.diagnostics[0].message == (
        f"cumsum #5 runs along axis 1 (H, the heads) of [B={B}, H={H}, T={T}, T={T}]: each of its {H} heads "
        "accumulates the ones before it, so the heads are no longer apart.")
    assert t.report().verdict.mark == "✗"


@pytest.mark.parametrize(("B", "T", "D", "H"), SIZES)
def test_a_cumsum_over_the_keys_and_bloom_positions_are_silent(B, T, D, H):
    """transformers' Bloom builds ALiBi positions as ``(attention_mask.cumsum(dim=-1) - 1) * mask``:
    a scan over the tokens."""
    x, mask = torch.randn(B, T, D), torch.ones(B, T)
    with shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        shapetrace.name(x, "B T D")
        shapetrace.name(mask, "B T")
        positions = (mask.cumsum(dim=-1) - 1) * mask                    # (B, T)
        _weights(x, H).cumsum(dim=-1)                                   # (B, H, T, T): over the keys
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []
    assert positions.shape == (B, T)


def _gated(x, H, dim):
    """Gated linear attention's key gates (fla's ``GatedLinearAttention``): ``logsigmoid(gk).cumsum(dim)`` on
    ``(B, H, T, d_k)``; ``dim=-2`` accumulates the decay over the tokens, ``dim=-1`` over a head's features."""
    B, T, D = x.shape                                                   # (B, T, D)
    gk = x.view(B, T, H, D // H).transpose(1, 2)                        # (B, H, T, d_k)
    return torch.nn.functional.logsigmoid(gk).cumsum(dim)              # (B, H, T, d_k)


@pytest.mark.parametrize(("B", "T", "D", "H"), SIZES)
def test_a_cumsum_over_a_heads_features_is_a_finding(B, T, D, H):
    """A head's features are a projection's outputs, in an order that means nothing: a prefix along them is
    public20/gla_chunk's ``gate-cumsum-over-features`` (✓ there before the rule: fails on f0e0295)."""
    x = torch.randn(B, T, D)
    with shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        shapetrace.name(x, "B T D")
        _gated(x, H, -1)
    d_k = D // H
    assert [(d.kind, d.event) for d in t.diagnostics] == [("scan-over-wrong-axis", 2)]
    assert t.diagnostics[0].message == (
        f"cumsum #2 runs along axis 3 (d_k, the features of a head) of [B={B}, H={H}, T={T}, d_k={d_k}]: each of "
        f"its {d_k} features of a head accumulates the ones before it, so the features of a head are no longer "
        "apart.")
    assert t.report().verdict.mark == "✗"


@pytest.mark.parametrize(("B", "T", "D", "H"), SIZES)
def test_a_cumsum_of_the_gates_over_the_tokens_is_silent(B, T, D, H):
    x = torch.randn(B, T, D)
    with shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        shapetrace.name(x, "B T D")
        _gated(x, H, -2)
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []
