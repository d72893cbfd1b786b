"""The head split found from the structure alone (engine/head_structure.py): which axis a split makes
is the heads axis only where the scores' product batches over it in both operands, so the heads may
sit anywhere in the split, and layouts with no such split are left unmeasured (never guessed)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import shapetrace
from shapetrace.engine.heads import HEADS

SIZES = [(2, 5), (4, 4)]


class MinorHeads(nn.Module):
    """Heads as the minor factor of the feature split: view(B, T, d, H).permute(0, 3, 1, 2), merged with
    the inverse permute(0, 2, 3, 1).reshape(B, T, D) (correct code: the split's layout is a choice; the
    product says which axis is the heads). ``bug``: the merge forgets the permute back."""

    def __init__(self, bug=False, d_model=32, heads=4):
        super().__init__()
        self.qkv, self.heads, self.bug = nn.Linear(d_model, 3 * d_model), heads, bug

    def forward(self, x):
        B, T, D = x.shape                                                          # (B, T, D)
        q, k, v = (t.reshape(B, T, D // self.heads, self.heads).permute(0, 3, 1, 2)  # (B, H, T, d)
                   for t in self.qkv(x).chunk(3, dim=-1))
        y = (q @ k.transpose(-2, -1)).softmax(-1) @ v                              # (B, H, T, d)
        if self.bug:
            return y.reshape(B, T, D)                                              # (B, T, D), regrouped
        return y.permute(0, 2, 3, 1).reshape(B, T, D)                              # (B, T, D)


class SequenceFirst(nn.Module):
    """fairseq / torch.nn.functional.multi_head_attention_forward layout: (T, B, D) input, heads folded
    into the batch with view(T, B * H, d).transpose(0, 1): no axis of its own, so nothing is measured."""

    def __init__(self, d_model=32, heads=4):
        super().__init__()
        self.qkv, self.heads = nn.Linear(d_model, 3 * d_model), heads

    def forward(self, x):
        T, B, D = x.shape                                                          # (T, B, D)
        q, k, v = (t.contiguous().view(T, B * self.heads, D // self.heads).transpose(0, 1)  # (B*H, T, d)
                   for t in self.qkv(x).chunk(3, dim=-1))
        y = torch.bmm(torch.bmm(q, k.transpose(1, 2)).softmax(-1), v)              # (B*H, T, d)
        return y.transpose(0, 1).contiguous().view(T, B, D)                        # (T, B, D)


def _traced(model, shape):
    torch.manual_seed(0)
    x = torch.randn(*shape)
    with shapetrace.trace() as t:
        t.check_dependencies()
        model(x)
    return t


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_heads_as_the_minor_factor_are_found_by_the_product(B, T):
    torch.manual_seed(1)
    t = _traced(MinorHeads(), (B, T, 32))
    assert t.diagnostics == [] and t.contracts == [HEADS]
    torch.manual_seed(1)
    t = _traced(MinorHeads(bug=True), (B, T, 32))
    assert [d.kind for d in t.diagnostics] == ["heads-mix"]
    assert t.diagnostics[0].message.startswith(
        "measured on the values: head 0 of the output has elements that do not depend on head 0 of the queries")


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_heads_folded_into_the_batch_are_not_measured(B, T):
    t = _traced(SequenceFirst(), (T, B, 32))
    assert t.diagnostics == [] and t.contracts == []
    assert t.unmeasured == [   # (742b81f: nothing said)
        "batch entries stay apart, each token depends on itself (the input's batch and token axes have no names)",
        "heads (no head split found)"]


class MinorSplitMajorMerge(nn.Module):
    """GATr's baseline attention (Qualcomm-AI-research/geometric-algebra-transformer, tests/corpus/reports6/
    gatr_layernorm_items): one fused projection split ``(qkv d H)``, the heads the minor factor, and merged
    ``(H d)``, the heads the major one, before the output projection. Correct code: the projection after the
    merge reads the whole row, so which order the merge lays the heads in is a choice."""

    def __init__(self, d_model=32, heads=4):
        super().__init__()
        self.qkv, self.out, self.heads = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model), heads

    def forward(self, x):
        B, T, D = x.shape                                                               # (B, T, D)
        qkv = self.qkv(x).reshape(B, T, 3, D // self.heads, self.heads)                 # (B, T, 3, d, H)
        q, k, v = qkv.permute(2, 0, 4, 1, 3)                                            # (B, H, T, d) each
        y = (q @ k.transpose(-2, -1)).softmax(-1) @ v                                   # (B, H, T, d)
        return self.out(y.permute(0, 2, 1, 3).reshape(B, T, D))                         # (B, T, H·d)


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_a_merge_that_lays_the_heads_out_unlike_the_split_is_read_where_it_puts_them(B, T):
    """The merge's heads axis is followed from the split through the permutes (:attr:`Found.merge_heads`), so
    the merged output's heads are read where the merge puts them, not where the split took them from: on
    9d6f047 the split's map was used and the heads contract said ``heads-talk`` on this correct code."""
    t = _traced(MinorSplitMajorMerge(), (B, T, 32))
    assert t.diagnostics == [] and t.contracts == [HEADS]
