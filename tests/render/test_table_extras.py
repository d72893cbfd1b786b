"""render/table.py's extras: what a table leaves out is said with how to show it (``--all``), ``--all``
shows it (rows marked ``·``, out of the totals), and the ops that built the model are a setup section
of their own: one folded line, or a titled section under ``--all``."""

from __future__ import annotations

import pytest
from conftest import ROOT, cli_in_process, render

CLONES = str(ROOT / "tests" / "scripts" / "annotated_clones.py")
NO_COLOR = {"NO_COLOR": "1", "COLUMNS": "100"}


def _lines(*args: str) -> list[str]:
    res = cli_in_process(*args, env=NO_COLOR)
    assert res.returncode in (0, 1), res.stderr
    return res.stdout.splitlines()


def test_run_says_what_it_leaves_out_and_how_to_show_it():
    # the reference model's `q @ k_t / math.sqrt(self.d_k)` (the Annotated Transformer's scale) has no row
    lines = _lines("run")
    assert "not in the table: 1 elementwise op (1 div): elementwise math keeps its operands' axes; --all" in lines
    assert "  shows them" in lines


def test_run_all_shows_the_left_out_op_before_the_row_it_ran_before():
    lines = _lines("run", "--all")
    at = lines.index("    · div          [B=2, H=8, T=6, T=6]            (288, 36, 6, 1)         new 2.2 KiB   "
                     "contiguous")
    assert lines[at - 5].startswith("   10 matmul") and lines[at + 3].startswith("   11 softmax")
    assert lines[at + 1] == "      scores = q @ k_t / math.sqrt(self.d_k)  reference.py:48"
    assert lines[at + 2] == "      elementwise: [B, H, T, T] -> [B, H, T, T]"
    # out of the totals: the same 17 ops as without --all
    assert "17 ops · 9 views · 4 copies (96 KiB) · 7 computed buffers (124 KiB)" in lines
    assert ("· rows have no number of their own and are not in the totals: 1 elementwise op (1 div): "
            "elementwise") in lines
    assert not any(line.startswith("not in the table") for line in lines)


@pytest.fixture(scope="module")
def clones_report():
    from shapetrace.app.script import run_script

    return run_script(CLONES, [], {"B": 2, "T": 6, "D": 32, "H": 4}).report()


def test_setup_is_one_folded_line_at_the_top_of_the_table(clones_report):
    """The Annotated Transformer's clones() and a tril buffer (tests/scripts/annotated_clones.py)."""
    from shapetrace.render.table import TraceView

    lines = render(TraceView(clones_report, fold=True), width=100).splitlines()
    assert lines[2:6] == [
        " 0-32 setup",
        "      33 ops ran while the model was built (32 clone, 1 tril; copying 66.1 KiB), not in the totals;",
        "      --all shows them",
        "   in input        [B=2, T=6, D=32]                (192, 32, 1)            1.5 KiB       contiguous",
    ]
    assert not any(line.startswith("setup, not counted above") for line in lines)
    wide = render(TraceView(clones_report, fold=True), width=130).splitlines()
    assert wide[2] == (" 0-32 setup  33 ops ran while the model was built (32 clone, 1 tril; copying 66.1 KiB), "
                        "not in the totals; --all shows them")


def test_all_shows_setup_as_a_titled_section_before_the_forward_pass(clones_report):
    from shapetrace.render.table import TraceView

    lines = render(TraceView(clones_report, fold=False, layers=False), width=100).splitlines()
    assert lines[2] == "setup: the ops that built the model (not in the totals)"
    assert lines[3] == ("    0 clone        [32, 32]                        (32, 1)                 copy 4 KiB    "
                        "contiguous")
    assert lines[4] == "      return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])  annotated_clones.py:14"
    forward = lines.index("forward pass")
    assert lines[forward - 3].startswith("   32 tril") and lines[forward + 1] == "layers.0"
    assert sum(line[5:].startswith(" clone ") for line in lines) == 32
    assert "34 ops · 18 views · 8 copies (12 KiB) · 14 computed buffers (19.5 KiB)" in lines


def test_trace_all_puts_each_left_out_op_under_its_own_layer():
    # the residual `x = x + layer(x, x, x)` runs in the Encoder, after layers.0's ops: it is not in layers.0
    lines = _lines("trace", CLONES, "--dims", "B=2,T=6,D=32,H=4", "--all")
    adds = [n for n, line in enumerate(lines) if line.startswith("    · add ")]
    assert len(adds) == 2
    assert lines[adds[0] - 1] == "(top level)" and lines[adds[0] + 1].endswith("annotated_clones.py:42")
    assert lines[adds[0] + 3] == "layers.1"


def test_a_lesson_table_says_what_it_leaves_out_and_all_shows_it():
    """lesson 11's rotate_half example (transformers' Llama apply_rotary_pos_emb): `q * cos + ...` is
    elementwise math, left out of the table and said to be."""
    plain = _lines("lesson", "11")
    at = plain.index("not in the table: 9 elementwise ops (1 div, 1 __rpow__, 1 __rtruediv__, 1 cos, 1 sin and 3 "
                     "more):")
    # (torch.outer, which builds the table of angles, is an op the registry knows: said by its name)
    assert plain[at + 1:at + 3] == ["elementwise math keeps its operands' axes; 1 other op without a row (1 outer); "
                                    "shapetrace lesson 11", "--all shows them"]
    # example 2's `q * cos`, which torch refuses, has its row (where the run ended), so it is not left out
    failed = plain.index("    1 mul                                                                  raised")
    assert plain[failed + 1] == "      q_rot = q * cos  <lesson 11 example 2>:6"
    assert not plain[failed + 3].startswith("not in the table")
    every = _lines("lesson", "11", "--all")
    assert "· mul           [B=1, H=2, T=4, d_k=4]       (32, 16, 4, 1)  new 128 B   contiguous" in every
    assert "· outer         [4, 2]                       (2, 1)          new 32 B    contiguous" in every


def test_lesson_all_refuses_present_and_export():
    res = cli_in_process("lesson", "11", "--all", "--present", env=NO_COLOR)
    assert res.returncode == 2
    assert "--all works with the printed lesson, not with --present or --export" in res.stderr


def test_the_mark_of_a_row_without_a_number_reads_the_same_in_ascii():
    """A stream that cannot encode · gets one stand-in for the mark, in the row and in the footer."""
    from conftest import run_cli

    res = run_cli("run", "--all", "--width", "80", env={"PYTHONIOENCODING": "ascii"})
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert "    - div          [B=2, H=8, T=6, T=6]                 new 2.2 KiB   contiguous" in lines
    assert "- rows have no number of their own and are not in the totals: 1 elementwise op" in lines
