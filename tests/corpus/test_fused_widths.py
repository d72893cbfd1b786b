"""A fused projection's width is named only where a use proves it (issue 33: equal sizes never decide a
name). gemma_pytorch's ``qkv_proj`` at head_dim 12, H = 4, H_kv = 2 is (4 + 2·2)·12 = 96 wide, which is
3·D at D = 32: 344af9b named it ``3*D`` from its size, read the key and value slices as pieces of it and
ended a correct file ``✗ batch-mismatch``. The ``split([48, 24, 24])`` that cuts it inside its would-be
parts disproves the name; a ``split(D)`` at the parts' bounds (nanoGPT) keeps it."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import shapetrace
from tests.corpus.public6 import gemma_pytorch

DISTINCT, EQUAL = "B=2 T=6 D=32 H=4 H_kv=2", "B=4 T=4 D=32 H=4 H_kv=2"


def _gemma(dims: str, head_dim: int):
    sizes = dict(kv.split("=") for kv in dims.split())
    model, (x,) = gemma_pytorch.build("", int(sizes["B"]), int(sizes["T"]), 32, 4, head_dim=head_dim)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        model(x)
    return t


@pytest.mark.parametrize("dims", [DISTINCT, EQUAL])
def test_gemma_width_that_equals_three_d_is_not_named_three_d(dims):
    t = _gemma(dims, 12)
    assert [d.kind for d in t.diagnostics if d.severity in ("error", "warning")] == []
    projections = [e for e in t.events if e.op == "linear" and "qkv_proj" in e.code]
    assert len(projections) == 2
    assert all("3*D" not in str(e.outputs[0].dims) for e in t.events)
    assert t.report().verdict.line.startswith("? checked")


class _NanoGPT(nn.Module):
    """karpathy/nanoGPT ``CausalSelfAttention``: ``c_attn`` is 3·D wide, cut ``split(n_embd, dim=2)``."""

    def __init__(self, d: int, h: int):
        super().__init__()
        self.h, self.c_attn, self.c_proj = h, nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        k = k.view(B, T, self.h, C // self.h).transpose(1, 2)  # (B, H, T, d_k)
        q = q.view(B, T, self.h, C // self.h).transpose(1, 2)
        v = v.view(B, T, self.h, C // self.h).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


@pytest.mark.parametrize("dims", ["B=2 T=6 D=96 H=4", "B=4 T=4 D=96 H=4"])
def test_fused_width_cut_at_its_parts_stays_three_d(dims):
    b, t_ = (2, 6) if "B=2" in dims else (4, 4)
    torch.manual_seed(0)
    model, x = _NanoGPT(96, 4).eval(), torch.randn(b, t_, 96)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        model(x)
    assert [d.kind for d in t.diagnostics if d.severity in ("error", "warning")] == []
    assert t.events[0].outputs[0].dims == ("B", "T", "3*D")
    assert [o.dims for o in t.events[1].outputs] == [("B", "T", "D")] * 3


# -- head_dim declared apart from D / H (Gemma-7B: 256 ≠ 3072 / 16) -------------------------------------

NARROW = ["B=2 T=6 D=32 H=4 H_kv=2 d_k=16", "B=4 T=4 D=32 H=4 H_kv=2 d_k=16"]


def _findings(t) -> tuple[str, ...]:
    return tuple(d.kind for d in t.diagnostics if d.severity in ("error", "warning"))


@pytest.mark.parametrize("dims", NARROW)
def test_gemma_fused_projection_of_narrower_heads_is_named_by_its_split(dims):
    """``qkv_proj`` is (H + 2·H_kv)·d_k = 128 wide with d_k = 16 declared and D = 32: 344af9b left it
    unnamed (8 of 80 ops checked). The split at the parts' bounds and ``xq.view(B, -1, H, head_dim)``
    prove it: ``H*d_k+2*D_kv``, then ``H*d_k``, ``D_kv``, ``D_kv`` and heads of d_k."""
    t = _gemma(dims, 16)
    assert _findings(t) == ()
    linear, split, view_q, view_k = [e for e in t.events if e.op in ("linear", "split", "view")][:4]
    assert linear.outputs[0].dims[-1] == "H*d_k+2*D_kv"
    assert [o.dims[-1] for o in split.outputs] == ["H*d_k", "D_kv", "D_kv"]
    assert view_q.outputs[0].dims[2:] == ("H", "d_k") and view_k.outputs[0].dims[2:] == ("H_kv", "d_k")
    # the table shows no name that another reading of equal sizes gives otherwise (engine/readings.py): the
    # input [B, T, 32] also fits [B, T, D_kv] (D = D_kv = 32), so its width is unnamed in the two slices of it
    # (64 → 62 ops checked; 65 since o_proj, from the merged heads H·d_k back to D, is named D: round 9); at
    # B = T = 4 every op has an axis the two orders name B or T (0 checked); 63 since the two adds of the
    # unnamed mask [1, 1, T, L] count as unchecked: nothing checked how its axes line up with the scores'; 65
    # since r22: the prefill's rotary rows ``freqs_cis.index_select(0, positions)`` lined up with the pairs are
    # named on both axes (T[0:3], d_k[0:8]), where complex_tables' merge of its walkers' pins kept the last only
    checked = 0 if "B=4 T=4" in dims else 65
    assert t.report().verdict.line.startswith(f"? checked {checked} of 80 ops")


@pytest.mark.parametrize("dims", NARROW)
def test_gemma_kv_heads_tiled_are_found_once_the_heads_are_named(dims):
    sizes = dict(kv.split("=") for kv in dims.split())
    model, (x,) = gemma_pytorch.build("repeat-tiled", int(sizes["B"]), int(sizes["T"]), 32, 4)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        model(x)
    # (and the batch-mismatch of the same matmuls, folded under it since 6e2d55a's successor: the rule blames
    # the axis the repeat tiles where the repeat lays it; k's line and v's are one finding each)
    assert _findings(t) == ("gqa-head-order", "gqa-head-order")


@pytest.mark.parametrize("dims", NARROW)
def test_gemma_mask_rows_from_zero_is_not_a_check_mark(dims):
    # the mask's rows picked by positions are not followed yet: no finding, but no ✓ either
    sizes = dict(kv.split("=") for kv in dims.split())
    model, (x,) = gemma_pytorch.build("mask-rows-from-zero", int(sizes["B"]), int(sizes["T"]), 32, 4)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        model(x)
    assert t.report().verdict.line.startswith("? ")


class _Cut(nn.Module):
    """A projection to (H + 2·H_kv)·d_k = 128 that is no fused q/k/v: an MLP's hidden layer, or a width cut
    [32, 48, 48] off the parts' bounds. Its width alone names nothing."""

    def __init__(self, split: bool):
        super().__init__()
        self.split, self.up, self.down = split, nn.Linear(32, 128), nn.Linear(128, 32)

    def forward(self, x):
        h = self.up(x)
        if self.split:
            a, b, c = h.split([32, 48, 48], dim=-1)
            return a + self.down(torch.cat([a, b, c], dim=-1))
        return x + self.down(F.gelu(h))


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("dims", NARROW)
def test_a_width_of_narrow_fused_qkv_not_split_into_heads_stays_unnamed(dims, split):
    b, t_ = (2, 6) if "B=2" in dims else (4, 4)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        _Cut(split)(torch.randn(b, t_, 32))
    assert t.events[0].outputs[0].dims == ("B", "T", None)
    assert all("H*d_k" not in str(o.dims) for e in t.events for o in e.outputs)
