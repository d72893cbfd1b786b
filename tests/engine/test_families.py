"""Rules, sentences and diagrams ask the registry for an op's family, never for its name: ``torch.mm``
and ``torch.bmm`` are checked like ``@``, an einsum by its subscripts, and ``swapaxes``/``swapdims``/
``moveaxis`` are drawn and worded like ``transpose``."""

from __future__ import annotations

import io

import pytest
import torch
from rich.console import Console

import shapetrace
from shapetrace.engine.ops import Family, family_of, is_matrix_product, moves_layout, ops_of
from shapetrace.engine.sentences import annotate, brief
from shapetrace.render.diagram import diagram_hook, event_diagram

T = d_k = 8   # T == d_k: q @ k without the transpose runs
B, H = 2, 4
DIMS = {"B": B, "T": T, "H": H, "D": H * d_k}


def contraction_messages(fn, *names):
    torch.manual_seed(0)
    operands = [torch.randn(T, d_k) for _ in names]
    with shapetrace.trace(dims=DIMS) as t:
        for x, n in zip(operands, names):
            shapetrace.name(x, n)
        fn(*operands)
    return [(d.severity, d.kind, d.event, d.message) for d in t.diagnostics]


def missing_transpose(op: str) -> tuple:
    return ("error", "contracts-different-axes", 0,
            f"{op} #0 multiplies [T=8, d_k=8] by [T=8, d_k=8] and sums over d_k of the first with T of the "
            "second: different axes that only happen to have the same size (8).")


@pytest.mark.parametrize("op,fn", [
    ("matmul", lambda q, k: q @ k),
    ("matmul", lambda q, k: torch.matmul(q, k)),
    ("mm", lambda q, k: torch.mm(q, k)),
    ("einsum", lambda q, k: torch.einsum("ij,jk->ik", q, k)),
], ids=["@", "matmul", "mm", "einsum"])
def test_every_product_gets_the_contraction_diagnostic(op, fn):
    assert contraction_messages(fn, "T d_k", "T d_k") == [missing_transpose(op)]


@pytest.mark.parametrize("fn", [
    lambda q, k: torch.mm(q, k.t()),
    lambda q, k: torch.einsum("id,jd->ij", q, k),
], ids=["mm", "einsum"])
def test_products_with_the_transpose_are_silent(fn):
    assert [m for m in contraction_messages(fn, "T d_k", "T d_k") if m[0] != "note"] == []


def split_heads():
    x = torch.randn(B, T, H * d_k)
    shapetrace.name(x, "B T D")
    return x.view(B, T, H, d_k)                                               # (B, T, H, d_k)


def test_bmm_gets_the_contraction_diagnostic():
    with shapetrace.trace(dims=DIMS) as t:
        q = split_heads().transpose(1, 2).reshape(B * H, T, d_k)             # (B*H, T, d_k)
        torch.bmm(q, q)                                                      # no transpose: wrong
    i = [e.index for e in t.events if e.op == "bmm"][0]
    assert [(d.kind, d.event, d.message) for d in t.diagnostics if d.severity == "error"] == [
        ("contracts-different-axes", i,
         f"bmm #{i} multiplies [B·H=8, T=8, d_k=8] by [B·H=8, T=8, d_k=8] and sums over d_k of the first with T "
         "of the second: different axes that only happen to have the same size (8).")]


AXIS_ORDER_CALLS = {
    "transpose": lambda q: q.transpose(1, 2),
    "swapaxes": lambda q: q.swapaxes(1, 2),
    "swapdims": lambda q: torch.swapdims(q, 1, 2),
    "moveaxis": lambda q: q.moveaxis(2, 1),
    "movedim": lambda q: torch.movedim(q, 2, 1),
}
HEADS_FIRST = ("swaps H and T: each head becomes its own batch of [T, d_k] matrices; a view, not contiguous: "
               "strides (256, 8, 32, 1) are not the row-major (256, 64, 8, 1)")


def render(renderable) -> str:
    console = Console(file=io.StringIO(), width=80, color_system=None, legacy_windows=False)
    console.print(renderable)
    return console.file.getvalue()


@pytest.fixture(scope="module")
def axis_order_trace():
    with shapetrace.trace(dims=DIMS) as t:
        q = split_heads()
        for call in AXIS_ORDER_CALLS.values():
            call(q)
    return t


@pytest.mark.parametrize("op", list(AXIS_ORDER_CALLS))
def test_axis_order_ops_share_the_transpose_sentence_and_diagram(axis_order_trace, op):
    t = axis_order_trace
    events = {e.op: e for e in t.events}
    e, reference = events[op], events["transpose"]
    assert family_of(op) is Family.AXIS_ORDER and moves_layout(op)
    assert annotate(e) == HEADS_FIRST
    assert brief(e) == "swap H↔T · view · non-contiguous"
    assert diagram_hook(t, None, 80)(e) is not None   # drawn under ``run --diagrams``
    drawn = render(event_diagram(e, 76, H))
    assert drawn == render(event_diagram(reference, 76, H))
    assert drawn.startswith("axes    B=2 · stride 256   H=4 · stride 8\n        T=8 · stride 32   d_k=8 · stride 1\n")


def test_families_in_the_registry():
    assert ops_of(Family.PRODUCT) >= {"mm", "bmm", "matmul", "__matmul__", "__rmatmul__", "baddbmm", "einsum"}
    assert ops_of(Family.AXIS_ORDER) >= {"transpose", "swapaxes", "swapdims", "permute", "movedim", "moveaxis"}
    assert [op for op in ("mm", "bmm", "matmul", "__matmul__", "baddbmm", "einsum") if is_matrix_product(op)] == [
        "mm", "bmm", "matmul", "__matmul__", "baddbmm"]
