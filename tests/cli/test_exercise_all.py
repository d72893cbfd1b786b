"""Exercise tables say what they leave out, and ``--all`` shows it (issue 35, "nothing hidden silently"):
``exercise check`` and ``exercise watch`` print the traced table of the learner's function with the same
"not in the table: ... --all shows them" line as every other table, and with ``--all`` the ``·`` rows."""

from __future__ import annotations

import shutil

import torch
from conftest import cli_in_process

import shapetrace
from shapetrace.engine.unrowed import recording_every_call
from shapetrace.render.exercise import trace_table

#: scores scaled by d_k instead of √d_k: the Annotated Transformer's attention() divides by
#: math.sqrt(d_k) ("we scale the dot products by 1/√d_k"); dividing by d_k is the slip this makes
WRONG_SCALE = '''"""Exercise attention-scores: q [B, H, T, d_k], k [B, H, T, d_k] -> scores [B, H, T, T]."""

import torch


def attention_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    d_k = q.shape[-1]
    return q @ k.transpose(-2, -1) / d_k                    # (B, H, T, T)
'''
LEFT_OUT = ("not in the table: 1 elementwise op (1 div): elementwise math keeps its operands' axes; --all "
            "shows them")
SHOWN = ("· rows have no number of their own and are not in the totals: 1 elementwise op (1 div): elementwise "
         "math keeps its operands' axes")


def scores(q, k):
    d_k = q.shape[-1]
    return q @ k.transpose(-2, -1) / d_k                    # (B, H, T, T)


def traced(every_call: bool):
    q, k = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 4)     # (B, H, T, d_k)
    if every_call:
        with recording_every_call(), shapetrace.trace(dims="B=2 H=3 T=5 d_k=4") as t:
            scores(q, k)
    else:
        with shapetrace.trace(dims="B=2 H=3 T=5 d_k=4") as t:
            scores(q, k)
    return t


def test_the_table_says_what_it_leaves_out():
    text = trace_table(traced(False), 200)
    assert text.splitlines()[-1] == LEFT_OUT
    assert "· div" not in text


def test_the_table_of_every_call_shows_the_left_out_rows():
    text = trace_table(traced(True), 200)
    lines = text.splitlines()
    assert lines[-1] == SHOWN
    div = next(line for line in lines if line.lstrip().startswith("· div"))
    assert div.split()[:6] == ["·", "div", "[B=2,", "H=3,", "T=5,", "T=5]"]


def test_check_says_what_it_leaves_out_and_all_shows_it(tmp_path):
    env = {"SHAPETRACE_STATE_DIR": str(tmp_path / "state")}
    ws = tmp_path / "ws"
    assert cli_in_process("exercise", "start", "attention-scores", "--workspace", str(ws), env=env).returncode == 0
    (ws / "attention_scores.py").write_text(WRONG_SCALE)
    args = ("exercise", "check", "attention-scores", "--workspace", str(ws), "--width", "200")
    r = cli_in_process(*args, env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.startswith("✗ wrong-values  attention-scores")
    assert LEFT_OUT in r.stdout.splitlines()
    assert "· div" not in r.stdout
    r = cli_in_process(*args, "--all", env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert SHOWN in r.stdout.splitlines()
    assert any(line.lstrip().startswith("· div ") for line in r.stdout.splitlines())


def test_watch_all_checks_with_every_call(tmp_path, monkeypatch):
    import shapetrace.tui.watch as watch

    seen = {}
    monkeypatch.setattr(watch, "watch_exercises", lambda *a, **kw: seen.update(kw))
    r = cli_in_process("exercise", "watch", "attention-scores", "--workspace", str(tmp_path), "--all",
                       env={"SHAPETRACE_STATE_DIR": str(tmp_path / "state")})
    assert r.returncode == 0, r.stdout + r.stderr
    assert seen["check_file"].keywords == {"show_all": True}
    shutil.rmtree(tmp_path / "state", ignore_errors=True)


def quiz_feedback_lines(every_call: bool) -> list[str]:
    """A wrong answer to the quiz's padding-mask question (lessons/quiz.toml: the mask written
    ``~keep[:, None, None, :]``, as transformers' ``_prepare_4d_attention_mask`` inverts a keep-mask)."""
    import io

    from rich.console import Console

    from shapetrace.app.lessons import quiz_trace
    from shapetrace.cli.lessons import load_curriculum
    from shapetrace.exercises import quiz as qz
    from shapetrace.render.exercise import quiz_feedback

    (q,) = [q for q in qz.bank(load_curriculum().root) if q.id == "padding-broadcast-shape/1"]
    q = qz.solve(q)
    buf = io.StringIO()
    Console(file=buf, width=200, color_system=None, legacy_windows=False).print(
        quiz_feedback(q, "1x1", True, False, trace=quiz_trace(q, every_call=every_call)))
    return [line.rstrip() for line in buf.getvalue().splitlines()]


def test_the_quiz_says_what_its_table_leaves_out_and_all_shows_it():
    lines = quiz_feedback_lines(False)
    assert lines[-1] == ("not in the table: 1 elementwise op (1 __invert__): elementwise math keeps its operands' "
                         "axes; --all shows them")
    every = quiz_feedback_lines(True)
    assert every[-1] == ("· rows have no number of their own and are not in the totals: 1 elementwise op "
                         "(1 __invert__): elementwise math keeps its operands' axes")
    assert [line.split()[:2] for line in every if line.lstrip().startswith("·")][0] == ["·", "__invert__"]


def test_quiz_all_is_an_option():
    r = cli_in_process("quiz", "--all", "--count", "1", "--seed", "1", input="")
    assert r.returncode == 0, r.stdout + r.stderr
