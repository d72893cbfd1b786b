"""Grouped-query attention's heads contract, measured on the values (engine/heads.py, head_structure.py;
issue 33 item 5): query head h may read only key/value head h // n_rep (the order repeat_interleave and
Llama's repeat_kv give), whether or not H_kv is declared (the key/value splits are then found from the
structure, their heads followed through repeat_kv or SDPA's enable_gqa). Multi-query attention (one
key/value head) still checks that the query heads stay apart. Each bug has a correct twin, at distinct
sizes and at B = T = H = 4."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import shapetrace
from shapetrace.engine.dependencies import BATCH, CAUSAL, OWN_TOKEN
from shapetrace.engine.heads import HEADS

SIZES = [(3, 5), (4, 4)]
D, H = 32, 4


def repeat_kv(hidden_states, n_rep):
    """transformers' models/llama/modeling_llama.py repeat_kv (= repeat_interleave(x, n_rep, dim=1))."""
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape             # (B, H_kv, T, d)
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)   # (B, H, T, d)


class _GroupedProjections(nn.Module):
    """transformers' Llama-family projections: H query heads, ``kv_heads`` key/value heads, no biases."""

    def __init__(self, kv_heads=2, bug=None):
        super().__init__()
        self.head_dim, self.kv_heads, self.bug = D // H, kv_heads, bug
        self.q_proj = nn.Linear(D, H * self.head_dim, bias=False)
        self.k_proj = nn.Linear(D, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(D, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(H * self.head_dim, D, bias=False)


class LlamaAttention(_GroupedProjections):
    """transformers' LlamaAttention with eager_attention_forward (no rotary): ``hidden_shape =
    (*input_shape, -1, head_dim)``, repeat_kv, softmax(q kᵀ) v, ``reshape(*input_shape, -1)`` into
    o_proj. Bugs: ``repeat`` tiles the key/value heads with ``k.repeat(1, n_rep, 1, 1)`` (query head h
    then reads key/value head h mod H_kv; repeat_kv's own docstring says it equals
    ``torch.repeat_interleave(x, dim=1, repeats=n_rep)``, the order the weights were trained with);
    ``einsum`` types the heads index twice in the value product (every query head reads every head's
    values)."""

    def forward(self, hidden_states):
        input_shape = hidden_states.shape[:-1]                                     # (B, T)
        hidden_shape = (*input_shape, -1, self.head_dim)                           # (B, T, -1, d)
        q = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)          # (B, H, T, d)
        k = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)          # (B, H_kv, T, d)
        v = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)          # (B, H_kv, T, d)
        n_rep = H // self.kv_heads
        if self.bug == "repeat":
            k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)              # (B, H, T, d), tiled
        else:
            k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)                        # (B, H, T, d)
        w = F.softmax(torch.matmul(q, k.transpose(2, 3)) * self.head_dim ** -0.5, dim=-1)   # (B, H, T, T)
        if self.bug == "einsum":
            out = torch.einsum("bhqk,bgkd->bhqd", w, v)                            # (B, H, T, d), heads summed
        else:
            out = torch.matmul(w, v)                                               # (B, H, T, d)
        return self.o_proj(out.transpose(1, 2).reshape(*input_shape, -1))         # (B, T, D)


