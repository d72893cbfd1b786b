"""Heads stay apart between the split and the merge, measured on the values (engine/heads.py, issue 33
item 5). Each bug has a correct twin that stays silent, at distinct sizes and at B = T = H = 4 (the input
named explicitly: equal sizes never decide a name)."""

from __future__ import annotations

import math

import pytest
import torch
from einops import rearrange
from torch import nn
from torch.nn import functional as F

import shapetrace
from shapetrace.engine.dependencies import BATCH, OWN_TOKEN
from shapetrace.engine.heads import HEADS

SIZES = [(2, 5), (4, 4)]


class NanoGPTAttention(nn.Module):
    """karpathy/nanoGPT model.py CausalSelfAttention without its mask: c_attn split three ways, heads
    split with view + transpose(1, 2), merged with transpose(1, 2).contiguous().view(B, T, C)."""

    def __init__(self, n_embd=32, n_head=4, bug=None):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd, self.bug = n_head, n_embd, bug

    def forward(self, x):
        B, T, C = x.size()                                                         # (B, T, C)
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)                         # (B, T, C) each
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)            # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)            # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)            # (B, nh, T, hs)
        att = F.softmax((q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1))), dim=-1)  # (B, nh, T, T)
        if self.bug == "einsum":   # the value product with the heads index typed twice: sums over heads
            y = torch.einsum("bhqk,bgkd->bhqd", att, v)                            # (B, nh, T, hs)
        else:
            y = att @ v                                                            # (B, nh, T, hs)
        if self.bug == "merge-view":   # FuxiCTR issue #30 / transformer-from-scratch PR #6: no transpose back
            y = y.contiguous().view(B, T, C)                                       # (B, T, C), heads x tokens
        else:
            y = y.transpose(1, 2).contiguous().view(B, T, C)                       # (B, T, C)
        return self.c_proj(y)


def repeat_kv(hidden_states, n_rep):
    """transformers' models/llama/modeling_llama.py repeat_kv: torch.repeat_interleave(x, dim=1, repeats=n_rep)."""
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape               # (B, H_kv, T, d)
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)  # (B, H, T, d)


class LlamaAttention(nn.Module):
    """transformers' LlamaAttention (eager): view(hidden_shape).transpose(1, 2), repeat_kv for GQA,
    merged with transpose(1, 2).contiguous() and reshape(*input_shape, -1). The bug tiles the key/value
    heads with ``repeat(1, n_rep, 1, 1)`` (query head h then reads key/value head h % H_kv)."""

    def __init__(self, hidden=32, heads=4, kv_heads=2, bug=None):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.bug = heads, kv_heads, hidden // heads, bug
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, hidden, bias=False)

    def forward(self, x):
        input_shape = x.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        q = self.q_proj(x).view(hidden_shape).transpose(1, 2)                      # (B, H, T, d)
        k = self.k_proj(x).view(hidden_shape).transpose(1, 2)                      # (B, H_kv, T, d)
        v = self.v_proj(x).view(hidden_shape).transpose(1, 2)                      # (B, H_kv, T, d)
        n_rep = self.heads // self.kv_heads
        if self.bug == "repeat":
            k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)              # (B, H, T, d), tiled
        else:
            k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)                        # (B, H, T, d)
        w = F.softmax(torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim), dim=-1)  # (B, H, T, T)
        o = torch.matmul(w, v).transpose(1, 2).contiguous()                       # (B, T, H, d)
        return self.o_proj(o.reshape(*input_shape, -1))                            # (B, T, D)


class TalkingHeads(nn.Module):
    """lucidrains' einsum attention (vit-pytorch Attention: to_qkv.chunk(3), rearrange 'b n (h d) -> b h
    n d') with x-transformers' pre-softmax talking heads (a learned heads x heads mix of the scores,
    Shazeer et al. 2020). With ``talk=False`` it is plain lucidrains attention."""

    def __init__(self, dim=32, heads=4, talk=True):
        super().__init__()
        self.heads, self.talk = heads, talk
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.mix = nn.Parameter(torch.randn(heads, heads))
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x):
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)                                  # (b, n, h*d) each
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=self.heads) for t in (q, k, v))
        dots = torch.einsum("b h i d, b h j d -> b h i j", q, k) * 0.3             # (b, h, n, n)
        if self.talk:
            dots = torch.einsum("b h i j, h k -> b k i j", dots, self.mix)         # (b, h, n, n), heads mixed
        out = torch.einsum("b h i j, b h j d -> b h i d", dots.softmax(dim=-1), v)  # (b, h, n, d)
        return self.to_out(rearrange(out, "b h n d -> b n (h d)"))                 # (b, n, h*d)


