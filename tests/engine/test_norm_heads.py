"""A norm across the heads of each token (shapetrace/engine/rules/norm_heads.py): KellerJordan/modded-nanogpt
normalises q and k per head, ``F.rms_norm(x, (x.size(-1),))``; with the normalised shape taken as the last two
sizes, ``x.shape[-2:]`` on ``[B, T, H, d_k]``, each token is normalised across all its heads
(tests/corpus/public14/modded_nanogpt.py, norm-over-heads). The same numbers as a norm over D before the split
(OLMo 2's q/k norm), so a note that leaves ``?``: on 01c874a, once the file's rotary table had its names, the bug
was ``✓``."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

import shapetrace


def _normed(shape_of):
    q = torch.randn(2, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(q, "B T D")
        heads = q.view(2, 6, 4, 8)                                                 # (B, T, H, d_k)
        F.rms_norm(heads, shape_of(heads))
    return t


def test_a_norm_across_the_heads_is_a_note_that_leaves_the_verdict_unproven():
    t = _normed(lambda x: x.shape[-2:])
    assert [(d.severity, d.kind) for d in t.diagnostics] == [("note", "norm-across-heads")]
    assert t.diagnostics[0].message == (
        "rms_norm #1 normalises [B=2, T=6, H=4, d_k=8] along H, d_k together: one norm across the 4 heads of each "
        "token, not one per head. A norm over D before the split computes the same (OLMo 2's q/k norm); a per-head "
        "norm takes the last axis alone.")
    assert t.report().verdict.mark == "?"


@pytest.mark.parametrize("shape_of", [lambda x: (x.size(-1),), lambda x: x.shape[-1:]])
def test_a_norm_per_head_is_silent(shape_of):
    t = _normed(shape_of)
    assert [d.kind for d in t.diagnostics] == []
    assert t.report().verdict.mark == "✓"


class QKNormAttention(torch.nn.Module):
    """MegaVIT's attention (tests/corpus/reports24/megavit_qk_norm_kv): q, k, v from one fused projection, heads
    split, a per-head ``LayerNorm(d_k)`` on the operands ``normed`` names, ``softmax(q @ k^T)`` @ v, merged."""

    def __init__(self, normed=("q", "k")):
        super().__init__()
        self.normed, self.qkv = normed, torch.nn.Linear(32, 96, bias=False)
        self.q_norm, self.k_norm = torch.nn.LayerNorm(8), torch.nn.LayerNorm(8)

    def forward(self, x):                                                          # (B, T, D)
        b, n, _ = x.shape
        q, k, v = (t.view(b, n, 4, 8).transpose(1, 2) for t in self.qkv(x).chunk(3, dim=-1))   # (B, H, T, d_k)
        norms = iter((self.q_norm, self.k_norm))
        q, k, v = (next(norms)(t) if name in self.normed else t for name, t in zip("qkv", (q, k, v)))
        out = (q @ k.transpose(-1, -2) * 8 ** -0.5).softmax(-1) @ v                   # (B, H, T, d_k)
        return out.transpose(1, 2).reshape(b, n, 32)


def _qk_traced(normed):
    torch.manual_seed(0)
    model, x = QKNormAttention(normed).eval(), torch.randn(2, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        model(x)
    return t


def test_a_norm_on_the_keys_and_values_with_raw_queries_is_a_note_that_leaves_the_verdict_unproven():
    """kyegomez/MegaVIT issue #17: the q and k norms applied to k and v: ``✓`` on eefe532 (a named miss of
    tests/corpus/test_public_reports24.py); now a ``qk-norm-one-sided`` note and ``?``."""
    t = _qk_traced(("k", "v"))
    assert [(d.severity, d.kind) for d in t.diagnostics] == [("note", "qk-norm-one-sided")]
    assert t.diagnostics[0].message == (
        "matmul #11 scores queries against keys with the keys normalised on their way from the projection and the "
        "queries not: a qk-norm normalises both (a norm given to another operand leaves the same shapes and "
        "names). Not proven right or wrong.")
    assert t.report().verdict.mark == "?"


@pytest.mark.parametrize("normed", [("q", "k"), ()])
def test_a_qk_norm_on_both_or_on_neither_is_silent(normed):
    t = _qk_traced(normed)
    assert [d.kind for d in t.diagnostics] == []
    assert t.report().verdict.mark == "✓"
