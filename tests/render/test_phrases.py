"""Phrases: a line that wraps between its phrases, never inside one that fits."""

from __future__ import annotations

import pytest
from conftest import render
from rich.text import Text

from shapetrace.render.phrases import Phrases

TITLE = [("", Text("operand 1  [B=2, H=8, T=6, d_k=64]")), ("  ", Text("strides (3072, 64, 512, 1)")),
         (" · ", Text("not contiguous"))]


@pytest.mark.parametrize("width, lines", [
    (100, ["operand 1  [B=2, H=8, T=6, d_k=64]  strides (3072, 64, 512, 1) · not contiguous"]),
    # a greedy wrap would leave "not contiguous" alone: the strides come down with it
    (76, ["operand 1  [B=2, H=8, T=6, d_k=64]", "strides (3072, 64, 512, 1) · not contiguous"]),
    (40, ["operand 1  [B=2, H=8, T=6, d_k=64]", "strides (3072, 64, 512, 1)", "not contiguous"]),
    # a phrase wider than the line wraps on its own lines (Rich's word wrap)
    (20, ["operand 1  [B=2,", "H=8, T=6, d_k=64]", "strides (3072, 64,", "512, 1)", "not contiguous"]),
])
def test_phrases_break_between_phrases(width, lines):
    assert [line.rstrip() for line in render(Phrases(TITLE), width).splitlines()] == lines


def test_a_separator_never_starts_a_line():
    pieces = [("", Text("a" * 10)), (" · ", Text("b" * 10)), (" · ", Text("c" * 10))]
    assert render(Phrases(pieces), 24).splitlines() == ["a" * 10, "b" * 10 + " · " + "c" * 10]
