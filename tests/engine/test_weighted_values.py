"""shapetrace/engine/rules/weighted_values.py: attention weights that weigh the values by their query axis.

On f714c55 (main) both slips below were ``✓`` (the einsum: Grok-1's ``"...hHTt,...Thd->...thHd"`` written for
``"...hHtT,..."``, tests/corpus/public16/grok1_softcap.py values-by-queries) or ``?`` (the transposed weights:
"not proven: #3 transpose moves two axes both named T past each other"); each is now ``✗ values-by-queries``."""

from __future__ import annotations

import pytest
import torch

import shapetrace

DIMS = "B=2 T=6 D=32 H=4"


def _traced(combine):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 6, 8) for _ in range(3))
    with shapetrace.trace(dims=DIMS) as t:
        for x in (q, k, v):
            shapetrace.name(x, "B H T d_k")
        w = (q @ k.transpose(-1, -2)).softmax(-1)                          # (B, H, T_q, T_k)
        combine(w, v)
    return t


def _errors(t):
    return [(d.kind, d.event) for d in t.diagnostics if d.severity == "error"]


@pytest.mark.parametrize("combine", [
    lambda w, v: w.transpose(-1, -2) @ v,                                  # bug: weights transposed
    lambda w, v: torch.einsum("bhts,bhtd->bhsd", w, v),                    # bug: contracts the query letter
], ids=["matmul-transposed", "einsum-query-letter"])
def test_weights_summed_over_their_queries_are_an_error(combine):
    t = _traced(combine)
    assert _errors(t) == [("values-by-queries", len(t.events) - 1)]
    message = next(d.message for d in t.diagnostics if d.kind == "values-by-queries")
    assert "over their query axis (axis " in message and "keeps their key axis (axis " in message


@pytest.mark.parametrize("combine", [
    lambda w, v: w @ v,
    lambda w, v: torch.einsum("bhts,bhsd->bhtd", w, v),
], ids=["matmul", "einsum"])
def test_weights_summed_over_their_keys_are_checked_and_pass(combine):
    t = _traced(combine)
    assert _errors(t) == []
    assert t.report().verdict.line.startswith("✓ checked all 4 ops")


# -- keys and values trading places (on 6d420fd, main, the swap below is ✓: tests/corpus/public21/hunyuan_cla.py
# cla-values-as-keys, Hunyuan-Large's cross-layer sharing unpacking the stored (k, v) pair as value, key) --------

