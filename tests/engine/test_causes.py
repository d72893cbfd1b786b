"""One finding per bug, at its source (engine/rules/causes.py; issue 35, the verdict bullet): findings that
share a root cause fold into one at the op that made the wrong layout, naming the other places it shows;
a finding that explains more silences a generic one on the same op (``Kind.rank``)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import shapetrace
from shapetrace.engine.kinds import Kind


def loud(t) -> list:
    return [d for d in t.diagnostics if d.severity in ("error", "warning")]


def index_of(t, op: str, nth: int = 0) -> int:
    return [e.index for e in t.events if e.op == op][nth]


# ---------------------------------------------------------------------------
# grouped-query attention: the kv heads tiled by repeat (HF Llama's repeat_kv is the right order)
# ---------------------------------------------------------------------------

def repeat_kv(x, n_rep: int, how: str):
    """huggingface/transformers models/llama/modeling_llama.py ``repeat_kv`` ("right": expand, then
    reshape), its documented equivalent ``torch.repeat_interleave(x, dim=1, repeats=n_rep)``, and the
    bug it prevents: ``x.repeat(1, n_rep, 1, 1)`` tiles the heads (0, 1, 0, 1, ...)."""
    B, H_kv, T, d = x.shape                                                        # (B, H_kv, T, d_k)
    if how == "right":
        return x[:, :, None, :, :].expand(B, H_kv, n_rep, T, d).reshape(B, H_kv * n_rep, T, d)  # (B, H, T, d_k)
    if how == "interleave":
        return x.repeat_interleave(n_rep, dim=1)                                   # (B, H, T, d_k)
    return x.repeat(1, n_rep, 1, 1)                                                # (B, n_rep·H_kv, T, d_k)


class LlamaStyleGQA(nn.Module):
    """HF Llama's eager attention: q, k, v projections, repeat_kv, then q @ kᵀ and weights @ v."""

    def __init__(self, D: int, H: int, H_kv: int, how: str):
        super().__init__()
        self.H, self.H_kv, self.d, self.how = H, H_kv, D // H, how
        self.q_proj = nn.Linear(D, H * self.d, bias=False)
        self.k_proj = nn.Linear(D, H_kv * self.d, bias=False)
        self.v_proj = nn.Linear(D, H_kv * self.d, bias=False)
        self.o_proj = nn.Linear(H * self.d, D, bias=False)

    def forward(self, x):
        B, T, _ = x.shape                                                          # (B, T, D)
        q = self.q_proj(x).view(B, T, self.H, self.d).transpose(1, 2)              # (B, H, T, d_k)
        k = self.k_proj(x).view(B, T, self.H_kv, self.d).transpose(1, 2)           # (B, H_kv, T, d_k)
        v = self.v_proj(x).view(B, T, self.H_kv, self.d).transpose(1, 2)           # (B, H_kv, T, d_k)
        n_rep = self.H // self.H_kv
        k, v = repeat_kv(k, n_rep, self.how), repeat_kv(v, n_rep, self.how)        # (B, H, T, d_k)
        weights = (q @ k.transpose(2, 3) / self.d ** 0.5).softmax(dim=-1)          # (B, H, T, T)
        y = weights @ v                                                            # (B, H, T, d_k)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, -1))                    # (B, T, D)


GQA_SIZES = [(2, 6, 8, 2, 8), (4, 4, 4, 2, 4)]   # distinct sizes; B = T = H = d_k = 4


def traced_gqa(B, T, H, H_kv, d, how):
    model = LlamaStyleGQA(H * d, H, H_kv, how)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={H * d} H={H} H_kv={H_kv}") as t:
        model(torch.randn(B, T, H * d))
    return t


