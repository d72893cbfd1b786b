"""The heads contract measured at module boundaries (engine/head_hooks.py): where the trace proves that
each split reshapes a projection's output that reads its batch size from itself, and the merge's result
goes into an output projection, the measuring forward needs no TorchFunctionMode. It is kept only where
every contract held; every bug is measured again the full way (engine/heads.py), so each finding and
its words are the full way's. Each bug has a correct twin, at distinct sizes and at B = T = H = 4."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import shapetrace
from shapetrace.attention.reference import ConfigurableAttention, MultiHeadAttention
from shapetrace.engine import dependencies
from shapetrace.engine.dependencies import BATCH, CAUSAL, OWN_TOKEN
from shapetrace.engine.heads import HEADS

SIZES = [(2, 5), (4, 4)]
D, H = 32, 4


class BertSelfAttention(nn.Module):
    """transformers' models/bert/modeling_bert.py BertSelfAttention (eager) with BertSelfOutput's dense:
    ``transpose_for_scores`` views ``x.size()[:-1] + (heads, head_size)`` and permutes (0, 2, 1, 3); the
    merge permutes back and views ``size()[:-2] + (all_head_size,)``. ``causal`` adds a decoder's mask
    built from the scores' own length (``ones(T, T).tril()``). Bugs: ``merge-view`` merges without the
    permute back (FuxiCTR issue #30, transformer-from-scratch PR #6); ``einsum`` types the heads index
    twice in the value product; ``mask-reversed`` keeps the upper triangle (each query sees the future);
    ``norm-over-batch`` normalises over dim 0 first (the Annotated Transformer's LayerNorm with the wrong
    dim); ``heads-summed`` adds every head's scores (a sum over the heads index); ``rolled`` shifts the
    outputs one token late."""

    def __init__(self, causal=False, bug=None):
        super().__init__()
        self.query, self.key, self.value = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)
        self.dense = nn.Linear(D, D)
        self.causal, self.bug = causal, bug

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (H, D // H)                                  # (B, T, H, d)
        return x.view(new_x_shape).permute(0, 2, 1, 3)                             # (B, H, T, d)

    def forward(self, hidden_states):
        if self.bug == "norm-over-batch":
            hidden_states = hidden_states - hidden_states.mean(0, keepdim=True)    # (B, T, D), across the batch
        q = self.transpose_for_scores(self.query(hidden_states))                   # (B, H, T, d)
        k = self.transpose_for_scores(self.key(hidden_states))                     # (B, H, T, d)
        v = self.transpose_for_scores(self.value(hidden_states))                   # (B, H, T, d)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(D // H)          # (B, H, T, T)
        if self.bug == "heads-summed":
            scores = scores + scores.sum(1, keepdim=True)                          # (B, H, T, T), heads talk
        if self.causal:
            T = scores.size(-1)
            keep = torch.ones(T, T).triu() if self.bug == "mask-reversed" else torch.ones(T, T).tril()  # (T, T)
            scores = scores.masked_fill(keep == 0, float("-inf"))                  # (B, H, T, T)
        probs = F.softmax(scores, dim=-1)                                          # (B, H, T, T)
        if self.bug == "einsum":
            context = torch.einsum("bhqk,bgkd->bhqd", probs, v)                    # (B, H, T, d), heads summed
        else:
            context = torch.matmul(probs, v)                                       # (B, H, T, d)
        if self.bug == "rolled":
            context = context.roll(1, dims=2)                                      # (B, H, T, d), one token late
        if self.bug == "merge-view":   # no permute back: heads and tokens regrouped
            context = context.reshape(context.size(0), -1, D)                      # (B, T, D), scrambled
        else:
            context = context.permute(0, 2, 1, 3).contiguous()                     # (B, T, H, d)
            context = context.view(context.size()[:-2] + (D,))                     # (B, T, D)
        return self.dense(context)                                                 # (B, T, D)


class TwoBlocks(nn.Module):
    """Two BERT attention blocks in a row, as BertEncoder's ``nn.ModuleList`` of layers runs them; ``bug``
    goes into the second block only, so a check of the first attention alone misses it."""

    def __init__(self, bug=None):
        super().__init__()
        self.layer = nn.ModuleList([BertSelfAttention(), BertSelfAttention(bug=bug)])

    def forward(self, x):
        for layer in self.layer:
            x = x + layer(x)                                                       # (B, T, D)
        return x


class NanoGPTAttention(nn.Module):
    """karpathy/nanoGPT model.py CausalSelfAttention without its mask, q, k and v from three Linears:
    ``view(B, T, nh, hs)`` with B and T read from the block's input, not from the tensor it views."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.c_proj = (nn.Linear(D, D) for _ in range(4))

    def forward(self, x):
        B, T, C = x.size()                                                         # (B, T, C)
        q = self.q(x).view(B, T, H, C // H).transpose(1, 2)                        # (B, nh, T, hs)
        k = self.k(x).view(B, T, H, C // H).transpose(1, 2)                        # (B, nh, T, hs)
        v = self.v(x).view(B, T, H, C // H).transpose(1, 2)                        # (B, nh, T, hs)
        att = F.softmax((q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1))), dim=-1)  # (B, nh, T, T)
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))   # (B, T, C)


