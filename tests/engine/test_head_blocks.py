"""A projection's width cut ``(2, H/2, d_k)`` and taken apart by ``kv[0]``, ``kv[1]``
(shapetrace/engine/rules/head_blocks.py): Shunted attention's keys and values of half the heads each
(OliverRensu/Shunted-Transformer, SSA.py: ``kv1(x_1).reshape(B, -1, 2, num_heads // 2, C // num_heads)``, paired
with ``q[:, :num_heads // 2]``). On 5afe940 the part's heads ``H%2`` (their block ``H/2`` picked away) against the
query heads ``H[0:2]`` were a false ``batch-mismatch`` error; a standing-alone minor piece of heads is a part's own
heads and lines up with a cut of the same heads of its size (as mamba's ``'... (two hkv d)'`` parts, repeated over
the query heads, already did). The twin with the heads cut interleaved ``(2, d_k, H/2)`` (``D%2``) keeps its
error; a fused ``[3, B, H, T, d_k]`` picked by ``[0]`` keeps its whole ``H``."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import shapetrace


def _shunted_half(x, H, interleaved=False):
    B, N, D = x.shape
    q = nn.Linear(D, D)(x).reshape(B, N, H, D // H).permute(0, 2, 1, 3)                   # (B, H, T, d_k)
    kv = nn.Linear(D, D)(x)
    if interleaved:
        kv = kv.reshape(B, N, 2, D // H, H // 2).permute(2, 0, 4, 1, 3)                    # (2, B, H/2, T, d_k)
    else:
        kv = kv.reshape(B, N, 2, H // 2, D // H).permute(2, 0, 3, 1, 4)                    # (2, B, H/2, T, d_k)
    k, v = kv[0], kv[1]                                                                    # (B, H/2, T, d_k)
    attn = (q[:, :H // 2] @ k.transpose(-2, -1)).softmax(dim=-1)                           # (B, H/2, T, T)
    return attn @ v, k                                                                     # (B, H/2, T, d_k)


def _fused(x, H):
    B, N, D = x.shape
    qkv = nn.Linear(D, 3 * D)(x).reshape(B, N, 3, H, D // H).permute(2, 0, 3, 1, 4)         # (3, B, H, T, d_k)
    q, k, v = qkv[0], qkv[1], qkv[2]                                                       # (B, H, T, d_k)
    return (q @ k.transpose(-2, -1)).softmax(dim=-1) @ v, k


def _traced(fn, B=2, T=6, D=32, H=4, **kw):
    torch.manual_seed(0)
    x = torch.randn(B, T, D)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        shapetrace.name(x, "B T D")
        _, k = fn(x, H, **kw)
    picked = [e for e in t.events if e.op == "__getitem__" and tuple(e.outputs[0].shape) == tuple(k.shape)]
    return t, picked


def _errors(t):
    return [d.kind for d in t.diagnostics if d.severity == "error"]


def test_a_parts_own_heads_line_up_with_half_the_query_heads():
    t, picked = _traced(_shunted_half)
    assert _errors(t) == []
    assert tuple(picked[0].outputs[0].dims) == ("B", "H%2", "T", "d_k")


def test_the_interleaved_twin_keeps_its_error():
    t, _ = _traced(_shunted_half, interleaved=True)
    assert "batch-mismatch" in _errors(t)


@pytest.mark.parametrize("B", [2, 4])
def test_a_pick_from_a_fused_stack_keeps_whole_heads(B):
    t, picked = _traced(_fused, B=B)
    assert _errors(t) == []
    if B == 2:
        assert tuple(picked[0].outputs[0].dims) == ("B", "H", "T", "d_k")