class MistralReference(nn.Module):
    """mistral-inference's one_file_ref.py Attention (no cache, no rotary): ``xk.view(B, T, n_kv_heads,
    head_dim)``, ``repeat_kv`` as ``torch.repeat_interleave(keys, repeats, dim=2)`` on the (B, T, H, d)
    layout, then the heads moved forward for the products. Bug ``repeat``: ``keys.repeat(1, 1, n_rep, 1)``
    (tiled)."""

    def __init__(self, kv_heads=2, bug=None):
        super().__init__()
        self.head_dim, self.kv_heads, self.bug = D // H, kv_heads, bug
        self.wq = nn.Linear(D, H * self.head_dim, bias=False)
        self.wk = nn.Linear(D, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(D, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(H * self.head_dim, D, bias=False)

    def forward(self, x):
        bsz, seqlen, _ = x.shape                                                   # (B, T, D)
        xq = self.wq(x).view(bsz, seqlen, H, self.head_dim)                        # (B, T, H, d)
        xk = self.wk(x).view(bsz, seqlen, self.kv_heads, self.head_dim)            # (B, T, H_kv, d)
        xv = self.wv(x).view(bsz, seqlen, self.kv_heads, self.head_dim)            # (B, T, H_kv, d)
        n_rep = H // self.kv_heads
        if self.bug == "repeat":
            key, val = xk.repeat(1, 1, n_rep, 1), xv.repeat(1, 1, n_rep, 1)        # (B, T, H, d), tiled
        else:
            key = torch.repeat_interleave(xk, repeats=n_rep, dim=2)                # (B, T, H, d)
            val = torch.repeat_interleave(xv, repeats=n_rep, dim=2)                # (B, T, H, d)
        xq, key, val = xq.transpose(1, 2), key.transpose(1, 2), val.transpose(1, 2)   # (B, H, T, d)
        scores = torch.matmul(xq, key.transpose(2, 3)) * self.head_dim ** -0.5     # (B, H, T, T)
        output = torch.matmul(F.softmax(scores.float(), dim=-1).type_as(xq), val)  # (B, H, T, d)
        return self.wo(output.transpose(1, 2).contiguous().view(bsz, seqlen, -1))  # (B, T, D)


class SdpaGroupedQuery(_GroupedProjections):
    """torch.nn.functional.scaled_dot_product_attention with ``enable_gqa=True`` (torch >= 2.5: key and
    value keep their H_kv heads, query head h reads key/value head h // (H // H_kv)), causal, as
    transformers' sdpa_attention_forward calls it. Bug ``repeat``: the heads tiled with ``repeat`` before
    a plain SDPA call."""

    def forward(self, hidden_states):
        input_shape = hidden_states.shape[:-1]                                     # (B, T)
        hidden_shape = (*input_shape, -1, self.head_dim)                           # (B, T, -1, d)
        q = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)          # (B, H, T, d)
        k = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)          # (B, H_kv, T, d)
        v = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)          # (B, H_kv, T, d)
        if self.bug == "repeat":
            n_rep = H // self.kv_heads
            k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)              # (B, H, T, d), tiled
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)          # (B, H, T, d)
        else:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)   # (B, H, T, d)
        return self.o_proj(out.transpose(1, 2).reshape(*input_shape, -1))         # (B, T, D)


def _traced(model, B, T, extra=""):
    torch.manual_seed(0)
    x = torch.randn(B, T, D)
    with shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}{extra}") as t:
        t.check_dependencies()
        shapetrace.name(x, "B T D")
        model(x)
    return t


def _measured(t):
    """The heads findings measured on the values (the witness itself, folded or not)."""
    return [d for d in t._measured()[0] if d.kind in ("heads-mix", "heads-talk")]


def _tiled(h, tensor):
    return (f"measured on the values: head {h} of the output depends on head 1 of the {tensor} (output head 2 "
            f"too), but grouped-query attention pairs query head 1 with key/value head 0 (query heads 0-1 share "
            "it, as repeat_interleave and Llama's repeat_kv lay them out): the key/value heads were tiled in the "
            "wrong order.")


@pytest.mark.parametrize(("B", "T"), SIZES)
@pytest.mark.parametrize(("model", "held"), [
    (lambda: LlamaAttention(kv_heads=2), [BATCH, OWN_TOKEN, HEADS]),
    (lambda: LlamaAttention(kv_heads=1), [BATCH, OWN_TOKEN, HEADS]),
    (lambda: MistralReference(kv_heads=2), [BATCH, OWN_TOKEN, HEADS]),
    (lambda: MistralReference(kv_heads=1), [BATCH, OWN_TOKEN, HEADS]),
    (lambda: SdpaGroupedQuery(kv_heads=2), [BATCH, OWN_TOKEN, CAUSAL, HEADS]),
    (lambda: SdpaGroupedQuery(kv_heads=1), [BATCH, OWN_TOKEN, CAUSAL, HEADS]),
], ids=["llama-gqa", "llama-mqa", "mistral-gqa", "mistral-mqa", "sdpa-gqa", "sdpa-mqa"])
def test_grouped_heads_are_measured_without_h_kv_declared_and_stay_apart(model, held, B, T):
    """Only H is declared: the key/value heads axis has no name, and the contract is still measured
    (was: "not measured: heads (the model cannot take a copy of its batch per head)"). Mistral's one
    key/value head repeated with repeat_interleave is copies of one element: it pairs with the query
    heads as a broadcast does (was: a false batch-mismatch, "batch axis H of the first lines up with 4")."""
    t = _traced(model(), B, T)
    assert _measured(t) == []
    assert t.contracts == held
    assert t.unmeasured == []
    assert t.report().verdict.line.endswith(f"held on the values: {', '.join(held)}")


@pytest.mark.parametrize(("B", "T"), SIZES)
@pytest.mark.parametrize("model", [lambda: LlamaAttention(bug="repeat"), lambda: MistralReference(bug="repeat"),
                                   lambda: SdpaGroupedQuery(bug="repeat")], ids=["llama", "mistral", "sdpa"])
