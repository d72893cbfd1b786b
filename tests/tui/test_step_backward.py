"""Step mode's backward (``run --backward --step``, :mod:`shapetrace.tui.backward_steps`): after the
forward's summary, one screen per backward row with the forward op it differentiates (its code line
marked), a folded block as one screen, then what autograd keeps; the same keys, fitted to 80×24."""

from __future__ import annotations

import io
import sys

import pytest
from conftest import model_line
from tmux_session import ROOT, TmuxSession

OUTPUT_LINE = model_line("return self.w_o(y)")
VALUES_LINE = model_line("y = weights @ v")
SPLIT_TRANSPOSE = model_line("return x.transpose(1, 2)")


@pytest.fixture(scope="module")
def run():
    """The reference at run --backward's default sizes, as ``run --backward --step`` traces it."""
    from shapetrace.app.session import run_reference
    from shapetrace.attention.config import AttentionConfig

    return run_reference(AttentionConfig(), backward=True)


def screen(run, index: int, width: int = 80, height: int = 24) -> list[str]:
    from rich.console import Console
    from rich.screen import Screen

    from shapetrace.tui.step import StepScreen, backward_steps, step_state

    report = run.report()
    steps = backward_steps(report, doubled=run.doubled)
    state = step_state(report, len(steps))
    state.index = index
    buf = io.StringIO()
    Console(file=buf, width=width, height=height, color_system=None, legacy_windows=False,
            force_terminal=False).print(Screen(StepScreen(report, state, backward=steps)))
    return [line.rstrip() for line in buf.getvalue().splitlines()]


def test_the_forward_summary_says_the_backward_comes_next(run):
    lines = screen(run, 17)
    assert lines[0] == " shapetrace step · summary · 17 ops"
    assert "next: the backward pass, 17 screens in the order autograd ran it" in lines
    assert lines[-1] == "" or "⏎ next · b back" in "\n".join(lines)


def test_a_grad_screen_marks_the_forward_op_s_code_and_shows_its_row(run):
    lines = screen(run, 22)   # the forward's 17 ops, its summary, then backward rows 0-3: row 4 is #12's
    assert lines[0] == " shapetrace step · backward 5/17 · grad #12 matmul"
    assert any(line.startswith(f"▶ {VALUES_LINE}         y = weights @ v") for line in lines)
    rule = lines.index("─" * 80)
    assert lines[rule + 1:rule + 6] == [
        "differentiates #12 matmul: y = weights @ v",
        "4  grad #12 matmul  [B=2, H=8, T=6, d_k=64]  (3072, 64, 512, 1)  24 KiB",
        "   → operand 0  [B=2, H=8, T=6, T=6]  (288, 36, 6, 1)  new 2.2 KiB",
        "   → operand 1  [B=2, H=8, T=6, d_k=64]  (3072, 384, 64, 1)  new 24 KiB",
        "   dY [B, H, T, d_k]; dA = dY · Bᵀ [B, H, T, T]; dB = Aᵀ · dY [B, H, T, d_k]",
    ]
    assert len(lines) == 24 and all(len(line) <= 80 for line in lines)


def test_the_first_grad_screen_is_the_output_projection_s(run):
    lines = screen(run, 18)
    assert lines[0] == " shapetrace step · backward 1/17 · grad #16 linear"
    assert any(line.startswith(f"▶ {OUTPUT_LINE}         return self.w_o(y)") for line in lines)
    assert "   → w_o.weight  [D=512, D=512]  (512, 1)  new 1 MiB" in lines


def test_a_folded_block_is_one_screen_tied_to_its_first_forward_op(run):
    lines = screen(run, 33)
    assert lines[0] == " shapetrace step · backward 16/17 · rows 15-16"
    assert any(line.startswith(f"▶ {SPLIT_TRANSPOSE}         return x.transpose(1, 2)") for line in lines)
    rule = lines.index("─" * 80)
    assert lines[rule + 1:rule + 3] == [
        "differentiates #2 transpose, #1 view (the code of #2 is marked)",
        "15-16  grad #2 transpose, #1 view · q: the same two grads as v, rows 9-10",
    ]


def test_the_last_screen_is_what_autograd_keeps_and_enter_quits(run):
    lines = screen(run, 35)
    assert lines[0] == " shapetrace step · backward · what autograd keeps · 17 grads"
    assert lines[3:6] == ["end of the backward pass: what autograd kept for it",
                          "autograd keeps 10 tensors for the backward: 1.1 MiB in 7 storages (122 KiB of",
                          "  them not parameters)"]
    assert "  at T=12 (2T): 249 KiB not parameters (×2.0), attention weights 9 KiB" in lines
    assert "⏎ quits · b back · d diagram · g go to · e error · q quit" in lines
    assert len(lines) == 24 and all(len(line) <= 80 for line in lines)


def test_g_goes_to_a_forward_op_from_the_backward(run):
    from shapetrace.tui.step import GOTO, NEXT, backward_steps, step_state

    report = run.report()
    state = step_state(report, len(backward_steps(report)))
    assert state.count == 17 + 1 + 17 + 1
    state.index = 25
    for action in (GOTO, "1", "2", NEXT):
        state.apply(action)
    assert state.index == 12


@pytest.fixture
def tmux(request):
    session = TmuxSession(request.node.name[:20].replace("[", "-").replace("]", ""), width=80, height=24)
    yield session
    session.kill()


def test_run_backward_step_walks_into_the_backward_in_a_real_80x24_terminal(tmux):
    tmux.type(f"PYTHONPATH={ROOT} {sys.executable} -m shapetrace run --backward --step; echo EXIT=$?")
    tmux.wait_for("shapetrace step · #0 linear · ops #0-#16")
    tmux.keys("g", "1", "6", "Enter")
    tmux.wait_for(" shapetrace step · #16 linear")
    tmux.keys("Enter", "Enter")
    screen = tmux.wait_for(" shapetrace step · backward 1/17 · grad #16 linear")
    assert "differentiates #16 linear: return self.w_o(y)" in screen
    assert max(len(line) for line in screen.splitlines()) <= 80 and len(screen.splitlines()) <= 24
    tmux.keys("Right", "Right", "Right", "Right")
    product = "   dY [B, H, T, d_k]; dA = dY · Bᵀ [B, H, T, T]; dB = Aᵀ · dY [B, H, T, d_k]"
    # (the frame whole: under CI's load a capture once held this title above the previous frame's body; if the
    # body never comes, the wait fails with the screen)
    tmux.wait_for(lambda s: " shapetrace step · backward 5/17 · grad #12 matmul" in s and product in s)
    tmux.keys("b")
    tmux.wait_for(" shapetrace step · backward 4/17 · grad #13 transpose")
    tmux.keys("q")
    screen = tmux.wait_for("EXIT=0")
    assert "backward pass (in the order autograd ran it)" not in screen   # (stepped: no table printed after)