class SharedProjection(BertSelfAttention):
    """Keys and values from one projection called twice (weights tied on purpose): one wrapper cannot
    tell its two calls apart, so the check is made the full way."""

    def forward(self, hidden_states):
        q = self.transpose_for_scores(self.query(hidden_states))                   # (B, H, T, d)
        k = self.transpose_for_scores(self.key(hidden_states))                     # (B, H, T, d)
        v = self.transpose_for_scores(self.key(hidden_states))                     # (B, H, T, d)
        probs = F.softmax(torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(D // H), dim=-1)   # (B, H, T, T)
        context = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()          # (B, T, H, d)
        return self.dense(context.view(context.size()[:-2] + (D,)))                # (B, T, D)


def _probed(model, B, T):
    """The trace, and its probe taken before the trace measures it (measuring takes the top call)."""
    torch.manual_seed(0)
    x = torch.randn(B, T, D)
    with shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        t.check_dependencies()
        shapetrace.name(x, "B T D")
        model(x)
    return t, dependencies.probe_of(t, t.capture.top_call)


def _paths(probe):
    return [([p.path for p in h.producers], h.consumer.path) for h in probe.hooks]


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_the_textbook_attention_is_measured_at_its_projections_and_every_contract_holds(B, T):
    """shapetrace's own reference (split_heads reads ``B, T, D = x.shape`` from the projection's output)."""
    torch.manual_seed(1)
    t, probe = _probed(MultiHeadAttention(D, H).eval(), B, T)
    assert _paths(probe) == [(["w_q", "w_k", "w_v"], "w_o")]
    assert dependencies._every_contract_held(probe) == [BATCH, OWN_TOKEN, HEADS]
    assert t.contracts == [BATCH, OWN_TOKEN, HEADS]


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_the_textbook_attention_with_a_causal_mask_is_measured_at_its_projections(B, T):
    """The reference with --causal (a ``triu(1)`` mask filled with -inf)."""
    torch.manual_seed(1)
    t, probe = _probed(ConfigurableAttention(D, H, causal=True).eval(), B, T)
    assert _paths(probe) == [(["w_q", "w_k", "w_v"], "w_o")]
    assert dependencies._every_contract_held(probe) == [BATCH, OWN_TOKEN, CAUSAL, HEADS]
    assert t.contracts == [BATCH, OWN_TOKEN, CAUSAL, HEADS]


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_bert_style_attention_holds_at_module_boundaries(B, T):
    torch.manual_seed(1)
    t, probe = _probed(BertSelfAttention(), B, T)
    assert _paths(probe) == [(["query", "key", "value"], "dense")]
    assert dependencies._every_contract_held(probe) == [BATCH, OWN_TOKEN, HEADS]
    assert t.contracts == [BATCH, OWN_TOKEN, HEADS]


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_every_attention_of_two_blocks_is_measured_in_one_forward(B, T):
    torch.manual_seed(1)
    t, probe = _probed(TwoBlocks(), B, T)
    assert _paths(probe) == [(["layer.0.query", "layer.0.key", "layer.0.value"], "layer.0.dense"),
                             (["layer.1.query", "layer.1.key", "layer.1.value"], "layer.1.dense")]
    assert dependencies._every_contract_held(probe) == [BATCH, OWN_TOKEN, "heads stay apart in each of 2 attentions"]


def _full_way(probe):
    """What the full way (a TorchFunctionMode at the splits and the merge) measures on the same probe."""
    found, held, unmeasured = dependencies.measure(replace(probe, hooks=()))
    return [(d.kind, d.message) for d in found], held, unmeasured


@pytest.mark.parametrize(("B", "T"), SIZES)
@pytest.mark.parametrize(("model", "kind", "words"), [
    (lambda: BertSelfAttention(bug="einsum"), "heads-mix",
     "measured on the values: head 0 of the output depends on heads 0, 1, 2 and 3 of the values"),
    (lambda: BertSelfAttention(bug="merge-view"), "heads-mix",
     "measured on the values: head 0 of the output has elements that do not depend on head 0 of the queries"),
    (lambda: TwoBlocks(bug="einsum"), "heads-mix",
     "measured on the values: head 0 of the output depends on heads 0, 1, 2 and 3 of the values"),
    (lambda: BertSelfAttention(causal=True, bug="mask-reversed"), "causal-mask-leaks",
     "measured on the values: output token 0 of batch 0 depends on input token"),
], ids=["einsum-heads", "merge-without-permute", "second-block", "causal-leak"])
def test_a_bug_found_at_module_boundaries_is_measured_again_the_full_way(model, kind, words, B, T):
    torch.manual_seed(1)
    t, probe = _probed(model(), B, T)
    assert probe.hooks != ()                                     # the cheap way was planned...
    assert dependencies._every_contract_held(probe) is None      # ...and refused: something broke
    found = [d for d in t._measured()[0] if d.kind == kind]
    assert found and found[0].message.startswith(words)
    assert [(d.kind, d.message) for d in t._measured()[0]] == _full_way(probe)[0]


@pytest.mark.parametrize(("B", "T"), SIZES)
@pytest.mark.parametrize(("causal", "bug"), [(False, None), (True, None), (False, "einsum"), (False, "merge-view"),
                                             (True, "mask-reversed"), (False, "norm-over-batch"),
                                             (False, "heads-summed"), (True, "rolled")])
def test_the_check_says_exactly_what_the_full_way_says(causal, bug, B, T):
    """Findings, the contracts that held and what was not measured, word for word, whichever way ran."""
    torch.manual_seed(1)
    _, probe = _probed(BertSelfAttention(causal=causal, bug=bug), B, T)
    assert probe.hooks != ()
    found, held, unmeasured = dependencies.measure(probe)
    assert ([(d.kind, d.message) for d in found], held, unmeasured) == _full_way(probe)
    assert (dependencies._every_contract_held(probe) is None) == (bug is not None)


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_the_correct_twin_of_the_causal_leak_holds_at_module_boundaries(B, T):
    torch.manual_seed(1)
    t, probe = _probed(BertSelfAttention(causal=True), B, T)
    assert dependencies._every_contract_held(probe) == [BATCH, OWN_TOKEN, CAUSAL, HEADS]
    assert t.contracts == [BATCH, OWN_TOKEN, CAUSAL, HEADS]


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_no_module_boundary_is_used_where_the_trace_does_not_prove_it(B, T):
    """A projection called twice cannot carry two plans."""
    torch.manual_seed(1)
    t, probe = _probed(SharedProjection(), B, T)
    assert probe.heads and probe.hooks == ()


class NanoGPTFused(nn.Module):
    """karpathy/nanoGPT model.py CausalSelfAttention (its slow path): ``c_attn(x).split(n_embd, dim=2)``,
    ``view(B, T, nh, hs)`` with B, T read from the block's input, the ``bias`` buffer's triangle applied
    with ``masked_fill``. Bugs: ``einsum`` sums over the heads in the value product; ``mask-reversed``
    keeps the upper triangle (each query sees the future)."""

    def __init__(self, bug=None):
        super().__init__()
        self.c_attn, self.c_proj, self.bug = nn.Linear(D, 3 * D), nn.Linear(D, D), bug
        self.register_buffer("bias", torch.tril(torch.ones(8, 8)).view(1, 1, 8, 8))     # (1, 1, T_max, T_max)

    def forward(self, x):
        B, T, C = x.size()                                                         # (B, T, C)
        q, k, v = self.c_attn(x).split(C, dim=2)                                   # (B, T, C) each
        k = k.view(B, T, H, C // H).transpose(1, 2)                                # (B, nh, T, hs)
        q = q.view(B, T, H, C // H).transpose(1, 2)                                # (B, nh, T, hs)
        v = v.view(B, T, H, C // H).transpose(1, 2)                                # (B, nh, T, hs)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))            # (B, nh, T, T)
        keep = self.bias[:, :, :T, :T]                                             # (1, 1, T, T)
        if self.bug == "mask-reversed":
            keep = keep.transpose(-2, -1)                                          # (1, 1, T, T), upper triangle
        att = F.softmax(att.masked_fill(keep == 0, float("-inf")), dim=-1)         # (B, nh, T, T)
        y = torch.einsum("bhqk,bgkd->bhqd", att, v) if self.bug == "einsum" else att @ v   # (B, nh, T, hs)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))           # (B, T, C)


class LlamaAttention(nn.Module):
    """transformers' models/llama/modeling_llama.py LlamaAttention with eager_attention_forward (no
    rotary): ``hidden_shape = (*input_shape, -1, head_dim)``, ``repeat_kv`` for grouped-query heads, an
    additive causal mask, ``reshape(*input_shape, -1).contiguous()`` into ``o_proj``. Bugs: ``merge-view``
    reshapes without the transpose back (FuxiCTR issue #30); ``positions-from-batch`` counts positions with
    ``x.size(0)`` on batch-first input (issue 33: it runs where B = T); ``repeat`` tiles grouped-query
    key/value heads with ``repeat(1, n_rep, 1, 1)`` (repeat_kv's own docstring: it equals
    ``repeat_interleave(x, dim=1, repeats=n_rep)``, not a tiling); ``heads-summed`` adds every head's
    scores (a sum over the heads index)."""

    def __init__(self, kv_heads=H, bug=None):
        super().__init__()
        self.head_dim, self.kv_heads, self.bug = D // H, kv_heads, bug
        self.q_proj = nn.Linear(D, H * self.head_dim, bias=False)
        self.k_proj = nn.Linear(D, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(D, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(H * self.head_dim, D, bias=False)

    def repeat_kv(self, x):
        batch, kv_heads, slen, head_dim = x.shape                                  # (B, H_kv, T, d)
        if kv_heads == H:
            return x
        if self.bug == "repeat":   # (tiled: query head h reads key/value head h mod H_kv)
            return x.repeat(1, H // kv_heads, 1, 1)                                # (B, H, T, d)
        x = x[:, :, None, :, :].expand(batch, kv_heads, H // kv_heads, slen, head_dim)   # (B, H_kv, n_rep, T, d)
        return x.reshape(batch, H, slen, head_dim)                                 # (B, H, T, d)

    def forward(self, hidden_states):
        input_shape = hidden_states.shape[:-1]                                     # (B, T)
        hidden_shape = (*input_shape, -1, self.head_dim)                           # (B, T, -1, d)
        q = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)          # (B, H, T, d)
        if self.bug == "positions-from-batch":   # (their count read from the batch axis: x.size(0))
            positions = torch.arange(hidden_states.size(0), dtype=torch.float32)   # (B,), meant (T,)
            q = q + torch.outer(positions, torch.ones(self.head_dim)) / 100        # (B, H, T, d) + (B, d)
        k = self.repeat_kv(self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2))   # (B, H, T, d)
        v = self.repeat_kv(self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2))   # (B, H, T, d)
        T = q.shape[2]
        w = torch.matmul(q, k.transpose(2, 3)) * self.head_dim ** -0.5              # (B, H, T, T)
        if self.bug == "heads-summed":
            w = w + w.sum(1, keepdim=True)                                         # (B, H, T, T), heads talk
        w = F.softmax(w + torch.full((T, T), float("-inf")).triu(1), dim=-1)       # (B, H, T, T)
        out = torch.matmul(w, v)                                                   # (B, H, T, d)
        if self.bug != "merge-view":
            out = out.transpose(1, 2)                                              # (B, T, H, d)
        return self.o_proj(out.reshape(*input_shape, -1).contiguous())             # (B, T, D)


class LlamaLayers(nn.Module):
    """Two pre-norm Llama decoder layers (attention only, LayerNorm for RMSNorm), as LlamaModel runs its
    ``layers``; ``bug`` goes into the second layer only."""

    def __init__(self, bug=None):
        super().__init__()
        self.norms = nn.ModuleList([nn.LayerNorm(D), nn.LayerNorm(D)])
        self.layers = nn.ModuleList([LlamaAttention(), LlamaAttention(bug=bug)])

    def forward(self, x):
        for norm, layer in zip(self.norms, self.layers):
            x = x + layer(norm(x))                                                 # (B, T, D)
        return x


@pytest.mark.parametrize(("B", "T"), SIZES)
@pytest.mark.parametrize(("model", "paths", "held"), [
    (NanoGPTAttention, [(["q", "k", "v"], "c_proj")], [BATCH, OWN_TOKEN, HEADS]),
    (NanoGPTFused, [(["c_attn"] * 3, "c_proj")], [BATCH, OWN_TOKEN, CAUSAL, HEADS]),
    (LlamaAttention, [(["q_proj", "k_proj", "v_proj"], "o_proj")], [BATCH, OWN_TOKEN, CAUSAL, HEADS]),
    (LlamaLayers, [(["layers.0.q_proj", "layers.0.k_proj", "layers.0.v_proj"], "layers.0.o_proj"),
                   (["layers.1.q_proj", "layers.1.k_proj", "layers.1.v_proj"], "layers.1.o_proj")],
     [BATCH, OWN_TOKEN, CAUSAL, "heads stay apart in each of 2 attentions"]),
], ids=["nanogpt-three-linears", "nanogpt-fused-c-attn", "llama", "llama-two-layers"])
def test_splits_that_read_the_batch_elsewhere_are_measured_with_copies_entering_with_the_input(model, paths, held,
                                                                                               B, T):
    """nanoGPT's ``view(B, T, nh, hs)`` and Llama's ``view(*input_shape, -1, d)`` read B from the block's
    input: the copies enter with it, and every contract is measured in one forward, as the full way
    measures it."""
    torch.manual_seed(1)
    t, probe = _probed(model().eval(), B, T)
    assert _paths(probe) == paths
    assert dependencies._every_contract_held(probe) == held
    assert t.contracts == held
    assert _full_way(probe) == ([], held, [])


@pytest.mark.parametrize(("B", "T"), SIZES)
@pytest.mark.parametrize(("model", "kind", "words"), [
    (lambda: NanoGPTFused(bug="einsum"), "heads-mix",
     "measured on the values: head 0 of the output depends on heads 0, 1, 2 and 3 of the values"),
    (lambda: NanoGPTFused(bug="mask-reversed"), "causal-mask-leaks",
     "measured on the values: output token 0 of batch 0 depends on input token"),
    (lambda: LlamaAttention(bug="merge-view"), "heads-mix",
     "measured on the values: head 0 of the output has elements that do not depend on head 0 of the queries"),
    (lambda: LlamaLayers(bug="merge-view"), "causal-mask-leaks",   # (its tokens regrouped with the heads)
     "measured on the values: output token "),
], ids=["nanogpt-einsum-heads", "nanogpt-causal-leak", "llama-merge-without-transpose", "llama-second-layer"])
def test_a_bug_found_with_copies_entering_with_the_input_is_measured_again_the_full_way(model, kind, words, B, T):
    torch.manual_seed(1)
    t, probe = _probed(model(), B, T)
    assert probe.hooks != () and all(h.grown for h in probe.hooks)   # the cheap way was planned...
    assert dependencies._every_contract_held(probe) is None          # ...and refused: something broke
    found = [(d.kind, d.message) for d in t._measured()[0]]
    assert any(k == kind and m.startswith(words) for k, m in found)
    assert found == _full_way(probe)[0]


def test_the_model_is_put_back_after_the_measuring_forward():
    torch.manual_seed(1)
    model = BertSelfAttention().train()
    before = {n: p.clone() for n, p in model.state_dict().items()}
    t, probe = _probed(model, 2, 5)
    assert dependencies._every_contract_held(probe) == [BATCH, OWN_TOKEN, HEADS]
    assert model.training and all(torch.equal(before[n], p) for n, p in model.state_dict().items())
    assert all("forward" not in m.__dict__ for m in model.modules())   # no wrapper left behind


@pytest.mark.parametrize("bug", [None, "positions-from-batch"])
def test_copies_entering_with_the_input_never_make_the_batch_as_long_as_another_axis(bug):
    """At B = T = 2 + H, entry 0, its moved copy and one copy per head would make a measuring batch as long
    as the tokens: positions counted from the batch would line up with them and every contract would
    hold. The measuring batch gets a length no axis of the trace has (more rows of entry 0), so that table
    breaks the run, as on the full way's batch of two: nothing is said to hold; the correct twin holds
    every contract."""
    torch.manual_seed(1)
    t, probe = _probed(LlamaAttention(bug=bug), 2 + H, 2 + H)
    assert probe.hooks != () and all(h.grown for h in probe.hooks)
    held = [BATCH, OWN_TOKEN, CAUSAL, HEADS] if bug is None else []
    assert t.contracts == held
    assert _full_way(probe)[1] == held


@pytest.mark.parametrize(("B", "T"), SIZES)
@pytest.mark.parametrize("kv_heads", [2, 1], ids=["gqa", "mqa"])
def test_grouped_query_heads_are_measured_at_module_boundaries_one_head_per_copy(kv_heads, B, T):
    """transformers' Llama with H_kv < H (repeat_kv): a copy that moved a key/value head together with a
    query head would change its whole group, so the query heads are moved one per copy and then each
    key/value head in k and v (H + H_kv copies), and every contract is measured in one forward."""
    torch.manual_seed(1)
    t, probe = _probed(LlamaAttention(kv_heads=kv_heads).eval(), B, T)
    held = [BATCH, OWN_TOKEN, CAUSAL, HEADS]
    assert _paths(probe) == [(["q_proj", "k_proj", "v_proj"], "o_proj")]
    assert [h.copies for h in probe.hooks] == [H + kv_heads]
    assert probe.hooks[0].moves[:H] == tuple(((h,), (), ()) for h in range(H))
    assert probe.hooks[0].moves[H:] == tuple(((), (g,), (g,)) for g in range(kv_heads))
    assert dependencies._every_contract_held(probe) == held
    assert t.contracts == held
    assert _full_way(probe) == ([], held, [])


@pytest.mark.parametrize(("B", "T"), SIZES)
@pytest.mark.parametrize(("bug", "kind", "words"), [
    ("repeat", "heads-mix", "measured on the values: head 1 of the output depends on head 1 of the keys (output "
     "head 2 too), but grouped-query attention pairs query head 1 with key/value head 0"),
    ("heads-summed", "heads-talk", "measured on the values: head 0 of the output depends on heads 0, 1, 2 and 3 "
     "of the queries"),
    ("merge-view", "heads-mix", "measured on the values: head 0 of the output has elements that do not depend "
     "on head 0 of the queries"),
], ids=["tiled-key-value-heads", "query-heads-talk", "merge-without-transpose"])
def test_a_grouped_query_bug_at_module_boundaries_is_measured_again_the_full_way(bug, kind, words, B, T):
    """The tiled key/value heads (the head-order bug), query heads reading their group-mates' scores, and
    a merge without the transpose back: the one-head-per-copy run refuses, and the full way says what
    broke, word for word as before."""
    torch.manual_seed(1)
    t, probe = _probed(LlamaAttention(kv_heads=2, bug=bug), B, T)
    assert probe.hooks != () and probe.hooks[0].copies == H + 2        # the cheap way was planned...
    assert dependencies._every_contract_held(probe) is None          # ...and refused: something broke
    found = [(d.kind, d.message) for d in t._measured()[0]]
    assert any(k == kind and m.startswith(words) for k, m in found)
    assert found == _full_way(probe)[0]


class BertWithDropout(BertSelfAttention):
    """transformers' BertSelfAttention as it trains: ``attention_probs = self.dropout(attention_probs)``
    (attention_probs_dropout_prob 0.1), traced in training mode."""

    def __init__(self):
        super().__init__()
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states):
        q = self.transpose_for_scores(self.query(hidden_states))                   # (B, H, T, d)
        k = self.transpose_for_scores(self.key(hidden_states))                     # (B, H, T, d)
        v = self.transpose_for_scores(self.value(hidden_states))                   # (B, H, T, d)
        probs = F.softmax(torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(D // H), dim=-1)   # (B, H, T, T)
        context = torch.matmul(self.dropout(probs), v).permute(0, 2, 1, 3).contiguous()   # (B, T, H, d)
        return self.dense(context.view(context.size()[:-2] + (D,)))                # (B, T, D)


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_a_model_traced_in_training_mode_is_measured_in_eval_mode_and_put_back(B, T):
    """The measuring forward runs with every dropout off (eval mode), whatever the state it starts from
    puts back (a dropout left on would move every output at random: a false leak), and the model
    trains again afterwards."""
    torch.manual_seed(1)
    model = BertWithDropout().train()
    t, probe = _probed(model, B, T)
    assert dependencies._every_contract_held(probe) == [BATCH, OWN_TOKEN, HEADS]
    assert t.contracts == [BATCH, OWN_TOKEN, HEADS]
    assert all(m.training for m in model.modules())


class AnnotatedMultiHeaded(nn.Module):
    """The Annotated Transformer's MultiHeadedAttention (harvardnlp, h = 8): ``l(x).view(nbatches, -1, h,
    d_k).transpose(1, 2)`` for q, k and v, ``attention``, ``x.transpose(1, 2).contiguous().view(nbatches,
    -1, h * d_k)`` into ``linears[-1]``; ``causal`` adds its ``subsequent_mask``. At 8 heads the check's
    copies move the heads with one bit of their index set or clear (6 copies, not 8). Bugs:
    ``merge-view`` views without the transpose back (FuxiCTR issue #30); ``einsum`` types the heads index
    twice in the value product; ``heads-summed`` adds every head's scores; ``neighbour`` lets head h read
    head h + 1's values (``roll`` over the heads: heads that differ in more than one bit);
    ``mask-reversed`` keeps the upper triangle."""

    def __init__(self, causal=False, bug=None, h=8, d_model=64):
        super().__init__()
        self.h, self.d_k, self.causal, self.bug = h, d_model // h, causal, bug
        self.linears = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(4)])

    def forward(self, x):
        nbatches = x.size(0)
        query, key, value = [lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)   # (B, h, T, d_k)
                             for lin, x in zip(self.linears, (x, x, x))]
        scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(self.d_k)  # (B, h, T, T)
        if self.bug == "heads-summed":
            scores = scores + scores.sum(1, keepdim=True)                          # (B, h, T, T), heads talk
        if self.causal:
            T = scores.size(-1)
            keep = torch.ones(T, T).triu() if self.bug == "mask-reversed" else torch.ones(T, T).tril()   # (T, T)
            scores = scores.masked_fill(keep == 0, -1e9)                           # (B, h, T, T)
        p_attn = scores.softmax(dim=-1)                                            # (B, h, T, T)
        if self.bug == "neighbour":
            value = value.roll(-1, dims=1)                                         # (B, h, T, d_k), head h + 1's
        if self.bug == "einsum":
            out = torch.einsum("bhqk,bgkd->bhqd", p_attn, value)                   # (B, h, T, d_k), heads summed
        else:
            out = torch.matmul(p_attn, value)                                      # (B, h, T, d_k)
        if self.bug == "merge-view":
            out = out.contiguous().view(nbatches, -1, self.h * self.d_k)           # (B, T, D), scrambled
        else:
            out = out.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)   # (B, T, D)
        return self.linears[-1](out)                                               # (B, T, D)


def _probed8(model, B, T):
    torch.manual_seed(0)
    x = torch.randn(B, T, 64)
    with shapetrace.trace(dims=f"B={B} T={T} D=64 H=8") as t:
        t.check_dependencies()
        shapetrace.name(x, "B T D")
        model(x)
    return t, dependencies.probe_of(t, t.capture.top_call)


@pytest.mark.parametrize(("B", "T"), [(2, 5), (8, 8)])
@pytest.mark.parametrize(("causal", "bug"), [(False, None), (True, None), (False, "einsum"), (False, "merge-view"),
                                             (False, "heads-summed"), (False, "neighbour"),
                                             (True, "mask-reversed")])
def test_at_eight_heads_five_copies_tell_the_heads_apart(causal, bug, B, T):
    """Five copies tell eight heads apart (each head moved by its own two of them, no head's pair inside
    another's): every bug is still refused and measured the full way, word for word, and its correct twin
    holds every contract, at distinct sizes and at B = T = H = 8."""
    torch.manual_seed(1)
    t, probe = _probed8(AnnotatedMultiHeaded(causal=causal, bug=bug), B, T)
    assert [h.moves[0][0] for h in probe.hooks] == [(0, 1, 2, 3)] and probe.hooks[0].copies == 5
    found, held, unmeasured = dependencies.measure(probe)
    assert ([(d.kind, d.message) for d in found], held, unmeasured) == _full_way(probe)
    assert (dependencies._every_contract_held(probe) is None) == (bug is not None)
    assert bool(found) == (bug is not None)
    if bug is None:
        assert held == [BATCH, OWN_TOKEN, *([CAUSAL] if causal else []), HEADS]


@pytest.mark.parametrize("n, copies", [(4, 4), (6, 4), (8, 5), (12, 6), (16, 6), (32, 7), (64, 8), (71, 9)])
def test_the_copies_tell_every_two_heads_apart_in_both_directions(n, copies):
    """A leak from head a into head b shows only in a copy that moves a and not b; the fewest copies that
    give every ordered pair one (Sperner's antichains: 5 for 8 heads, as Llama 2 7B's 32 heads get 7,
    Falcon-7B's 71 get 9; the bits of the head index took 2·log2 H: 6, 10 and 14)."""
    from shapetrace.engine.head_hooks import _head_sets

    sets = _head_sets(n)
    assert len(sets) == copies
    assert all(any(a in s and b not in s for s in sets) for a in range(n) for b in range(n) if a != b)
    assert all(any(h in s for s in sets) for h in range(n))