def test_tiled_key_value_heads_are_a_finding_on_the_values_without_names(model, B, T):
    """No rule sees the tiled order without H_kv; the values do, and say which heads leaked (under
    SDPA's causal mask too, where the first token reads nothing but the values: not "the merge does not
    undo the split")."""
    t = _traced(model(), B, T)
    found = _measured(t)
    assert [d.kind for d in found] == ["heads-mix", "heads-mix"]
    assert [d.message for d in found] == [_tiled(1, "keys"), _tiled(1, "values")]
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["heads-mix", "heads-mix"]
    assert t.report().verdict.mark == "✗"
    assert HEADS not in t.contracts


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_a_value_product_over_every_head_is_found_in_grouped_query_attention(B, T):
    t = _traced(LlamaAttention(bug="einsum"), B, T)
    found = _measured(t)
    assert [d.kind for d in found] == ["heads-mix"]
    assert found[0].message.startswith(
        "measured on the values: head 0 of the output depends on heads 0 and 1 of the values (output heads "
        "1, 2 and 3 too): heads mix between the split (#1 view, #4 view, #7 view) and the merge (#20 reshape).")


@pytest.mark.parametrize(("B", "T"), SIZES)
@pytest.mark.parametrize("model", [lambda: LlamaAttention(bug="repeat"), lambda: SdpaGroupedQuery(bug="repeat")],
                         ids=["llama", "sdpa"])
def test_with_h_kv_declared_the_names_rule_reports_the_tiling_once_and_the_values_back_it(model, B, T):
    """The gqa-head-order rule finds the tiling from the names; the values' leak is folded into it as
    evidence, not a second error."""
    t = _traced(model(), B, T, " H_kv=2")
    errors = [d for d in t.diagnostics if d.severity == "error"]
    assert [d.kind for d in errors] == ["gqa-head-order"]
    assert (
        " On the values: head 1 of the output depends on head 1 of the keys (output head 2 too), but "
        "grouped-query attention pairs query head 1 with key/value head 0 (query heads 0-1 share it, as "
        "repeat_interleave and Llama's repeat_kv lay them out): the key/value heads were tiled in the wrong "
        "order.") in errors[0].message


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_grouped_query_attention_is_measured_at_module_boundaries_one_head_per_copy(B, T):
    """A copy that moves a key/value head changes every query head of its group, so at module boundaries
    each copy moves one query head, or one key/value head in both k and v (engine/head_hooks.py)."""
    from shapetrace.engine import dependencies

    probes = []
    measure = dependencies.measure

    def spy(probe):
        probes.append(probe)
        return measure(probe)

    dependencies.measure = spy
    try:
        held = _traced(LlamaAttention(kv_heads=2), B, T).contracts   # (measured when first read)
    finally:
        dependencies.measure = measure
    assert held == [BATCH, OWN_TOKEN, HEADS]
    assert [[(s.tensor, s.heads) for s in plan.splits] for plan in probes[0].heads] == [[("q", 4), ("k", 2),
                                                                                         ("v", 2)]]
    assert [h.moves for h in probes[0].hooks] == [(((0,), (), ()), ((1,), (), ()), ((2,), (), ()), ((3,), (), ()),
                                                   ((), (0,), (0,)), ((), (1,), (1,)))]


@pytest.mark.parametrize(("B", "T"), SIZES)
@pytest.mark.parametrize(("model", "found"), [
    (lambda: LlamaAttention(kv_heads=2), []),
    (lambda: LlamaAttention(kv_heads=1), []),
    (lambda: MistralReference(kv_heads=2), []),
    (lambda: SdpaGroupedQuery(kv_heads=2), []),
    (lambda: LlamaAttention(bug="repeat"), [_tiled(1, "keys"), _tiled(1, "values")]),
    (lambda: SdpaGroupedQuery(bug="repeat"), [_tiled(1, "keys"), _tiled(1, "values")]),
], ids=["llama-gqa", "llama-mqa", "mistral-gqa", "sdpa-gqa", "llama-tiled", "sdpa-tiled"])
def test_grouped_heads_are_found_from_the_structure_alone_without_any_name(model, found, B, T):
    """No --dims and no names: the splits, the copies of the key/value heads and the merge are read
    from the structure, and the contract is measured on the traced input itself."""
    torch.manual_seed(0)
    x = torch.randn(B, T, D)
    with shapetrace.trace() as t:
        t.check_dependencies()
        model()(x)
    assert [d.message for d in _measured(t)] == found
    assert t.contracts == ([] if found else [HEADS])
    assert t.unmeasured == [   # (said since the token contracts are never silently unmeasured)
        "batch entries stay apart, each token depends on itself (the input's batch and token axes have no names)"]
