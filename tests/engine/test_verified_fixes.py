"""A failing view gets ``.contiguous().view`` / ``.reshape`` as fixes only when applying them to the
captured layout gives no mixed axis; otherwise the explanation says why they are wrong and what must
come first (issue 21, item 5). Each suggestion is run with torch."""

from __future__ import annotations

import pytest
import torch

import shapetrace
from shapetrace.app.strides import run_chain
from shapetrace.engine.failure import explain_failure

B, T, H, d_k = 2, 6, 4, 8
D = H * d_k


def qkv_chunk_then_view(dims):
    """qkv.chunk(3, -1), then the split-without-transpose: ``q.view(B, H, T, d_k)`` raises on the chunk."""
    torch.manual_seed(0)
    x = torch.randn(B, T, 3 * D)                                             # (B, T, 3*D)
    with shapetrace.trace(dims=dims) as t:
        q, _k, _v = x.chunk(3, -1)                                           # 3 x (B, T, D), strided
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            q.view(B, H, T, d_k)                                             # (B, H?, T?, d_k): wrong
    return t, q


def view_diagnostic(t):
    (d,) = [d for d in t.diagnostics if d.kind == "view-incompatible"]
    return d


def test_chunk_then_view_refuses_reshape_and_says_what_comes_first():
    t, _ = qkv_chunk_then_view({"B": B, "T": T, "H": H, "D": D})
    d = view_diagnostic(t)
    assert d.message.endswith(
        "The strides do not chain (96 ≠ 32): T and D are not neighbours in memory (the axes are in memory order, "
        "but each step of T skips 64 values that are not part of this tensor: it is a slice of a wider one, as "
        "chunk, split, narrow and indexing make).")
    assert d.fix.splitlines() == [
        "not a fix: .contiguous().view(2, 4, 6, 8) and .reshape(2, 4, 6, 8) would run, but they give "
        "[B, !T·H, !T·H, d_k]: axis 1 takes pieces of T and H. The shape is right but the contents are in the "
        "wrong order; no error will tell you.",
        "What must come first: split the axes where they are, then move them: .view(2, 6, 4, 8).transpose(1, 2) "
        "gives [B, H, T, d_k] as a view, no copy."]
    assert "fix 2" not in d.fix
    assert explain_failure(t.events[-1]).endswith(d.fix)   # the failed run's explanation says the same


def test_chunk_then_view_without_names_judges_by_sizes():
    t, _ = qkv_chunk_then_view(None)
    assert view_diagnostic(t).fix.splitlines() == [
        "not a fix: .contiguous().view(2, 4, 6, 8) and .reshape(2, 4, 6, 8) would run, but they give "
        "[2, 4, 6, 8]: axis 1 takes pieces of dim1 and dim2. If each axis should keep one meaning, that is wrong; "
        "no error will tell you.",
        "What must come first: split the axes where they are, then move them: .view(2, 6, 4, 8).transpose(1, 2) "
        "gives [2, 4, 6, 8] as a view, no copy."]


def test_the_suggestions_are_what_torch_computes():
    """The suggested split is the per-head layout; the refused reshape is not."""
    _, q = qkv_chunk_then_view(None)
    wanted = q.contiguous().view(B, T, H, d_k).transpose(1, 2)                # (B, H, T, d_k)
    suggested = q.view(2, 6, 4, 8).transpose(1, 2)                           # a view of the chunk
    assert torch.equal(suggested, wanted) and suggested.data_ptr() == q.data_ptr()
    assert not torch.equal(q.reshape(2, 4, 6, 8), wanted)


def test_merge_after_transpose_says_transpose_back_first():
    run = run_chain("2x6x8x64", "transpose(1, 2).view(2, 6, 512)")
    lines = run.steps[-1].explanation.splitlines()
    assert lines[-2:] == [
        "not a fix: .contiguous().view(2, 6, 512) and .reshape(2, 6, 512) would run, but they give "
        "[B, !H·T, !H·T·d_k]: axis 1 takes pieces of H and T. The shape is right but the contents are in the "
        "wrong order; no error will tell you.",
        "What must come first: move the axes next to each other, then merge: .transpose(1, 2).reshape(2, 6, 512) "
        "gives [B, T, H·d_k] (a 24 KiB copy, in the right order)."]
    x = torch.randn(2, 6, 8, 64).transpose(1, 2)                             # (B, H, T, d_k)
    assert torch.equal(x.transpose(1, 2).reshape(2, 6, 512), x.transpose(1, 2).contiguous().view(2, 6, 512))


def test_a_whole_axes_merge_keeps_both_fixes():
    """Heads merged after transpose(1, 2) without .contiguous(): the copy is the right fix."""
    run = run_chain("2x8x6x64", "transpose(1, 2).view(2, 6, 512)", dims="B,H,T,d_k")
    lines = run.steps[-1].explanation.splitlines()
    assert lines[-2:] == [
        "fix 1: .contiguous().view(2, 6, 512)  copies 24 KiB (6,144 elements) into a new buffer in the current "
        "axis order, then views it",
        "fix 2: .reshape(2, 6, 512)  makes the same 24 KiB copy, silently"]
    assert lines[-3].endswith("(a transpose or permute reordered the axes without moving any data).")


def test_view_as_is_checked_against_the_other_operands_shape():
    x = torch.randn(2, 8, 6, 64).transpose(1, 2)                             # (B, T, H, d_k), not contiguous
    with shapetrace.trace(dims={"B": 2, "T": 6, "H": 8, "D": 512}) as t:
        shapetrace.name(x, "B T H d_k")
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            x.view_as(torch.empty(2, 6, 512))
    d = view_diagnostic(t)
    assert d.message.startswith("view_as #0 raised: view(2, 6, 512) has to merge H and d_k")
    assert d.fix.splitlines()[1] == "fix 2: .reshape(2, 6, 512)  makes the same 24 KiB copy, silently"
