"""The verdict: one line, a ✓ only where every op that could carry a layout bug was checked (issue 33
item 1), notes under it, never in its place (issue 35)."""

from __future__ import annotations

import io
import json

import torch
from rich.console import Console

import shapetrace
from shapetrace.engine.diagnostic import Diagnostic
from shapetrace.engine.verdict import NOTHING_NAMED, unchecked_ops, verdict_of
from shapetrace.render.table import print_trace


def _attention(x, H, mask=None, literal=False):
    B, T, D = x.shape                                               # (B, T, D)
    q = x.view(B, T, H, D // H).transpose(1, 2)                     # (B, H, T, d_k)
    scores = q @ q.transpose(-2, -1)                                # (B, H, T, T)
    n = int(T) if literal else T   # a plain number, or the size read from x's token axis
    if mask is not None:
        scores = scores.masked_fill(mask[:, :, :n, :n] == 0, float("-inf"))   # nanoGPT's bias buffer
    return scores.softmax(dim=-1)


def _printed(report) -> str:
    out = io.StringIO()
    print_trace(report, Console(file=out, width=200, color_system=None, legacy_windows=False))
    return out.getvalue()


def test_every_axis_named_gets_the_check_mark():
    with shapetrace.trace(dims="B=2 T=5 D=24 H=3") as t:
        _attention(torch.randn(2, 5, 24), 3)
    v = t.report().verdict
    assert (v.mark, v.checked, v.total, v.unchecked) == ("✓", 5, 5, ())
    assert v.line == ("✓ checked all 5 ops that could carry a layout bug: every axis keeps its meaning from "
                      "input to output")
    assert _printed(t.report()).rstrip().endswith(v.line)


def test_an_unnamed_mask_slice_is_a_question_mark_naming_the_op():
    """A [1, 1, 8, 8] buffer sliced by plain numbers (``self.bias[:, :, :5, :5]``): its slice has no
    names, so it was not checked and the verdict says so; no check mark. (A sliding window, the last 3
    keys: its values hide more than the future keys, so they do not check it either.)"""
    ones = torch.ones(8, 8)
    bias = (torch.tril(ones) - torch.tril(ones, -3)).view(1, 1, 8, 8)
    with shapetrace.trace(dims="B=2 T=5 D=24 H=3") as t:
        _attention(torch.randn(2, 5, 24), 3, bias, literal=True)
    ops = {e.index: e.op for e in t.events}
    missing = unchecked_ops(t.events)
    assert [ops[i] for i in missing] == ["__getitem__"]
    v = t.report().verdict
    assert v.mark == "?"
    assert v.line == (f"? checked 6 of 7 ops that could carry a layout bug; not checked (unnamed axes): "
                      f"#{missing[0]} __getitem__; no errors or warnings in what was checked")


def test_an_unnamed_causal_mask_slice_is_checked_on_its_values():
    """The same slice of nanoGPT's ``tril`` buffer: the keys it hides, read on the scores, are exactly
    those after each query, so its effect is read whole and the op that sliced it is checked on the
    values (:mod:`shapetrace.engine.value_checked`), and the line says so."""
    bias = torch.tril(torch.ones(8, 8)).view(1, 1, 8, 8)
    with shapetrace.trace(dims="B=2 T=5 D=24 H=3") as t:
        _attention(torch.randn(2, 5, 24), 3, bias, literal=True)
    assert unchecked_ops(t.events) == []
    assert t.report().verdict.line == ("✓ checked all 7 ops that could carry a layout bug (1 of them on the values of "
                                       "the rotary tables or causal masks they build): every axis keeps its meaning "
                                       "from input to output")


def test_a_mask_sliced_by_sizes_read_from_the_tokens_is_named_and_checked():
    """nanoGPT's ``self.bias[:, :, :T, :T]`` with ``B, T, C = x.size()``: each slice runs from 0 to a
    size read from the token axis, so its rows and columns are T (issue 33 item 2), and every op is checked."""
    bias = torch.tril(torch.ones(8, 8)).view(1, 1, 8, 8)
    with shapetrace.trace(dims="B=2 T=5 D=24 H=3") as t:
        _attention(torch.randn(2, 5, 24), 3, bias)
    sliced = next(e for e in t.events if e.op == "__getitem__")
    assert sliced.outputs[0].dims == (None, None, "T", "T")
    assert t.report().verdict.line == ("✓ checked all 7 ops that could carry a layout bug: every axis keeps its "
                                       "meaning from input to output")


def test_nothing_named_is_never_a_check_mark():
    """Issue 33: "✓ … 21 of 21 ops have unnamed axes" was a check mark where nothing was checked."""
    with shapetrace.trace() as t:
        torch.randn(2, 5, 24).view(2, 5, 3, 8).transpose(1, 2).cumsum(1)
    v = t.report().verdict
    assert (v.mark, v.checked, v.line) == ("?", 0, NOTHING_NAMED)


def test_errors_make_a_cross_and_the_count():
    d = [Diagnostic("error", "mixed-axis", 0, "m"), Diagnostic("warning", "w", 1, "m"),
         Diagnostic("note", "n", None, "m")]
    assert verdict_of([], d).line == "✗ 1 error and 1 warning: the findings above say where and how to fix them"
    assert verdict_of([], d[1:]).mark == "!"


def test_a_note_goes_under_the_verdict_never_in_its_place():
    """Issue 35: the Annotated Transformer at T = H with names from sizes ended with the note
    ``ambiguous-sizes`` and no verdict. Now: one verdict line (a ?: names guessed from equal sizes are
    not proven), then the note."""
    with shapetrace.trace(dims="B=2 T=4 D=16 H=4") as t:
        _attention(torch.randn(2, 4, 16), 4)
    report = t.report()
    assert [d.kind for d in report.diagnostics] == ["ambiguous-sizes"]
    v = report.verdict
    assert v.mark == "?" and v.unproven == ("names were found from sizes alone, and equal sizes are ambiguous",)
    assert v.line == ("? checked 5 of 5 ops that could carry a layout bug; not proven: names were found from "
                      "sizes alone, and equal sizes are ambiguous; no errors or warnings in what was checked")
    printed = _printed(report)
    assert printed.count(v.line) == 1
    after = printed[printed.index(v.line) + len(v.line):].lstrip("\n")
    assert after.startswith("i note ambiguous-sizes: T = H = 4, T = d_k = 4, H = d_k = 4: names found from sizes "
                            "alone are ambiguous.")


def test_the_verdict_is_in_the_json():
    with shapetrace.trace(dims="B=2 T=5 D=24 H=3") as t:
        _attention(torch.randn(2, 5, 24), 3)
    data = json.loads(t.to_json())
    assert data["verdict"] == {"mark": "✓", "line": t.report().verdict.line, "checked": 5, "total": 5,
                               "unchecked": [], "errors": 0, "warnings": 0, "unproven": [], "contracts": [],
                               "unmeasured": []}