def _traced(model, B, T, extra=""):
    torch.manual_seed(0)
    x = torch.randn(B, T, 32)
    with shapetrace.trace(dims=f"B={B} T={T} D=32 H=4{extra}") as t:
        t.check_dependencies()
        shapetrace.name(x, "B T D")
        model(x)
    return t


def _measured(t):
    """The findings measured on the values (the trace adds them to its diagnostics only where no rule
    found an error: these tests read the value witness itself)."""
    return [d for d in t._measured()[0] if d.kind in ("heads-mix", "heads-talk")]


@pytest.mark.parametrize(("B", "T"), SIZES)
@pytest.mark.parametrize("model", [lambda: NanoGPTAttention(), lambda: LlamaAttention(),
                                   lambda: TalkingHeads(talk=False)], ids=["nanogpt", "llama-gqa", "lucidrains"])
def test_correct_attention_keeps_heads_apart(model, B, T):
    torch.manual_seed(1)
    t = _traced(model(), B, T, " H_kv=2")
    assert _measured(t) == []
    assert t.contracts == [BATCH, OWN_TOKEN, HEADS]
    assert t.unmeasured == []
    assert t.report().verdict.line.endswith(
        "held on the values: batch entries stay apart, each token depends on itself, heads stay apart")


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_a_merge_without_the_transpose_back_takes_other_heads(B, T):
    torch.manual_seed(1)
    t = _traced(NanoGPTAttention(bug="merge-view"), B, T)
    found = _measured(t)   # (at T = H the view names the heads axis as it lands: the structure finds the merge)
    assert [d.kind for d in found] == ["heads-mix"]
    assert found[0].message == (
        "measured on the values: head 0 of the output has elements that do not depend on head 0 of the queries "
        "but on heads 1, 2 and 3 of the queries, keys and values: the merge does not undo the split (between "
        "the split (#2 view, #4 view, #6 view) and the merge (#13 view)). Heads were merged with another axis, "
        "as a view or reshape of (B, H, T, d_k) to (B, T, D) without the transpose back does.")


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_an_einsum_over_the_wrong_head_index_mixes_the_values(B, T):
    torch.manual_seed(1)
    t = _traced(NanoGPTAttention(bug="einsum"), B, T)
    found = _measured(t)
    assert [d.kind for d in found] == ["heads-mix"]
    assert found[0].message.startswith(
        "measured on the values: head 0 of the output depends on heads 0, 1, 2 and 3 of the values (output heads "
        "1, 2 and 3 too): heads mix between the split (#2 view, #4 view, #6 view) and the merge (#14 view).")
    # a rule sees it too since the eighth public round: an einsum summing the values' heads, keeping d_k
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["reduction-over-wrong-axis"]
    assert t.report().verdict.mark == "✗"


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_gqa_heads_tiled_with_repeat_read_the_wrong_key_value_head(B, T):
    torch.manual_seed(1)
    t = _traced(LlamaAttention(bug="repeat"), B, T, " H_kv=2")
    found = _measured(t)
    assert [d.kind for d in found] == ["heads-mix", "heads-mix"]
    assert found[0].message == (
        "measured on the values: head 1 of the output depends on head 1 of the keys (output head 2 too), but "
        "grouped-query attention pairs query head 1 with key/value head 0 (query heads 0-1 share it, as "
        "repeat_interleave and Llama's repeat_kv lay them out): the key/value heads were tiled in the wrong order.")
    assert "head 1 of the values" in found[1].message


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_talking_heads_mix_on_purpose_and_are_said_so(B, T):
    """The values' witnesses are warnings; the report folds them into the note on the einsum that mixes the heads
    with a learned nn.Parameter (rules/head_mixing, branch r11), so the verdict is ``?`` (the heads after it
    have no name), no longer ``!``: a warning said "in plain multi-head attention this is a bug" of code the
    einsum proves is talking heads."""
    torch.manual_seed(1)
    t = _traced(TalkingHeads(), B, T)
    found = _measured(t)
    assert [(d.kind, d.severity) for d in found] == [("heads-talk", "warning")] * 2
    assert found[0].message.startswith(
        "measured on the values: head 0 of the output depends on heads 0, 1, 2 and 3 of the queries (output heads "
        "1, 2 and 3 too): heads mix between the split")
    assert "Talking-heads attention mixes the attention weights of the heads on purpose" in found[0].message
    assert "of the keys" in found[1].message and t.report().verdict.mark == "?"
    assert [(d.kind, d.severity) for d in t.diagnostics] == [("heads-mixed-by-matrix", "note")]
    assert "On the values: head 0 of the output depends on heads 0, 1, 2 and 3 of the keys" in t.diagnostics[0].message


