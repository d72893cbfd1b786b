"""Trace separates building a model from its forward pass (issue 35): an op that runs inside a module's
constructor, a deep copy (the Annotated Transformer's ``clones()``), ``.to()`` or ``load_state_dict``,
outside any module's forward, is setup: out of the table and its totals, folded into one line, and the
``in input`` row is the tensor that enters the forward."""

from __future__ import annotations

import pytest
from conftest import ROOT

SCRIPT = str(ROOT / "tests" / "scripts" / "annotated_clones.py")
DIMS = {"B": 2, "T": 6, "D": 32, "H": 4}


@pytest.fixture(scope="module")
def report():
    from shapetrace.app.script import run_script

    run = run_script(SCRIPT, [], DIMS)
    assert run.ok
    return run.report()


def test_the_copies_made_by_clones_and_the_tril_buffer_are_setup(report):
    # MultiHeadedAttention: 4 linears deep-copied by clones() (8 tensors: weight and bias); the
    # attention deep-copied by make_model's c(attn) (8) and by Encoder's clones(layer, 2) (16): 32
    # clones, and the tril buffer of Encoder's constructor
    ops = [e.op for e in report.setup]
    assert ops.count("clone") == 32 and ops.count("tril") == 1 and len(ops) == 33
    assert [e.index for e in report.setup] == list(range(33))


def test_the_forward_starts_at_the_input_and_its_totals_leave_setup_out(report):
    from shapetrace.engine.summary import stats

    first = report.events[0]
    assert first.op == "linear" and first.index == 33 and first.module == "layers.0.linears.0"
    assert first.inputs[0].shape == (2, 6, 32) and first.inputs[0].dims == ("B", "T", "D")
    s = stats(report.events)
    # per layer: q, k, v, output linears; three view+transpose; scores; softmax; weights @ v; transpose,
    # contiguous, view: 17 ops, 2 layers
    assert s["ops"] == 34 and s["copies"] == 2 and s["copy_bytes"] == 2 * 2 * 6 * 32 * 4
    assert all(e.module.startswith("layers.") for e in report.events)


def test_the_table_says_what_setup_ran_and_what_it_left_out(report):
    from conftest import render

    from shapetrace.render.table import footer_text

    lines = render(footer_text(report, report.events), width=120).splitlines()
    assert ("setup, not counted above: 33 ops ran while the model was built (#0-#32: 32 clone, 1 tril, "
            "copying 66.1 KiB)") in lines
    assert ("not in the table: 4 elementwise ops (2 div, 2 add): elementwise math keeps its operands' axes; "
            "--all shows them") in lines


def test_a_model_built_inside_the_trace_with_the_python_api_is_setup_too():
    """nanoGPT's causal mask buffer and a rotary table made in a constructor (as transformers' Llama
    rotary embedding does with arange) are setup; the same ops in the forward are not."""
    import torch
    from torch import nn

    import shapetrace

    class Block(nn.Module):
        def __init__(self, t: int, d: int):
            super().__init__()
            self.register_buffer("bias", torch.tril(torch.ones(t, t)).view(1, 1, t, t))  # (1, 1, T, T)
            self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d)))
            self.proj = nn.Linear(d, d)

        def forward(self, x):
            mask = torch.tril(torch.ones(x.shape[1], x.shape[1]))  # (T, T): in the forward, so a row
            return self.proj(x).view(2, 6, 4, 8).transpose(1, 2), mask

    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        block = Block(6, 32)
        block(torch.randn(2, 6, 32))
    report = t.report()
    assert [e.op for e in report.setup] == ["tril", "view"]
    assert [e.op for e in report.events] == ["tril", "linear", "view", "transpose"]
    assert report.events[1].inputs[0].dims == ("B", "T", "D")


# -- every view puts the setup where the table does: one folded line above the first op --------------------
#: the Annotated Transformer's clones() and Encoder's tril buffer (tests/scripts/annotated_clones.py)
SETUP_FOLD = ("33 ops ran while the model was built (32 clone, 1 tril; copying 66.1 KiB), not in the totals; "
              "--all shows them")
SETUP_LINE = ("setup #0-#32: 33 ops ran while the model was built (32 clone, 1 tril; copying 66.1 KiB), not in "
              "the totals; the table shows them with --all")


def test_the_markdown_export_folds_the_setup_into_its_first_row(report):
    from shapetrace.app.classroom import ViewOptions
    from shapetrace.render.export import markdown

    lines = markdown(report).splitlines()
    top = lines.index("|---:|---|---|---|---|---|---|---|") + 1
    assert lines[top] == f"| 0-32 | setup |  |  |  |  |  | {SETUP_FOLD} |"
    assert lines[top + 1].startswith("| 33 | `linear` |")
    assert not any("not counted above" in line for line in lines)
    every = markdown(report, ViewOptions(fold=False)).splitlines()
    top = every.index("|---:|---|---|---|---|---|---|---|") + 1
    assert every[top] == "|  | **setup** |  |  |  |  |  | setup: the ops that built the model (not in the totals) |"
    assert [row.split(" | ")[1] for row in every[top + 1:top + 34]] == ["`clone`"] * 32 + ["`tril`"]


def test_the_page_says_the_setup_in_its_header_not_its_footer(report):
    from shapetrace.render.page import page_data

    data = page_data(report)
    assert data["header"][-1] == SETUP_LINE
    assert not any("setup" in line for line in data["footer"])


def test_step_shows_the_setup_above_the_first_op_and_not_in_its_summary(report):
    import io

    from rich.console import Console

    from shapetrace.tui.step import StepScreen, StepState

    def printed(renderable) -> list[str]:
        buf = io.StringIO()
        Console(file=buf, width=200, color_system=None, legacy_windows=False, force_terminal=False).print(renderable)
        return buf.getvalue().splitlines()

    screen = StepScreen(report, StepState(len(report.events) + 1, 0, False))
    first = printed(screen.op_part(200))
    assert first[0] == SETUP_LINE and first[1] == "input  [B=2, T=6, D=32]  strides (192, 32, 1)"
    screen = StepScreen(report, StepState(len(report.events) + 1, 1, False))
    assert SETUP_LINE not in printed(screen.op_part(200))
    assert not any("setup" in line for line in printed(screen.summary_part()))


def test_predict_says_the_setup_before_the_first_question_and_not_at_the_end(report):
    import io

    from rich.console import Console

    from shapetrace.tui.predict import run_predict_mode

    buf = io.StringIO()
    console = Console(file=buf, width=200, color_system=None, legacy_windows=False, force_terminal=False)
    run_predict_mode(report, console, io.StringIO(""), interactive=False)
    lines = buf.getvalue().splitlines()
    at = lines.index(SETUP_LINE)
    assert any(line.startswith("predict mode: ") for line in lines[at + 1:at + 3])
    assert not any("not counted above" in line for line in lines)
