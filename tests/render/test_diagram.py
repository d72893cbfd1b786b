"""Stride diagrams: golden text, fitting any config in 100 x 30, colour and NO_COLOR, run --diagrams."""

from __future__ import annotations

import io

import pytest
from conftest import assert_golden, render
from rich.console import Console

from shapetrace.app.session import trace_reference
from shapetrace.app.strides import run_chain
from shapetrace.attention.config import AttentionConfig
from shapetrace.engine.ops import moves_layout
from shapetrace.render.chain_view import ChainView
from shapetrace.render.diagram import PALETTE, event_diagram, tensor_diagram


@pytest.fixture(scope="module")
def default_trace():
    return trace_reference(AttentionConfig())


@pytest.mark.parametrize("width", [80, 100])
def test_golden_default_config_transpose_and_copy(default_trace, width):
    transpose, copy = default_trace.events[2], default_trace.events[14]
    assert (transpose.op, copy.op, copy.copy_bytes) == ("transpose", "contiguous", 24576)
    text = render(event_diagram(transpose, width, heads=8), width) + render(
        event_diagram(copy, width, heads=8), width)
    assert_golden(f"diagram_default_{width}.txt", text)


@pytest.mark.parametrize("width", [80, 100])
def test_golden_failing_chain(width):
    run = run_chain("2x6x8x64", "transpose(1, 2).view(2, 6, 512)")
    assert_golden(f"strides_failing_{width}.txt", render(ChainView(run), width))


CONFIGS = [  # (shape, heads): tiny, default, odd, and far too large to allocate (meta)
    ("1x1x4", 2), ("2x6x512", 8), ("3x7x60", 5), ("8x4096x8192", 64), ("64x100000x12288", 96),
]


@pytest.mark.parametrize("shape,heads", CONFIGS)
@pytest.mark.parametrize("width", [80, 100])
def test_any_config_fits_width_and_30_lines(shape, heads, width):
    b, t, d = (int(s) for s in shape.split("x"))
    chain = f"view({b}, {t}, {heads}, {d // heads}).transpose(1, 2).transpose(1, 2).contiguous().view({b}, {t}, {d})"
    run = run_chain(shape, chain, heads=heads)
    assert not run.failed
    for step in run.steps[1:]:
        lines = render(event_diagram(step.event, width, heads), width).splitlines()
        assert len(lines) <= 30, (shape, step.code, len(lines))
        assert max(len(line) for line in lines) <= width


def test_first_and_last_blocks_survive_elision(default_trace):
    text = render(tensor_diagram(default_trace.events[2].output, 100), 100)
    assert "│A 0,0,0,:│" in text and "│H 1,7,5,:│" in text and "… 72 more blocks …" in text


def test_letters_without_colour_and_palette_with_colour(default_trace):
    diagram = tensor_diagram(default_trace.events[2].output, 100)
    plain = render(diagram, 100)
    assert "\x1b[" not in plain and "letter/colour = H (A=0 … H=7)" in plain
    buf = io.StringIO()
    Console(file=buf, width=100, color_system="truecolor", force_terminal=True).print(diagram)
    coloured = buf.getvalue()
    for hex_colour, _fg in PALETTE:  # all 8 Okabe-Ito backgrounds used for the 8 heads
        r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
        assert f"48;2;{r};{g};{b}" in coloured


def test_run_diagrams_under_each_movement_row(cli, default_trace):
    result = cli("run", "--diagrams", "--width", "100")
    expected = sum(1 for e in default_trace.events if moves_layout(e.op))
    assert expected == 10  # 3 x (view, transpose), k transpose, merge transpose, contiguous, view
    assert result.output.count("\n    memory  ") == expected + 1  # the copy draws before and after
    assert result.output.count("before  [B=2, T=6, H=8, d_k=64]") == 1


def test_run_single_diagram_and_bad_record(cli):
    result = cli("run", "--diagram", "14", "--width", "100")
    assert result.exit_code == 0
    assert result.output.count("\n    memory  ") == 2 and "copied 24 KiB" in result.output
    bad = cli("run", "--diagram", "99")
    assert bad.exit_code == 2 and "--diagram 99: this trace has records 0 to 16" in bad.output


def test_table_without_hook_is_unchanged(cli):
    assert "\n    memory  " not in cli("run", "--width", "100").output


def test_matmul_hidden_copy_diagram(default_trace, cli):
    text = render(event_diagram(default_trace.events[10], 100, heads=8), 100)
    assert "hidden copies inside matmul: 48 KiB the code never asked for" in text
    assert "B and H do not chain in memory (stride 3,072 ≠ 8 × 64)" in " ".join(text.split())
    assert text.count("before ") == 2 and text.count("after ") == 2
    assert len(text.splitlines()) <= 30
    out = cli("run", "--diagrams", "--width", "100").output
    assert out.count("hidden copy inside matmul: 24 KiB") == 1 and out.count("hidden copies inside matmul") == 1


def test_hidden_copy_titles_wrap_between_phrases_at_76_columns(default_trace):
    """``run --diagrams`` at 80 columns draws the hidden copies 4 columns in: the operand's title wrapped
    word by word left ``contiguous`` alone under ``· not`` (issue 35 round 3, first contact at 80)."""
    text = render(event_diagram(default_trace.events[10], 76, heads=8), 76)
    assert "operand 1  [B=2, H=8, T=6, d_k=64]\nstrides (3072, 64, 512, 1) · not contiguous\n" in text
    assert "operand 2  [B=2, H=8, d_k=64, T=6]\nstrides (3072, 64, 1, 512) · not contiguous\n" in text


@pytest.mark.parametrize("width", [40, 50])
def test_strides_at_narrow_widths_keep_each_fact_whole(width):
    """``shapetrace strides`` at 40 and 50 columns (issue 35: single layout words on their own lines):
    a strides tuple, ``not contiguous`` and an axis with its stride are never cut."""
    run = run_chain("2x6x512", "view(2, 6, 8, 64).transpose(1, 2)", heads=8)
    lines = render(ChainView(run), width).splitlines()
    assert max(len(line) for line in lines) <= width
    facts = ["[B=2, H=8, T=6, d_k=64]", "strides (3072, 64, 512, 1)", "view (no copy) · not contiguous"]
    step2 = lines.index(next(line for line in lines if line.startswith("step 2")))
    assert lines[step2 + 1:step2 + 4] == facts
    assert not [line for line in lines if line.strip() in ("contiguous", "not", "1)", "·")]
    assert lines[step2 + 4].startswith("axes    B=2 · stride 3,072")
    assert "H=8 · stride 64" in lines[step2 + 4 + (width == 40)]