def test_no_heads_axis_is_said_on_the_verdict_line():
    """A single-head attention (no heads axis anywhere): the heads contract is not measured, and the
    verdict says so beside what held."""
    torch.manual_seed(0)
    lin = nn.Linear(8, 24)

    class OneHead(nn.Module):
        def forward(self, x):
            q, k, v = lin(x).chunk(3, -1)                                          # (B, T, 8) each
            return F.softmax(q @ k.transpose(-2, -1), -1) @ v                      # (B, T, 8)

    x = torch.randn(2, 5, 8)
    with shapetrace.trace(dims="B=2 T=5 D=8") as t:
        t.check_dependencies()
        shapetrace.name(x, "B T D")
        OneHead()(x)
    assert t.contracts == [BATCH, OWN_TOKEN]
    assert t.unmeasured == ["heads (no head split found)"]
    assert t.report().verdict.line.endswith(
        "held on the values: batch entries stay apart, each token depends on itself; not measured: heads (no head "
        "split found)")


def test_the_model_is_put_back_after_the_heads_run():
    torch.manual_seed(0)
    model = NanoGPTAttention().train()
    before = {n: p.clone() for n, p in model.state_dict().items()}
    assert _traced(model, 2, 5).contracts == [BATCH, OWN_TOKEN, HEADS]
    assert model.training and all(torch.equal(before[n], p) for n, p in model.state_dict().items())


class TimmAttention(nn.Module):
    """timm's vision_transformer.Attention (the manual path): one qkv projection reshaped to (B, N, 3, H,
    d) and permuted to (3, B, H, N, d), unbind(0), merged with transpose(1, 2).reshape(B, N, C). The bug
    sums the value product over every head (``einsum('bhqk,bgkd->bhqd')``)."""

    def __init__(self, dim=32, num_heads=4, bug=None):
        super().__init__()
        self.num_heads, self.head_dim, self.bug = num_heads, dim // num_heads, bug
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape                                                          # (B, N, C)
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)  # (3, B, H, N, d)
        q, k, v = qkv.unbind(0)                                                    # (B, H, N, d) each
        attn = (q * self.head_dim ** -0.5 @ k.transpose(-2, -1)).softmax(dim=-1)   # (B, H, N, N)
        if self.bug == "einsum":
            x = torch.einsum("bhqk,bgkd->bhqd", attn, v)                           # (B, H, N, d), heads summed
        else:
            x = attn @ v                                                           # (B, H, N, d)
        return self.proj(x.transpose(1, 2).reshape(B, N, C))                       # (B, N, C)


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_one_fused_split_measures_heads_and_says_what_it_cannot_tell(B, T):
    torch.manual_seed(1)
    t = _traced(TimmAttention(), B, T)
    assert _measured(t) == [] and t.contracts == [BATCH, OWN_TOKEN, HEADS]
    torch.manual_seed(1)
    found = _measured(_traced(TimmAttention(bug="einsum"), B, T))
    assert [(d.kind, d.severity) for d in found] == [("heads-talk", "warning")]   # values or weights: not told
    assert found[0].message.startswith(
        "measured on the values: head 0 of the output depends on heads 0, 1, 2 and 3 of the queries, keys and values "
        "(output heads 1, 2 and 3 too): heads mix between the split")
    assert "cannot be told apart here" in found[0].message


class TwoBlocks(nn.Module):
    """Two nanoGPT attention blocks in a row, as GPT's ``nn.ModuleList`` of blocks runs them
    (karpathy/nanoGPT model.py ``for block in self.transformer.h: x = block(x)``); ``bug`` goes into
    the second block only, so a check of the first attention alone misses it."""

    def __init__(self, bug=None):
        super().__init__()
        self.h = nn.ModuleList([NanoGPTAttention(), NanoGPTAttention(bug=bug)])

    def forward(self, x):
        for block in self.h:
            x = x + block(x)                                                       # (B, T, C)
        return x


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_heads_held_in_every_attention_are_said_so(B, T):
    torch.manual_seed(1)
    t = _traced(TwoBlocks(), B, T)
    assert _measured(t) == []
    assert t.contracts == [BATCH, OWN_TOKEN, "heads stay apart in each of 2 attentions"]


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_a_bug_in_the_second_attention_is_caught(B, T):
    torch.manual_seed(1)
    t = _traced(TwoBlocks(bug="einsum"), B, T)
    found = _measured(t)
    assert [d.kind for d in found] == ["heads-mix"]
    assert found[0].message.startswith(
        "measured on the values: head 0 of the output depends on heads 0, 1, 2 and 3 of the values (output heads "
        "1, 2 and 3 too): heads mix between the split (#18 view, #20 view, #22 view) and the merge (#30 view).")
    assert t.report().verdict.mark == "✗"


