"""The heads contract measured without any axis name (issue 33 item 5): no ``--dims``, no
``shapetrace.name``; the head split is found from the structure (a feature axis split in two whose
product it is, then a batched product over one of them) and the values say whether heads stay apart.
Each bug has a correct twin that stays silent, at distinct sizes and at B = T = H = 4."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import shapetrace

SIZES = [(2, 5), (4, 4), (1, 5)]   # (B = 1: a batch axis of length one is followed too)
D, H = 32, 4


class NanoGPTAttention(nn.Module):
    """karpathy/nanoGPT model.py CausalSelfAttention (its mask left out): c_attn split three ways,
    view(B, T, nh, hs).transpose(1, 2), merged with transpose(1, 2).contiguous().view(B, T, C). The bug
    types the heads index twice in the value product (``einsum('bhqk,bgkd->bhqd')``: a sum over heads)."""

    def __init__(self, bug=False):
        super().__init__()
        self.c_attn, self.c_proj, self.bug = nn.Linear(D, 3 * D), nn.Linear(D, D), bug

    def forward(self, x):
        B, T, C = x.size()                                                         # (B, T, C)
        q, k, v = self.c_attn(x).split(C, dim=2)                                   # (B, T, C) each
        q = q.view(B, T, H, C // H).transpose(1, 2)                                # (B, nh, T, hs)
        k = k.view(B, T, H, C // H).transpose(1, 2)                                # (B, nh, T, hs)
        v = v.view(B, T, H, C // H).transpose(1, 2)                                # (B, nh, T, hs)
        att = F.softmax((q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1))), dim=-1)  # (B, nh, T, T)
        y = torch.einsum("bhqk,bgkd->bhqd", att, v) if self.bug else att @ v       # (B, nh, T, hs)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))           # (B, T, C)


class GPT2Attention(nn.Module):
    """transformers' models/gpt2/modeling_gpt2.py GPT2Attention (eager): ``_split_heads`` views to
    (B, T, H, d) and permutes (0, 2, 1, 3); ``_merge_heads`` permutes back and views to (B, T, D). The bug
    merges without the permute (transformer-from-scratch PR #6, FuxiCTR issue #30: shapes right, heads and
    tokens regrouped)."""

    def __init__(self, bug=False):
        super().__init__()
        self.c_attn, self.c_proj, self.bug = nn.Linear(D, 3 * D), nn.Linear(D, D), bug

    def _split_heads(self, tensor):
        new_shape = tensor.size()[:-1] + (H, D // H)
        return tensor.view(new_shape).permute(0, 2, 1, 3)                          # (B, H, T, d)

    def _merge_heads(self, tensor):
        if not self.bug:
            tensor = tensor.permute(0, 2, 1, 3)                                    # (B, T, H, d)
        new_shape = tensor.size()[:-2] + (D,) if not self.bug else (tensor.size(0), -1, D)
        return tensor.contiguous().view(new_shape)                                 # (B, T, D)

    def forward(self, hidden_states):
        query, key, value = self.c_attn(hidden_states).split(D, dim=2)             # (B, T, D) each
        query, key, value = (self._split_heads(t) for t in (query, key, value))    # (B, H, T, d) each
        attn_weights = torch.matmul(query, key.transpose(-1, -2)) / math.sqrt(D // H)  # (B, H, T, T)
        attn_output = torch.matmul(attn_weights.softmax(dim=-1), value)            # (B, H, T, d)
        return self.c_proj(self._merge_heads(attn_output))                         # (B, T, D)


class TimmAttention(nn.Module):
    """timm's vision_transformer.Attention (the manual path): qkv reshaped to (B, N, 3, H, d), permuted
    to (3, B, H, N, d) and unbound; merged with transpose(1, 2).reshape(B, N, C). The bug sums the value
    product over every head; the one fused split cannot tell values from weights, so it is a warning."""

    def __init__(self, bug=False):
        super().__init__()
        self.qkv, self.proj, self.bug = nn.Linear(D, 3 * D), nn.Linear(D, D), bug

    def forward(self, x):
        B, N, C = x.shape                                                          # (B, N, C)
        qkv = self.qkv(x).reshape(B, N, 3, H, C // H).permute(2, 0, 3, 1, 4)       # (3, B, H, N, d)
        q, k, v = qkv.unbind(0)                                                    # (B, H, N, d) each
        attn = (q * (C // H) ** -0.5 @ k.transpose(-2, -1)).softmax(dim=-1)       # (B, H, N, N)
        x = torch.einsum("bhqk,bgkd->bhqd", attn, v) if self.bug else attn @ v     # (B, H, N, d)
        return self.proj(x.transpose(1, 2).reshape(B, N, C))                       # (B, N, C)


class Blocks(nn.Module):
    """Two blocks run from a ``nn.ModuleList`` as nanoGPT's GPT.forward does (``for block in
    self.transformer.h``); only the second has the bug."""

    def __init__(self, bug=False):
        super().__init__()
        self.h = nn.ModuleList([NanoGPTAttention(), NanoGPTAttention(bug=bug)])

    def forward(self, x):
        for block in self.h:
            x = x + block(x)                                                       # (B, T, C)
        return x


def _traced(model, B, T):
    """The model traced with no names at all (no --dims), the dependency check asked for."""
    torch.manual_seed(0)
    x = torch.randn(B, T, D)
    with shapetrace.trace() as t:
        t.check_dependencies()
        model(x)
    return t


MODELS = {"nanogpt": NanoGPTAttention, "gpt2": GPT2Attention, "timm": TimmAttention, "blocks": Blocks}


@pytest.mark.parametrize(("B", "T"), SIZES)
@pytest.mark.parametrize("name", MODELS)
def test_correct_attention_keeps_heads_apart_without_names(name, B, T):
    torch.manual_seed(1)
    t = _traced(MODELS[name](), B, T)
    assert t.diagnostics == []
    held = "heads stay apart in each of 2 attentions" if name == "blocks" else "heads stay apart"
    assert t.contracts == [held]
    assert t.report().verdict.line == ("? nothing was checked: no axis could be named, so the table shows sizes "
                                       f"only; held on the values: {held}; not measured: batch entries stay apart, "
                                       "each token depends on itself (the input's batch and token axes have no names)")


EXPECTED = {
    "nanogpt": ("heads-mix", "head 0 of the output depends on heads 0, 1, 2 and 3 of the values (output heads 1, 2 "
                "and 3 too): heads mix between the split (#2 view, #4 view, #6 view) and the merge (#14 view)."),
    "gpt2": ("heads-mix", "head 0 of the output has elements that do not depend on head 0 of the queries but on "
             "heads 1, 2 and 3 of the queries, keys and values: the merge does not undo the split (between the "
             "split (#2 view, #4 view, #6 view) and the merge (#13 view))."),
    "timm": ("heads-talk", "head 0 of the output depends on heads 0, 1, 2 and 3 of the queries, keys and values "
             "(output heads 1, 2 and 3 too): heads mix between the split (#1 reshape) and the merge (#9 reshape)."),
    "blocks": ("heads-mix", "head 0 of the output depends on heads 0, 1, 2 and 3 of the values (output heads 1, 2 "
               "and 3 too): heads mix between the split (#18 view, #20 view, #22 view) and the merge (#30 view)."),
}


@pytest.mark.parametrize(("B", "T"), SIZES)
@pytest.mark.parametrize("name", MODELS)
def test_heads_that_mix_are_a_finding_without_names(name, B, T):
    """No axis is named, so no rule can see these bugs; the values say which heads leaked."""
    torch.manual_seed(1)
    t = _traced(MODELS[name](bug=True), B, T)
    kind, sentence = EXPECTED[name]
    assert [d.kind for d in t.diagnostics] == [kind]
    assert t.diagnostics[0].message.startswith(f"measured on the values: {sentence}")
    assert t.contracts == []
    assert t.report().verdict.mark == ("!" if kind == "heads-talk" else "✗")


class GPT(nn.Module):
    """nanoGPT's GPT.forward: token ids through ``wte``, then the blocks (``idx`` is an integer tensor:
    nothing to move at the input, so only the heads, moved at the splits, are measured)."""

    def __init__(self, bug=False):
        super().__init__()
        self.wte, self.blocks = nn.Embedding(50, D), Blocks(bug=bug)

    def forward(self, idx):
        return self.blocks(self.wte(idx))                                          # (B, T, C)


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_a_model_fed_token_ids_has_its_heads_measured(B, T):
    for bug, found, held in [(False, [], ["heads stay apart in each of 2 attentions"]), (True, ["heads-mix"], [])]:
        torch.manual_seed(1)
        model, idx = GPT(bug=bug), torch.randint(0, 50, (B, T))
        with shapetrace.trace() as t:
            t.check_dependencies()
            model(idx)
        assert [d.kind for d in t.diagnostics] == found and t.contracts == held
    assert t.diagnostics[0].message.startswith(
        "measured on the values: head 0 of the output depends on heads 0, 1, 2 and 3 of the values")
