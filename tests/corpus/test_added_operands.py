"""An addition onto the scores whose two operands are the same size: the bias is still the one read.

At B = 1 a full position bias (lucidrains/x-transformers ``AlibiPositionalBias`` returns ``[H, T, T]``;
transformers' T5 ``compute_bias`` returns ``[1, H, T, T]``) has as many entries as the scores
``[1, H, T, T]``. Capture kept a copy of the smaller operand only, and on a tie the first one, the
scores: the bias was never read, and a reversed ALiBi at B = 1 ended ``?`` with no finding (it was
found at B = 2). Both operands are now kept on a tie and the analysis reads the one that is not the
scores, in either order (``scores + bias`` and ``bias + scores``).
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import shapetrace
from tests.corpus.test_directions import AlibiAttention, get_slopes


def reversed_alibi_findings(t) -> list[str]:
    return [d.kind for d in t.diagnostics if d.severity != "note"]


@pytest.mark.parametrize("dims", ["B=1 T=5 D=24 H=3", "B=1 T=4 D=16 H=4"])
@pytest.mark.parametrize("sign", [1, -1])
def test_a_full_bias_as_large_as_the_scores_is_read_at_batch_one(dims, sign):
    sizes = dict(part.split("=") for part in dims.split())
    B, T, D, H = (int(sizes[k]) for k in "BTDH")
    model = AlibiAttention(D, H, "lucidrains", sign).eval()
    x = torch.randn(B, T, D)
    with shapetrace.trace(dims=dims) as t:
        shapetrace.name(x, "B T D")
        model(x)
    [add] = [e for e in t.events if e.op == "add"]
    assert [o.shape for o in add.inputs] == [(1, H, T, T), (H, T, T)]   # a tie: H·T·T entries each
    assert reversed_alibi_findings(t) == ([] if sign == 1 else ["distance-bias-reversed"])
    assert (t.report().verdict.mark == "✗") == (sign == -1)


class BiasFirst(nn.Module):
    """transformers' T5Attention adds ``scores += position_bias_masked`` onto the scores; here the bias
    comes first, ``position_bias + scores``, a full ``[1, H, T, T]`` table at B = 1 (the same size as
    the scores), ALiBi-shaped: ``-slope · |i - j|``, or its reverse with ``sign=-1``."""

    def __init__(self, dim: int, heads: int, sign: int):
        super().__init__()
        self.heads, self.sign = heads, sign
        self.qkv = nn.Linear(dim, 3 * dim)
        self.register_buffer("slopes", torch.tensor(get_slopes(heads)), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)   # (B, H, T, d_k)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)   # (B, H, T, d_k)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)   # (B, H, T, d_k)
        i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
        distance = torch.abs(j - i)                                     # (T, T)
        position_bias = (-self.sign * self.slopes.view(-1, 1, 1) * distance).unsqueeze(0)  # (1, H, T, T)
        scores = position_bias + q @ k.transpose(-2, -1) / math.sqrt(C // self.heads)  # (B, H, T, T)
        return scores.softmax(dim=-1) @ v                               # (B, H, T, d_k)


@pytest.mark.parametrize("sign", [1, -1])
def test_the_bias_is_read_when_it_comes_first_and_ties_with_the_scores(sign):
    x = torch.randn(1, 5, 24)
    with shapetrace.trace(dims="B=1 T=5 D=24 H=3") as t:
        shapetrace.name(x, "B T D")
        BiasFirst(24, 3, sign).eval()(x)
    [add] = [e for e in t.events if e.op == "add"]
    assert [o.shape for o in add.inputs] == [(1, 3, 5, 5), (1, 3, 5, 5)]
    assert reversed_alibi_findings(t) == ([] if sign == 1 else ["distance-bias-reversed"])