def test_the_value_witness_of_a_layout_bug_is_shown_under_the_rules_finding():
    """FuxiCTR issue #30's merge without the transpose back: the names find it (mixed-axis at the merge)
    and the values back it; one bug, one finding (rules/causes.py), the witness folded into it."""
    torch.manual_seed(1)
    t = _traced(NanoGPTAttention(bug="merge-view"), 2, 5)
    assert [(d.kind, d.event) for d in t.diagnostics] == [("mixed-axis", 13)]
    assert t.diagnostics[0].message.endswith(
        "Also seen at #14 linear. On the values: head 0 of the output has elements that do not depend on head 0 of "
        "the queries but on heads 1, 2 and 3 of the queries, keys and values: the merge does not undo the split "
        "(between the split (#2 view, #4 view, #6 view) and the merge (#13 view)).")


def test_a_second_bug_the_rules_miss_stays_a_finding_of_its_own():
    """Two blocks, two bugs: the first block's merge without the transpose back (the rules find it, the
    values back it) and the second block's einsum over the wrong head index (a finding of its own, not
    folded into the first block's: the values see it between that block's split and merge, and since the
    eighth public round a rule does too, an einsum that sums the values' heads and keeps their features)."""

    class Blocks(TwoBlocks):
        def __init__(self):
            nn.Module.__init__(self)
            self.h = nn.ModuleList([NanoGPTAttention(bug="merge-view"), NanoGPTAttention(bug="einsum")])

    torch.manual_seed(1)
    t = _traced(Blocks(), 2, 5)
    assert [(d.kind, d.event) for d in t.diagnostics] == [("mixed-axis", 13), ("reduction-over-wrong-axis", 26)]
    assert "On the values: head 0 of the output has elements" in t.diagnostics[0].message
    assert t.diagnostics[1].message.startswith("einsum #26 runs along axis 1 (H, the heads) of the per-head values")
    assert t.report().verdict.line == "✗ 2 errors: the findings above say where and how to fix them"


class InterleavedMerge(TalkingHeads):
    """lucidrains/flamingo-pytorch's PerceiverAttention merge written the other way round, ``rearrange(out, 'b h
    n d -> b n (d h)')``, before the learnt ``to_out``: each feature still holds one head's value, only the
    order of a token's features changes (a permutation of to_out's columns makes it the (h d) merge)."""

    def __init__(self):
        super().__init__(talk=False)

    def forward(self, x):
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)                                  # (b, n, h*d) each
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=self.heads) for t in (q, k, v))
        dots = torch.einsum("b h i d, b h j d -> b h i j", q, k) * 0.3             # (b, h, n, n)
        out = torch.einsum("b h i j, b h j d -> b h i d", dots.softmax(dim=-1), v)  # (b, h, n, d)
        return self.to_out(rearrange(out, "b h n d -> b n (d h)"))                 # (b, n, d*h)


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_a_merge_that_folds_heads_in_the_other_order_keeps_them_apart(B, T):
    """The heads of the merged output are read as the merge lays them out (engine/heads.py
    _merged_reference), where its rows hold the split's features in another order: no head mixes there.
    On 4212b85: heads-mix (error) and heads-talk twice, "head 0 of the output depends on heads 0, 1, 2
    and 3 of the values", the merged features read as if folded (h d)."""
    torch.manual_seed(1)
    t = _traced(InterleavedMerge(), B, T)
    assert _measured(t) == []
    assert t.contracts == [BATCH, OWN_TOKEN, HEADS]
    assert [e.output.dims for e in t.events if e.op == "reshape"][-1] == ("B", "T", "d_k*H")
    assert t.report().verdict.line == (
        "✓ checked all 14 ops that could carry a layout bug: every axis keeps its meaning from input to output; "
        "held on the values: batch entries stay apart, each token depends on itself, heads stay apart")
