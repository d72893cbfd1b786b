"""engine/rules/scales.py: the scale of attention's scores read against the width their product sums over.
The other scale checks (1/√D, 1/√H, a pre-scaled SDPA, a scale that changes) are tested in
tests/engine/test_masks.py, where they lived before lib15 moved them."""

from __future__ import annotations

import pytest
import torch

import shapetrace


class _Attention(torch.nn.Module):
    """q, k and v from modules named ``q_proj``, ``k_proj``, ``v_proj`` (what tags a tensor as the queries)."""

    def __init__(self, D, H, scale_scores, scale_queries):
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj = (torch.nn.Linear(D, D) for _ in range(3))
        self.H, self.scale_scores, self.scale_queries = H, scale_scores, scale_queries

    def forward(self, x):
        B, T, D = x.shape
        d = D // self.H
        q = self.q_proj(x).view(B, T, self.H, d).transpose(1, 2) * self.scale_queries   # (B, H, T, d_k)
        k = self.k_proj(x).view(B, T, self.H, d).transpose(1, 2)                        # (B, H, T, d_k)
        scores = q @ k.transpose(-1, -2)                                                # (B, H, T, T)
        for factor in self.scale_scores:
            scores = scores * factor
        return scores.softmax(dim=-1) @ self.v_proj(x).view(B, T, self.H, d).transpose(1, 2)


def _found(x, H, scale_scores, scale_queries=1.0):
    torch.manual_seed(0)
    B, T, D = x.shape
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        shapetrace.name(x, "B T D")
        _Attention(D, H, scale_scores, scale_queries)(x)
    return t, [(d.severity, d.kind, d.message) for d in t.diagnostics if d.kind == "scale-not-head-dim"]


@pytest.mark.parametrize(("B", "T", "D", "H"), [(2, 5, 24, 3), (4, 4, 32, 4)])
def test_scores_scaled_by_one_over_root_d_k_twice_are_a_warning(B, T, D, H):
    """BLIP's ``attention_scores * self.scale`` written twice (a bug planted in transformers' code: ``✓`` on
    eefe532, the known miss lib14 recorded). Fails on eefe532: no finding."""
    d = D // H
    x = torch.randn(B, T, D)
    t, found = _found(x, H, (d ** -0.5, d ** -0.5))
    assert [(s, k) for s, k, _ in found] == [("warning", "scale-not-head-dim")]
    assert found[0][2] == (f"the scores of #7 are scaled by 1/√{d} = {d ** -0.5:.4g} ({d}: the width their product "
                           f"sums over) twice: 1/{d} in all, and the softmax is sharper than intended by √{d}.")
    assert t.report().verdict.mark == "!"
    t, found = _found(x, H, (d ** -0.5,), scale_queries=d ** -0.5)
    assert [m.split(" (after")[0] for _, _, m in found] == [
        f"the scores of #7 are scaled by 1/√{d} = {d ** -0.5:.4g} ({d}: the width their product sums over) "
        "after their queries were scaled by it"]


@pytest.mark.parametrize(("B", "T", "D", "H"), [(2, 5, 24, 3), (4, 4, 32, 4)])
def test_one_scale_or_quarter_roots_on_each_side_are_silent(B, T, D, H):
    """Scaled once by 1/√d_k, once by 1/d_k (Gemma 2's ``query_pre_attn_scalar`` can make it so: a choice of
    scale), or queries and scores each by 1/d_k^¼ (Nystromformer's split of the one scale): no finding."""
    d = D // H
    x = torch.randn(B, T, D)
    for scores, queries in (((d ** -0.5,), 1.0), ((1 / d,), 1.0), ((d ** -0.25,), d ** -0.25)):
        t, found = _found(x, H, scores, queries)
        assert found == [], (scores, queries)
        assert t.report().verdict.mark == "✓", (scores, queries, t.report().verdict.line)


def test_each_call_scaled_once_is_silent_when_the_next_queries_come_from_its_output():
    """A decode step's queries are projected from the step before's output: that step's own scaling is no second
    scaling of these scores (the first draft of the rule walked back through the projection: a false warning on
    shapetrace's own ``run --decode 3``). The walk stops at the row that made the queries."""
    torch.manual_seed(0)
    B, T, D, H = 2, 5, 24, 3
    layer = _Attention(D, H, ((D // H) ** -0.5,), 1.0)
    out_proj = torch.nn.Linear(D, D)
    x = torch.randn(B, T, D)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        shapetrace.name(x, "B T D")
        y = layer(x).transpose(1, 2).reshape(B, T, D)                                 # (B, T, D)
        layer(out_proj(y))
    assert [d.kind for d in t.diagnostics if d.kind == "scale-not-head-dim"] == []
    assert t.report().verdict.mark == "✓", t.report().verdict.line


def _fused_with_scale(scale, D=64, H=4):
    torch.manual_seed(0)
    x = torch.randn(2, 6, D)
    with torch.no_grad(), shapetrace.trace(dims=f"B=2 T=6 D={D} H={H}") as t:
        q = x.view(2, 6, H, D // H).transpose(1, 2)
        torch.nn.functional.scaled_dot_product_attention(q, q, q, scale=scale)
    return t


def test_a_fused_attention_given_one_over_root_D_for_heads_d_k_wide_is_a_warning():
    """``scaled_dot_product_attention(q, k, v, scale=dim ** -0.5)`` with heads of d_k (tests/corpus/public39/
    moirai_gqa.py ``scale-by-model-width``): on 9b1eb03 only a scaling by multiplication was read, and this was
    ``? 30 of 30`` (a mask that hid nothing) like the correct file. The default scale, 1/√d_k given, and heads as
    wide as the model scaled by 1/√D stay silent."""
    t = _fused_with_scale(64 ** -0.5)
    assert [(d.severity, d.kind) for d in t.diagnostics] == [("warning", "scale-not-head-dim")]
    assert t.diagnostics[0].message == (
        "scaled_dot_product_attention #2 is given scale=0.125, 1/√64 (the model width D), for queries and keys 16 "
        "wide (one head, d_k); attention divides by √d_k, 0.25. With √D the softmax is flatter than intended by a "
        "factor √H = 2.")
    for scale in (None, 16 ** -0.5):
        assert [d.kind for d in _fused_with_scale(scale).diagnostics] == []
    wide = _fused_with_scale(64 ** -0.5, D=64, H=1)   # (one head as wide as the model: 1/√D is 1/√d_k)
    assert [d.kind for d in wide.diagnostics if d.severity in ("error", "warning")] == []
