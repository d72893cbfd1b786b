"""``run`` on narrow terminals: no line wider than the terminal, no wrapped fragment at column 0 (the
facts that do not fit move under their row, indented), k and v folded in ``--compact`` too, and no
number split from its unit."""

from __future__ import annotations

import re

import pytest
from conftest import model_line

WIDTHS = (40, 50, 63, 64, 80, 100)
#: What may start at column 0 after the header: the table's header and rule, a fold's label (``4-5``),
#: the totals and their sentences, a diagnostic, a variant's notes.
COLUMN_0 = re.compile(r"(#|─|\d+-\d+ |layers\.|\d+ ops · |\d+ of the \d+ copies|all \d+ copies|the copy |"
                      r"largest tensor: |not in the table: |setup, not counted above: |✓ |✗ |! |i )")


def _lines_after_header(out: str) -> list[str]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("# op"))
    return lines[start:]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("flags", [(), ("--compact",), ("--long-names",), ("--compact", "--long-names")])
def test_no_line_wider_than_the_terminal_and_none_wrapped_to_column_0(cli, width, flags):
    result = cli("run", "--width", str(width), *flags)
    assert result.exit_code == 0, result.output
    out = result.output
    too_wide = [line for line in out.splitlines() if len(line) > width]
    assert too_wide == [], too_wide
    at_column_0 = [line for line in _lines_after_header(out) if line and not line[0].isspace()
                   and not COLUMN_0.match(line)]
    assert at_column_0 == [], at_column_0
    assert not re.search(r"\d\n\s*(B|KiB|MiB|elements?)\b", out), "a number split from its unit"


def test_at_40_columns_the_layout_and_memory_go_under_the_row_indented(cli):
    out = cli("run", "--width", "40").output
    lines = out.splitlines()
    row = lines.index("  0 linear      [B=2, T=6, D=512]")
    assert lines[row + 1:row + 4] == ["    q = self.split_heads(self.w_q(x))",
                                      "    new 24 KiB · contiguous",
                                      "    strides (3072, 512, 1)"]


@pytest.mark.parametrize("width", (40, 50))
@pytest.mark.parametrize("flags", [(), ("--compact",), ("--long-names",)])
def test_no_layout_word_alone_on_a_line(cli, width, flags):
    """Issue 35: at 40 and 50 columns ``contiguous`` wrapped onto a line of its own."""
    lines = cli("run", "--width", str(width), *flags).output.splitlines()
    alone = [line for line in lines if line.strip() in ("contiguous", "strided")]
    assert alone == []
    assert "    view · contiguous" in lines or flags or width == 50


def test_at_63_columns_only_the_layout_moves_beside_the_strides(cli):
    lines = cli("run", "--width", "63").output.splitlines()
    row = lines.index("  2 transpose   [B=2, H=8, T=6, d_k=64]  view")
    cited = model_line("return x.transpose(1, 2)")
    assert lines[row + 1:row + 3] == [f"    return x.transpose(1, 2)  reference.py:{cited}",
                                      "    strides (3072, 64, 512, 1) · strided"]


def test_a_shape_too_wide_for_any_column_gets_its_own_line_broken_after_a_comma(cli):
    lines = cli("run", "--width", "40", "--long-names").output.splitlines()
    row = lines.index("  1 view")
    assert lines[row + 1:row + 3] == ["    [batch=2, seq_len=6, heads=8,", "    d_head=64]"]


@pytest.mark.parametrize("width", (50, 80))
def test_compact_folds_k_and_v_like_the_default_table(cli, width):
    out = cli("run", "--compact", "--width", str(width)).output
    assert re.search(r"^ *4-5 +view, transpose", out, re.M) and re.search(r"^ *7-8 +view, transpose", out, re.M)
    assert not re.search(r"^ +strides \([\d, ]+\)( · \w+)?$", out, re.M)  # no strides lines in the compact table
    assert len(out.splitlines()) < len(cli("run", "--compact", "--all", "--width", str(width)).output.splitlines())


def test_compact_at_50_keeps_new_24_kib_on_one_line(cli):
    out = cli("run", "--compact", "--width", "50").output
    assert "    new 24 KiB" in out.splitlines()
    assert not re.search(r"new 24\s*\n", out)


def test_compare_at_60_columns_wraps_its_notes_under_their_first_line(cli):
    out = cli("compare", "--width", "60").output
    lines = out.splitlines()
    assert max(map(len, lines)) <= 60
    agree = lines.index("✓ all 5 implementations agree with the reference to within")
    assert lines[agree + 1] == "  0.0001 (same weights, same input)"
    assert not re.search(r"\d\n\s*(B|KiB)\b", out)
