"""The rendered table at fixed widths, compared with golden text."""

from __future__ import annotations

import pytest
from conftest import assert_golden, render

from shapetrace.app.session import trace_reference
from shapetrace.attention.config import AttentionConfig, header_lines
from shapetrace.render.table import TraceView


@pytest.mark.parametrize("width", [80, 100])
def test_default_run_golden(width):
    trace = trace_reference(AttentionConfig())
    text = render(TraceView(trace, header=header_lines(AttentionConfig())), width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    assert_golden(f"run_default_{width}.txt", text)


def test_mixed_axis_is_shown_and_explained():
    import torch

    import shapetrace

    x = torch.randn(2, 6, 512)
    with shapetrace.trace(dims="B=2 T=6 D=512 H=8") as t:
        shapetrace.name(x, "B T D")
        x.view(2, 8, 6, 64)  # the classic bug
    text = render(TraceView(t), width=100)
    assert "[B=2, !T·H=8, !H=6, d_k=64]" in text
    assert "✗ error mixed-axis at #0" in text
