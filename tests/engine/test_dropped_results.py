"""What an op computes is no finding where its results reach nothing the model returned (shapetrace/engine/unread.py
``dropped_records``, rules/diagnose.py ``_on_what_reaches_the_output``). time-series-foundation-models/lag-llama
(issue #81, pull request #84) decodes with ``q, _ = apply_rotary_pos_emb(q, k, cos, sin, position_ids=[-1])``: the keys
are rotated there by the query's one angle and thrown away, and the next line rotates them properly. On 48917dd the
correct file was ``✗ rotary-same-angle-every-token`` on that discarded value (tests/corpus/reports40/lagllama_kv_cache).
A rule about a dropped value itself (a projection bypassed, an input unread) still speaks."""

from __future__ import annotations

import math

import torch
from torch import nn

import shapetrace
from tests.corpus.helpers import traced_build
from tests.corpus.reports40 import lagllama_kv_cache


class _Scores(nn.Module):
    """nanoGPT-style heads; ``peek`` computes the weights a second time along the queries (a debugging line, its
    result dropped: ``_ = att.softmax(dim=-2)``); ``use_peek`` uses that wrong softmax (the control)."""

    def __init__(self, d: int = 32, h: int = 4, peek: bool = False, use_peek: bool = False):
        super().__init__()
        self.h, self.peek, self.use_peek = h, peek, use_peek
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        B, T, C = x.shape                                                              # (B, T, D)
        q, k, v = self.qkv(x).split(C, dim=2)                                          # (B, T, D) each
        q = q.view(B, T, self.h, C // self.h).transpose(1, 2)                          # (B, H, T, d_k)
        k = k.view(B, T, self.h, C // self.h).transpose(1, 2)                          # (B, H, T, d_k)
        v = v.view(B, T, self.h, C // self.h).transpose(1, 2)                          # (B, H, T, d_k)
        att = q @ k.transpose(-2, -1) / math.sqrt(k.size(-1))                          # (B, H, T, T)
        wrong = att.softmax(dim=-2) if self.peek or self.use_peek else None           # (B, H, T, T)
        att = wrong if self.use_peek else att.softmax(dim=-1)                          # (B, H, T, T)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)                       # (B, T, D)
        return self.proj(y)


def _traced(model):
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=5 D=32 H=4") as t:
        model(torch.randn(2, 5, 32))
    return t


def test_a_wrong_softmax_whose_result_is_dropped_is_no_finding_and_its_event_is_dropped():
    t = _traced(_Scores(peek=True).eval())
    assert [d.kind for d in t.diagnostics] == []
    wrong = [e.index for e in t.events if e.op == "softmax" and e.params.get("dim") in (-2, 2)]
    assert len(wrong) == 1 and wrong[0] in t.analysis().dropped
    assert t.report().verdict.line.startswith("✓")


def test_the_same_softmax_used_is_an_error_on_it():
    t = _traced(_Scores(use_peek=True).eval())
    assert [(d.severity, d.kind) for d in t.diagnostics] == [("error", "softmax-wrong-axis")]
    assert t.diagnostics[0].event not in t.analysis().dropped


def test_lagllama_keys_rotated_and_discarded_are_no_error_while_the_step_length_bug_is():
    correct = traced_build(lagllama_kv_cache, "", "B=2 T=5 D=32 H=4")
    assert [d.kind for d in correct.diagnostics if d.severity != "note"] == []
    bug = traced_build(lagllama_kv_cache, "rope-step-length", "B=2 T=5 D=32 H=4")
    assert [(d.severity, d.kind) for d in bug.diagnostics if d.severity != "note"] == [
        ("error", "rotary-same-angle-every-token")]
    assert bug.diagnostics[0].event not in bug.analysis().dropped
