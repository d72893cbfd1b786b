"""Folding the backward's rows (:mod:`shapetrace.app.backward_folding`) as the forward's ops fold: a block of
grads that repeats an earlier one fact for fact (q's split heads and v's), and a layer's grads that repeat
the layer autograd ran before it (a 12-layer GPT)."""

from __future__ import annotations

import io
import math
import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from rich.console import Console

import shapetrace
from shapetrace.app.backward_folding import fold_backward
from shapetrace.app.classroom import ViewOptions
from shapetrace.attention.reference import MultiHeadAttention
from shapetrace.render.backward import BackwardView


def _reference(D: int, H: int, T: int, B: int = 2):
    """The reference (the Annotated Transformer's MultiHeadedAttention: one ``split_heads`` for q, k and v)."""
    torch.manual_seed(0)
    model, x = MultiHeadAttention(D, H), torch.randn(B, T, D)
    with shapetrace.trace(f"B={B} T={T} D={D} H={H}", backward=True) as t:
        shapetrace.name(x, "B T D")
        model(x)
    return t.report()


class CausalSelfAttention(nn.Module):
    """nanoGPT's model.py (karpathy/nanoGPT), its attention written out (no flash path)."""

    def __init__(self, n_embd: int, n_head: int, block_size: int):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd = n_head, n_embd
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size,
                                                                                         block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, nh, T, T)
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int, block_size: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)

    def forward(self, x):
        return x + self.attn(self.ln_1(x))


class GPT(nn.Module):
    """nanoGPT's ``transformer.h``: 12 blocks, each called in a loop."""

    def __init__(self, n_layer: int = 12, n_embd: int = 16, n_head: int = 2, block_size: int = 8):
        super().__init__()
        self.h = nn.ModuleList([Block(n_embd, n_head, block_size) for _ in range(n_layer)])

    def forward(self, x):
        for block in self.h:
            x = block(x)
        return x


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(0)
    model, x = GPT(), torch.randn(2, 5, 16)
    with shapetrace.trace("B=2 T=5 D=16 H=2", backward=True) as t:
        shapetrace.name(x, "B T D")
        model(x)
    return t.report()


@pytest.mark.parametrize("sizes", [(16, 2, 3, 2), (16, 4, 4, 4)], ids=["D16-H2-T3", "T=H=B=4"])
def test_q_split_heads_grads_fold_into_v_s_and_k_s_strided_ones_do_not(sizes):
    # the reference's k is transposed for q @ kᵀ, so k's split-heads grads arrive with other strides (a view
    # where q's and v's copy): only q's block repeats v's fact for fact; at T = H = B = 4 too
    report = _reference(*sizes)
    folds = fold_backward(report.backward.rows, report.events)
    assert [([r.order for r in f.rows], [r.order for r in f.original], f.sentence) for f in folds] == [
        ([15, 16], [9, 10], "q: the same two grads as v, rows 9-10")]
    assert [(r.event, r.op) for r in folds[0].rows] == [(2, "transpose"), (1, "view")]


def test_a_diagnosed_forward_op_keeps_its_grad_rows():
    report = _reference(16, 2, 3)
    assert fold_backward(report.backward.rows, report.events, keep={1}) == []


def test_a_12_layer_gpt_folds_the_layers_whose_grads_repeat_the_layer_before(gpt):
    # h.11's first grad is the sum's (one 1 expanded, stride 0) and h.0's input needs no grad: both shown
    folds = fold_backward(gpt.backward.rows, gpt.events)
    assert len(gpt.backward.rows) == 240
    assert [(f.label, f.sentence) for f in folds] == [("40-219", "h.9-1: the same 20 grads as h.10")]
    assert {r.module.split(".")[1] for r in folds[0].rows} == {str(n) for n in range(1, 10)}


def _text(report, fold: bool, width: int = 100) -> list[str]:
    console = Console(file=io.StringIO(), width=width, color_system=None, legacy_windows=False)
    console.print(BackwardView.of(report, ViewOptions(fold=fold)))
    return [line.rstrip() for line in console.file.getvalue().splitlines()]


def test_the_folded_table_shows_one_line_per_fold_and_all_shows_every_row(gpt):
    lines = _text(gpt, fold=True)
    assert "40-219  h.9-1: the same 20 grads as h.10" in lines
    assert not any(line.lstrip().startswith(("40  grad", "219  grad")) for line in lines)
    assert "   220  grad (add)             [B=2, T=5, D=16]        (80, 16, 1)     640 B" in lines
    every = _text(gpt, fold=False)
    assert sum(bool(re.match(r" *\d+  grad ", line)) for line in every) == 240
    assert not any("the same 20 grads" in line for line in every)


def test_the_reference_s_folded_block_names_its_forward_ops_at_80_columns():
    lines = _text(_reference(512, 8, 6), fold=True, width=80)
    assert "15-16  grad #2 transpose, #1 view · q: the same two grads as v, rows 9-10" in lines
    assert "   17  grad #0 linear       [B=2, T=6, D=512]        (3072, 512, 1)      24 KiB" in lines
    assert all(len(line) <= 80 for line in lines)