class _Attention(torch.nn.Module):
    def __init__(self, order):
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj = (torch.nn.Linear(32, 32, bias=False) for _ in range(3))
        self.qkv_proj = torch.nn.Linear(32, 96, bias=False)
        self.order = order

    def forward(self, x):
        q, k, v = (p(x).view(2, 6, 4, 8).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        if self.order == "fused-qvk":   # CodeGen's qkv_proj, split query, value, key: its own order, not a swap
            q, v, k = (p.reshape(2, 6, 4, 8).transpose(1, 2) for p in self.qkv_proj(x).split(32, dim=-1))
            self.order = "kv"
        key, value = {"kv": (k, v), "vk": (v, k), "vv": (v, v)}[self.order]
        causal = torch.full((6, 6), float("-inf")).triu(1)
        w = ((q @ key.transpose(-1, -2)) / 8**0.5 + causal).softmax(-1)
        return (w @ value).transpose(1, 2).reshape(2, 6, 32)


def _module_traced(order):
    torch.manual_seed(0)
    model, x = _Attention(order).eval(), torch.randn(2, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims=DIMS) as t:
        model(x)
    return t


def test_keys_and_values_trading_places_are_an_error():
    t = _module_traced("vk")
    product = next(e.index for e in t.events if e.op == "matmul" and e.projections[1:2] == ("k",))
    assert _errors(t) == [("key-value-swapped", product)]
    message = next(d.message for d in t.diagnostics if d.kind == "key-value-swapped")
    assert message == (f"matmul #{product} weighs the output of the key projection [B=2, H=4, T=6, d_k=8] by "
                       f"weights whose scores (matmul #{product - 3}) took the value projection's output as their "
                       "keys: keys and values trade places.")


@pytest.mark.parametrize("order", ["kv", "vv", "fused-qvk"],
                         ids=["keys-then-values", "keys-tied-to-values", "fused-split-query-value-key"])
def test_keys_and_values_in_place_or_tied_are_not_this_error(order):
    """No error. Since lib14 (engine/unread.live_nodes) the tied and the fused variants are ``!``: each computes
    projections whose results reach nothing returned (``vv``: ``k_proj``, split into heads and dropped, the shape of
    a rotary handed the values in place of the keys; ``fused-qvk``: the three separate projections, replaced by
    ``qkv_proj``), a ``projection-bypassed`` warning (one per source line), not this error."""
    t = _module_traced(order)
    assert _errors(t) == []
    bypassed = {"kv": [], "vv": ["k_proj"], "fused-qvk": ["q_proj"]}[order]
    assert [(d.kind, t.events[d.event].module) for d in t.diagnostics if d.severity == "warning"] == [
        ("projection-bypassed", module) for module in bypassed]
    assert t.report().verdict.line[0] == ("!" if bypassed else "✓")


# -- values whose width nothing names (tests/corpus/public42/efficientvit_cga.py v-attn-untransposed: EfficientViT's
# ``v @ attn`` for ``v @ attn.transpose(-2, -1)``, its ``v`` ``[B, d, N]`` a third of a 1x1 conv's channels). On
# 5afe940 (main) it was ``?``: the rule asked for a named feature axis on the values -----------------------------

def _channels_first(transposed):
    torch.manual_seed(0)
    x = torch.randn(2, 5, 3, 3)
    with torch.no_grad(), shapetrace.trace(dims="B=2 Hp=3 Wp=3") as t:
        shapetrace.name(x, "B C Hp Wp")
        q, k, v = torch.nn.Conv2d(5, 16, 1)(x).split([4, 4, 8], dim=1)           # (B, c, Hp, Wp)
        q, k, v = q.flatten(2), k.flatten(2), v.flatten(2)                      # (B, c, N)
        attn = (q.transpose(-2, -1) @ k).softmax(dim=-1)                        # (B, N_q, N_k)
        v @ (attn.transpose(-2, -1) if transposed else attn)                    # (B, d, N)
    return t


@pytest.mark.parametrize(("transposed", "want"), [(False, ["values-by-queries"]), (True, [])],
                         ids=["v-at-attn", "v-at-attn-T"])
def test_values_of_an_unnamed_width_are_checked(transposed, want):
    assert [kind for kind, _ in _errors(_channels_first(transposed))] == want


# -- weights renormalised along the axis the product sums (on 0131a52, main, the renormalised product below is
# ``✗ values-by-queries``: tests/corpus/public43/pct_offset_attention.py, PCT's offset attention, whose
# ``softmax(energy, dim=-1)`` is divided by its own sum over the queries, ``attention.sum(dim=1)``, before
# ``bmm(x_v, attention)`` sums the queries) ---------------------------------------------------------------------

@pytest.mark.parametrize("product", [
    lambda w, v: v.transpose(-1, -2) @ w,                                  # PCT: bmm(x_v, attention), [B, d, T_k]
    lambda w, v: torch.einsum("bhts,bhtd->bhsd", w, v),                    # the query letter contracted
], ids=["matmul", "einsum"])
@pytest.mark.parametrize(("renormalise", "want"), [
    (lambda w: w / (1e-9 + w.sum(dim=-2, keepdim=True)), []),              # a weighted mean over the queries
    (lambda w: w, ["values-by-queries"]),                                  # the same product, not renormalised
    (lambda w: w / (1e-9 + w.sum(dim=-1, keepdim=True)), ["values-by-queries"]),   # renormalised over the keys
], ids=["renormalised-over-queries", "not-renormalised", "renormalised-over-keys"])
def test_weights_renormalised_along_the_summed_axis_are_a_weighted_mean(product, renormalise, want):
    t = _traced(lambda w, v: product(renormalise(w), v))
    assert [kind for kind, _ in _errors(t)] == want


def test_weights_reweighted_across_heads_and_normed_are_still_the_weights():
    """DeepViT's re-attention (lucidrains/vit-pytorch ``deepvit.py``; tests/corpus/public52/deepvit_reattention.py):
    the softmax's weights mixed across heads by a learned ``[H, H]`` matrix and normed over the heads before they
    weigh the values. Rows whose other operands entered (the matrix, the norm's weight and bias) carry the weights
    on, so the way back from the norm permuted ``(0, 3, 2, 1)`` (queries and keys traded) is found; on 8b5bbf79 it
    was ``?``, nothing checked after the mixing."""
    from tests.corpus.helpers import error_kinds, traced_build
    from tests.corpus.public52 import deepvit_reattention

    bug = traced_build(deepvit_reattention, "norm-back-transposed", DIMS)
    assert _errors(bug) == [("values-by-queries", 15)]
    # the heads' weights talking is the head-mixing note's evidence, not the error's
    found = {d.kind: d.message for d in traced_build(deepvit_reattention, "norm-back-transposed", DIMS,
                                                      dependencies=True).diagnostics}
    assert "On the values" not in found["values-by-queries"]
    assert "On the values: head 0 of the output depends on heads 0, 1, 2 and 3" in found["heads-mixed-by-matrix"]
    assert error_kinds(traced_build(deepvit_reattention, "", DIMS)) == []
