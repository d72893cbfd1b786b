"""The rendered table at fixed widths, compared with golden text."""

from __future__ import annotations

import re

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


ROW = re.compile(r"^ *(?:\d+|in|\d+-\d+) ")  # an op row, the input row or a folded block


def column_starts(output: str) -> tuple[dict[str, int], list[str]]:
    """The header's column offsets (the index column by its right end) and the table's rows."""
    lines = output.splitlines()
    head = next(n for n, line in enumerate(lines) if re.match(r" *# +op ", line))
    header = lines[head]
    starts = {name: header.index(name) for name in ("op", "shape [names]", "strides", "memory", "layout")
              if name in header}
    starts["# end"] = header.index("#") + 1
    table = lines[head + 2:]
    table = table[: next(n for n, line in enumerate(table) if re.match(r"\d+ ops? · ", line))]  # the footer
    rows = [line for line in table if ROW.match(line)]
    return starts, rows


def assert_row_on_columns(row: str, starts: dict[str, int]) -> None:
    """Every cell of ``row`` begins at its column (a shape may run over the strides column)."""
    end = starts["# end"]
    assert row[end - 1] != " " and row[end] == " " and row[end + 1] != " ", row
    if re.match(r"^ *\d+-\d+ ", row):  # a folded block: its ops start at the op column
        return
    cols = ["op", "shape [names]", "memory", "layout"] + (["strides"] if "(" in row else [])
    for name in cols:
        at = starts[name]
        assert row[at - 1] == " " and row[at] != " ", (name, at, row)


@pytest.mark.parametrize("width", [80, 100])
def test_every_variant_keeps_the_same_column_layout(cli, width):
    """default, --causal and grouped-query heads (5-D rows: [B, H_kv, n_rep, T, d_k]) line up alike."""
    layouts = {}
    for options in ([], ["--causal"], ["--kv-heads", "2"]):
        result = cli("run", "--width", str(width), *options)
        assert result.exit_code == 0, result.output
        starts, rows = column_starts(result.output)
        assert len(rows) >= 12, result.output
        for row in rows:
            assert_row_on_columns(row, starts)
        assert max(len(line) for line in result.output.splitlines()) <= width
        layouts[" ".join(options) or "default"] = starts
    assert layouts["default"] == layouts["--causal"] == layouts["--kv-heads 2"], layouts
    expected = {80: {"# end": 5, "op": 6, "shape [names]": 19, "memory": 56, "layout": 70},
                100: {"# end": 5, "op": 6, "shape [names]": 19, "strides": 51, "memory": 75, "layout": 89}}
    assert layouts["default"] == expected[width]


def test_a_shape_wider_than_its_column_takes_the_strides_column_and_moves_its_strides_below(cli):
    out = cli("run", "--kv-heads", "2", "--width", "100").output.splitlines()
    row = next(n for n, line in enumerate(out) if " expand " in line)
    assert out[row] == ("   10 expand       [B=2, H_kv=2, n_rep=4, T=6, d_k=64]                     view"
                        "          strided")
    assert out[row + 2] == "      strides (768, 64, 0, 128, 1)"