@pytest.mark.parametrize("B,T,H,H_kv,d", GQA_SIZES, ids=["distinct", "B=T=H=d_k"])
def test_kv_heads_tiled_by_repeat_are_one_error_at_the_repeat(B, T, H, H_kv, d):
    """Was four errors (batch-mismatch "permute or transpose" and gqa-head-order at each matmul)."""
    t = traced_gqa(B, T, H, H_kv, d, "tiles")
    repeat, scores, out = index_of(t, "repeat"), index_of(t, "matmul", 0), index_of(t, "matmul", 1)
    (d_,) = loud(t)
    n_rep = H // H_kv
    assert (d_.kind, d_.severity, d_.event, d_.also) == ("gqa-head-order", "error", repeat, (scores, out))
    assert d_.message == (
        f"repeat #{repeat} makes [B={B}, {n_rep}·H_kv={H}, T={T}, d_k={d}]: its {H} heads are the {H_kv} key/value "
        f"heads tiled {n_rep} times (head j is key/value head j mod {H_kv}). matmul #{scores} pairs them with q "
        f"[B={B}, H={H}, T={T}, d_k={d}], whose head h is meant to read key/value head h // {n_rep}: query head 1 "
        f"meets key/value head 1 instead of 0. The shapes agree, so torch cannot complain. "
        f"Also seen at #{out} matmul.")   # (the scores matmul is named in it)
    assert d_.fix.startswith("Repeat each key/value head in place: .repeat_interleave(n_rep, dim=1)")
    assert t.report().verdict.line == "✗ 1 error: the findings above say where and how to fix it"


@pytest.mark.parametrize("how", ["right", "interleave"])
@pytest.mark.parametrize("B,T,H,H_kv,d", GQA_SIZES, ids=["distinct", "B=T=H=d_k"])
def test_kv_heads_repeated_in_place_are_silent(B, T, H, H_kv, d, how):
    """The correct twins: Llama's repeat_kv and repeat_interleave."""
    assert loud(traced_gqa(B, T, H, H_kv, d, how)) == []


def test_a_symptom_on_the_same_op_is_explained_by_the_cause():
    """batch-mismatch ("permute or transpose one of them") is what gqa-head-order explains: on the same
    matmuls, over a layout made by the same repeat, it is never said beside it."""
    t = traced_gqa(2, 6, 8, 2, 8, "tiles")
    assert [d.kind for d in t.diagnostics if d.kind == "batch-mismatch"] == []
    assert Kind.GQA_HEAD_ORDER.rank > Kind.BATCH_MISMATCH.rank


# ---------------------------------------------------------------------------
# nanoGPT's CausalSelfAttention without its transpose: q.view(B, nh, T, hs)
# ---------------------------------------------------------------------------

class NanoGPTAttention(nn.Module):
    """karpathy/nanoGPT model.py ``CausalSelfAttention.forward`` (its manual path), with the bug
    ``view(B, nh, T, hs)`` in place of ``view(B, T, nh, hs).transpose(1, 2)`` when ``bug`` is set."""

    def __init__(self, n_embd: int, n_head: int, bug: bool):
        super().__init__()
        self.n_head, self.n_embd, self.bug = n_head, n_embd, bug
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def heads(self, x, B, T, C):
        if self.bug:
            return x.reshape(B, self.n_head, T, C // self.n_head)                  # (B, nh, T, hs) mixed
        return x.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)         # (B, nh, T, hs)

    def forward(self, x):
        B, T, C = x.size()                                                         # (B, T, C)
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)                         # (B, T, C) each
        q, k, v = self.heads(q, B, T, C), self.heads(k, B, T, C), self.heads(v, B, T, C)
        att = (q @ k.transpose(-2, -1)) * (1.0 / k.size(-1) ** 0.5)                # (B, nh, T, T)
        att = torch.softmax(att, dim=-1)                                           # (B, nh, T, T)
        y = att @ v                                                                # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)                           # (B, T, C)
        return self.c_proj(y)                                                      # (B, T, C)


#: distinct sizes; B = H = hs = 4 (at T = H the reshape is bit for bit view(B, T, nh, hs): a missing transpose)
NANOGPT_SIZES = [(2, 6, 8, 8), (4, 6, 4, 4)]


def traced_nanogpt(B, T, H, hs, bug):
    model = NanoGPTAttention(H * hs, H, bug)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={H * hs} H={H}") as t:
        model(torch.randn(B, T, H * hs))
    return t


@pytest.mark.parametrize("B,T,H,hs", NANOGPT_SIZES, ids=["distinct", "B=H=hs"])
def test_nanogpt_heads_split_without_transpose_is_one_error_at_the_split(B, T, H, hs):
    """Was ``✗ 3 errors``: the split, the merge that inherits its mix, the projection over it."""
    t = traced_nanogpt(B, T, H, hs, bug=True)
    split, merge, proj = index_of(t, "reshape"), index_of(t, "view"), index_of(t, "linear", 1)
    (d,) = loud(t)
    assert (d.kind, d.event, d.also) == ("mixed-axis", split, (merge, proj))
    assert d.message.startswith(f"reshape #{split} turns [B={B}, T={T}, D={H * hs}] into ")
    assert d.message.endswith(f"Also seen at #{merge} view, #{proj} linear.")
    assert d.fix == ("Split the features where they are: view(B, T, H, d_k), then transpose(1, 2) to move the "
                     "heads ahead of the tokens.")
    assert t.report().verdict.line == "✗ 1 error: the findings above say where and how to fix it"


