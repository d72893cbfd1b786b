"""A head width set in the config, not D / H (transformers models/gemma/modeling_gemma.py GemmaAttention:
``self.head_dim = config.head_dim``; q_proj is Linear(D, H·head_dim), o_proj Linear(H·head_dim, D);
``hidden_shape = (*input_shape, -1, self.head_dim)``). ``--dims`` takes it as d_k; when the sizes given
disagree with the split the code makes, one note says so and no note built on those sizes is printed."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import ROOT, cli_in_process
from torch import nn

import shapetrace

D, H = 64, 4


class GemmaAttention(nn.Module):
    """GemmaAttention.forward (eager path) without rotary; ``bug=True`` views as (head_dim, heads): the
    head width swapped with H, so each "head" takes every H-th feature."""

    def __init__(self, head_dim, kv_heads=H, bug=False, d_model=D):
        super().__init__()
        self.head_dim, self.groups, self.bug = head_dim, H // kv_heads, bug
        self.q_proj = nn.Linear(d_model, H * head_dim, bias=False)
        self.k_proj = nn.Linear(d_model, kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(d_model, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(H * head_dim, d_model, bias=False)

    def forward(self, x):
        input_shape = x.shape[:-1]
        hidden_shape = (*input_shape, self.head_dim, -1) if self.bug else (*input_shape, -1, self.head_dim)
        q = self.q_proj(x).view(hidden_shape).transpose(1, 2)                      # (B, H, T, d_k)
        k = self.k_proj(x).view(hidden_shape).transpose(1, 2)                      # (B, H_kv, T, d_k)
        v = self.v_proj(x).view(hidden_shape).transpose(1, 2)                      # (B, H_kv, T, d_k)
        k = k.repeat_interleave(self.groups, dim=1)                                # (B, H, T, d_k)
        v = v.repeat_interleave(self.groups, dim=1)                                # (B, H, T, d_k)
        w = torch.matmul(q, k.transpose(2, 3)) * self.head_dim ** -0.5             # (B, H, T, T)
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)                  # (B, H, T, T)
        o = torch.matmul(w, v).transpose(1, 2).contiguous()                        # (B, T, H, d_k)
        return self.o_proj(o.reshape(*input_shape, -1))                            # (B, T, D)


def _trace(model, B, T, dims, d_model=D):
    torch.manual_seed(0)
    x = torch.randn(B, T, d_model)
    with shapetrace.trace(dims=dims) as t:
        model(x)
    return t


# (B, T, head_dim): distinct sizes, and head_dim = H = T = B = 4
SIZES = [(2, 6, 32), (4, 4, 4)]


@pytest.mark.parametrize(("B", "T", "hd"), SIZES)
def test_a_head_width_given_as_d_k_names_the_split_and_says_nothing_false(B, T, hd):
    t = _trace(GemmaAttention(hd), B, T, f"B={B} T={T} D={D} H={H} d_k={hd}")
    q = next(e for e in t.events if e.op == "transpose")
    assert q.outputs[0].dims == ("B", "H", "T", "d_k")
    assert [d.kind for d in t.diagnostics if d.kind != "ambiguous-sizes"] == []
    assert t.events[-1].outputs[0].dims == ("B", "T", "D")


# (at head_dim = H the two views are one op, so the twin runs at head_dim 8 beside T = H = B = 4)
@pytest.mark.parametrize(("B", "T", "hd"), [(2, 6, 32), (4, 4, 8)])
def test_the_head_width_swapped_with_the_heads_is_still_found(B, T, hd):
    # the bug twin: view(B, T, head_dim, H) (FuxiCTR issue #30's class of layout bug, on Gemma's sizes)
    t = _trace(GemmaAttention(hd, bug=True), B, T, f"B={B} T={T} D={D} H={H} d_k={hd}")
    notes = [d for d in t.diagnostics if d.kind == "nonstandard-head-split"]
    assert [d.event for d in notes] == [1, 4, 7]   # q, k and v's views
    assert f"rather than H=4 heads of d_k={hd} contiguous features" in notes[0].message


def test_grouped_heads_with_a_head_width_apart_from_d_over_h_have_it_read_from_their_split():
    """Gemma with num_key_value_heads = 2 and head_dim 32 at D = 64, H = 4 (so k_proj's width H_kv·32 = 64
    equals D), traced with --dims that leave head_dim out. An earlier main printed two nonstandard-head-split
    notes, false statements about a correct file resting on d_k = 16; 6e2d55a printed the dims note ("--dims
    d_k=16, but view #4 splits D=64 into H_kv=2 heads of 32: did you mean d_k=32?") and ``?``. The split into
    H and H_kv heads of 32, which q·k contracts, proves d_k = 32 (shapetrace.engine.head_width): no note, and
    every name follows from it."""
    t = _trace(GemmaAttention(32, kv_heads=2), 3, 6, f"B=3 T=6 D={D} H={H} H_kv=2")
    assert [d.kind for d in t.diagnostics] == []
    assert t.head_width == 32
    assert [e.outputs[0].dims for e in t.events if e.op == "view"] == [
        ("B", "T", "H", "d_k"), ("B", "T", "H_kv", "d_k"), ("B", "T", "H_kv", "d_k")]
    assert t.report().verdict.line.startswith("✓ checked all 18 ops that could carry a layout bug")


def test_a_head_width_given_wrong_is_said_to_disagree():
    """The same with d_k given as 16: the sizes given are the user's, so they are kept and said to disagree."""
    t = _trace(GemmaAttention(32, kv_heads=2), 3, 6, f"B=3 T=6 D={D} H={H} H_kv=2 d_k=16")
    assert t.head_width is None
    (d,) = [d for d in t.diagnostics if d.kind in ("dims-disagree", "nonstandard-head-split")]
    assert d.message == ("--dims d_k=16, but view #4 splits D=64 into H_kv=2 heads of 32: did you mean d_k=32? "
                         "Names that come from d_k are not proven while the sizes disagree.")
    assert d.fix == "Give the sizes the code uses: --dims d_k=32, or leave d_k out where it is D / H."


# (B, T, D, head_dim): H_kv·head_dim = D at distinct sizes, and at head_dim = H = T = B = 4 (D = 8)
CLASHING = [(3, 6, 64, 32), (4, 4, 8, 4)]


@pytest.mark.parametrize(("B", "T", "d_model", "hd"), CLASHING)
def test_grouped_heads_given_their_head_width_get_no_note(B, T, d_model, hd):
    """The same with d_k given: main said "--dims H=4, but view #4 splits D=64 into 2 × 32: did you mean
    H=2?" and "reshape #23 lays out the features as [B, T, H·D%32]…": both false."""
    t = _trace(GemmaAttention(hd, kv_heads=2, d_model=d_model), B, T,
               f"B={B} T={T} D={d_model} H={H} H_kv=2 d_k={hd}", d_model)
    assert [d.kind for d in t.diagnostics if d.kind != "ambiguous-sizes"] == []
    assert t.events[1].outputs[0].dims == ("B", "T", "H", "d_k")
    # k_proj's width H_kv·head_dim = 64 is also D: main named it D by its size, split it into "D/32" × "D%32",
    # and the heads' matmul then read as a false batch-mismatch; its size alone names nothing, its use does
    # (round 9, engine/infer/widths.py ``widths_by_use``): viewed as H_kv heads of d_k that attention reads, it
    # is D_kv; o_proj, from the merged heads H·d_k back to that width, is D
    assert t.events[3].outputs[0].dims == ("B", "T", "D_kv")
    assert t.events[4].outputs[0].dims == ("B", "T", "H_kv", "d_k")
    assert t.events[-1].outputs[0].dims == ("B", "T", "D")
    assert t.report().verdict.mark == ("?" if B == T else "✓")   # (B = T: names from sizes alone)


def test_trace_takes_a_head_width_that_is_not_d_over_h():
    """--dims d_k=32 at D=512, H=8 was refused (exit 2); now it traces and says the code splits 8 × 64."""
    res = cli_in_process("trace", str(ROOT / "tests" / "scripts" / "textbook.py"), "--dims",
                         "B=2,T=6,D=512,H=8,d_k=32", "--width", "300")
    assert res.returncode == 0, res.stderr
    assert ("i note dims-disagree at #1: --dims d_k=32, but view #1 splits D=512 into H=8 heads of 64: did you "
            "mean d_k=64? Names that come from d_k are not proven while the sizes disagree. Give the sizes the "
            "code uses: --dims d_k=64, or leave d_k out where it is D / H.") in res.stdout
    assert "nonstandard-head-split" not in res.stdout


@pytest.mark.parametrize(("B", "T"), [(2, 6), (4, 4)])
def test_one_key_value_head_of_a_width_apart_from_d_over_h_is_no_false_error(B, T):
    """Gemma-2B's layout (transformers GemmaConfig: ``num_key_value_heads=1``, ``head_dim`` set apart from
    D / H): here H·head_dim = 4·4 = 16 is D / H, which is also the one key/value head's width H_kv·d_k when
    d_k is only derived as D / H. Main named q's projection ``d_k`` by that size, split it into
    ``d_k/4, d_k%4`` and ended ``✗ batch-mismatch`` on correct code. Without d_k in ``--dims`` the width
    is left unnamed; given d_k, it is H·d_k."""
    t = _trace(GemmaAttention(4, kv_heads=1), B, T, f"B={B} T={T} D={D} H={H} H_kv=1")
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []
    assert t.events[0].outputs[0].dims == ("B", "T", None)
    given = _trace(GemmaAttention(4, kv_heads=1), B, T, f"B={B} T={T} D={D} H={H} H_kv=1 d_k=4")
    assert [e.outputs[0].dims for e in given.events[:3]] == [("B", "T", "H*d_k"), ("B", "T", "H", "d_k"),
                                                              ("B", "H", "T", "d_k")]
    assert [d.kind for d in given.diagnostics if d.severity != "note"] == []
