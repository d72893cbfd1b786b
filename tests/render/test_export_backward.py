"""The backward in the exports (``run --backward --export FILE``): Markdown gets a backward table folded as
the terminal's is and what autograd keeps; SVG and text show the backward exactly as printed after the
forward's table."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from conftest import cli_in_process

SMALL = ("--d-model", "16", "--heads", "2", "--seq-len", "3", "--batch", "2")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("exports")
    for suffix in ("md", "svg", "txt"):
        proc = cli_in_process("run", "--backward", *SMALL, "--export", str(folder / f"b.{suffix}"))
        assert proc.returncode == 0, proc.stderr
    return folder


def test_markdown_has_a_backward_table_after_the_forward_s_verdict(exported):
    lines = (exported / "b.md").read_text(encoding="utf-8").splitlines()
    title = lines.index("### Backward pass (in the order autograd ran it)")
    assert any(line.startswith("**✓") for line in lines[:title])
    assert lines[title + 2:title + 4] == [
        "| row | grad of | arrived [names] | strides | bytes | sent back | what its backward computes |",
        "|---:|---|---|---|---|---|---|"]
    assert lines[title + 4] == (
        "| 0 | `#16 linear` | [B=2, T=3, D=16] | (0, 0, 0) | 4 B | operand 0 [B=2, T=3, D=16] (48, 16, 1) "
        "**new 384 B**<br>w_o.bias [D=16] (1) **new 64 B**<br>w_o.weight [D=16, D=16] (16, 1) **new 1 KiB** | "
        "dY [B, T, D]; dx = dY · W [B, T, D]; dW = dYᵀ · x, summed over B, T: [D, D]; db = dY summed over B, T: "
        "[D] |")
    assert "| 10 | `#7 view` | [B=2, T=3, H=2, d_k=8] | (48, 8, 24, 1) | 384 B | operand 0 [B=2, T=3, D=16] " \
           "(48, 16, 1) **new 384 B** | the incoming grad [B, T, H, d_k] is reshaped back to [B, T, D]: a copy, " \
           "since the strides do not allow a view |" in lines
    assert "| 15-16 | `#2 transpose, #1 view` |  |  |  |  | *q: the same two grads as v, rows 9-10* |" in lines
    assert lines.index("", title + 4) - (title + 4) == 17   # 18 rows, q's split folded into one
    kept = lines.index("**autograd keeps 10 tensors for the backward: 3.0 KiB in 7 storages (2.0 KiB of them not "
                       "parameters)**  ")
    assert lines[kept + 1:kept + 3] == ["attention weights: 144 B, 7% of what is not parameters  ",
                                        "at T=6 (2T): 4.3 KiB not parameters (×2.1), attention weights 576 B "
                                        "(×4.0), 13%  "]
    assert "| 5 | `#11 softmax` | SoftmaxBackward0 | [B=2, H=2, T=3, T=3] | 144 B |" in lines


def test_svg_and_text_show_the_backward_as_printed(exported):
    text = (exported / "b.txt").read_text(encoding="utf-8")
    lines = [line.rstrip() for line in text.splitlines()]
    title = lines.index("backward pass (in the order autograd ran it)")
    assert lines[title + 1] == "    0  grad #16 linear      [B=2, T=3, D=16]        (0, 0, 0)       4 B"
    assert "15-16  grad #2 transpose, #1 view · q: the same two grads as v, rows 9-10" in lines
    assert "  at T=6 (2T): 4.3 KiB not parameters (×2.1), attention weights 576 B (×4.0), 13%" in lines
    svg = (exported / "b.svg").read_text(encoding="utf-8")
    ET.fromstring(svg)
    shown = re.sub(r"&#160;", " ", "".join(re.findall(r">([^<]*)</text>", svg)))
    for words in ("backward pass (in the order autograd ran it)", "q: the same two grads as v, rows 9-10",
                  "autograd keeps 10 tensors for the backward"):
        assert words in shown, words


def test_the_exports_without_backward_have_none(tmp_path):
    out = tmp_path / "f.md"
    assert cli_in_process("run", *SMALL, "--export", str(out)).returncode == 0
    assert "Backward pass" not in out.read_text(encoding="utf-8")


def test_ops_range_keeps_the_backward_rows_of_the_ops_shown(tmp_path):
    # a slide of #9-#12 (scores, softmax, weights @ v) gets their grads only: rows 4, 5, 7, 8 (row 6 is the
    # grad of the division, a call without a row of its own; q's, k's and v's grads are other ops')
    out = tmp_path / "slide.md"
    proc = cli_in_process("run", "--backward", *SMALL, "--export", str(out), "--ops", "9-12")
    assert proc.returncode == 0, proc.stderr
    lines = out.read_text(encoding="utf-8").splitlines()
    title = lines.index("### Backward pass (in the order autograd ran it)")
    rows = lines[title + 4:lines.index("", title + 4)]
    assert [row.split(" | ")[:2] for row in rows] == [["| 4", "`#12 matmul`"], ["| 5", "`#11 softmax`"],
                                                      ["| 7", "`#10 matmul`"], ["| 8", "`#9 transpose`"]]