@pytest.mark.parametrize("B,T,H,hs", NANOGPT_SIZES, ids=["distinct", "B=H=hs"])
def test_nanogpt_as_written_is_silent(B, T, H, hs):
    assert loud(traced_nanogpt(B, T, H, hs, bug=False)) == []


# ---------------------------------------------------------------------------
# the Annotated Transformer's merge, without the transpose back
# ---------------------------------------------------------------------------

def annotated_merge(x, H, transpose_back: bool, proj):
    """harvardnlp/annotated-transformer ``MultiHeadedAttention.forward``: ``x.transpose(1, 2).contiguous()
    .view(nbatches, -1, self.h * self.d_k)``; the bug merges [B, H, T, d_k] straight to [B, T, D]."""
    B, T, D = x.shape                                                              # (B, T, D)
    q = x.view(B, -1, H, D // H).transpose(1, 2)                                   # (B, H, T, d_k)
    y = (q @ q.transpose(-2, -1)).softmax(dim=-1) @ q                              # (B, H, T, d_k)
    if transpose_back:
        y = y.transpose(1, 2)                                                      # (B, T, H, d_k)
    y = y.contiguous().view(B, -1, H * (D // H))                                   # (B, T, D)
    return proj(y)                                                                 # self.linears[-1](x)


@pytest.mark.parametrize("B,T,H,dk", [(2, 6, 8, 4), (3, 4, 4, 4)], ids=["distinct", "T=H=d_k"])
@pytest.mark.parametrize("transpose_back", [False, True], ids=["bug", "as written"])
def test_merge_without_transpose_is_one_error_at_the_merge(B, T, H, dk, transpose_back):
    """At T = H the merge reads as [B, H, T·d_k]: it was tokens-merged-with-features at the merge and
    projection-over-tokens at the linear, one bug in two errors; at distinct sizes one mixed-axis."""
    proj = nn.Linear(H * dk, H * dk)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={H * dk} H={H}") as t:
        annotated_merge(torch.randn(B, T, H * dk), H, transpose_back, proj)
    if transpose_back:
        assert loud(t) == []
        return
    merge, linear = index_of(t, "view", 1), index_of(t, "linear")
    (d,) = loud(t)
    if T != H:
        assert (d.kind, d.event, d.also) == ("mixed-axis", merge, (linear,))
        assert d.message.endswith(f"Also seen at #{linear} linear.")
        return
    assert (d.kind, d.severity, d.event, d.also) == ("tokens-merged-with-features", "error", merge, (linear,))
    assert d.message == (
        f"view #{merge} turns [B={B}, H={H}, T={T}, d_k={dk}] into [B={B}, H={H}, T·d_k={T * dk}]: axis 2 flattens "
        f"T and d_k into one axis, so each of its entries is a (token, feature) pair. linear #{linear} then projects "
        "over that axis, so each output feature mixes tokens: the merge was not a layout exercise.")


# ---------------------------------------------------------------------------
# the vocabulary's ranking
# ---------------------------------------------------------------------------

def test_every_kind_has_a_rank_and_symptoms_rank_lowest():
    from shapetrace.engine.kinds import CAUSE, EFFECT, SYMPTOM

    assert {k.rank for k in Kind} <= {CAUSE, EFFECT, SYMPTOM}
    assert Kind.BATCH_MISMATCH.rank == Kind.BROADCAST_MISMATCH.rank == SYMPTOM
    assert Kind.MIXED_AXIS.rank == Kind.GQA_HEAD_ORDER.rank == CAUSE
    assert Kind.PROJECTION_OVER_TOKENS.rank == EFFECT


def test_the_json_lists_where_else_the_bug_shows():
    t = traced_gqa(2, 6, 8, 2, 8, "tiles")
    (d,) = [x for x in t.report().to_dict()["diagnostics"] if x["severity"] == "error"]
    assert d["also_seen_at"] == [index_of(t, "matmul", 0), index_of(t, "matmul", 1)]
