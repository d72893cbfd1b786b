"""``exercise watch`` in a real terminal (tmux): one screen per check, verdict on top, keys, clean Ctrl-C."""

from __future__ import annotations

import json
import shlex
import sys
import time

import pytest
from tmux_session import ROOT, TmuxSession

from shapetrace.exercises.content import load

CURRICULUM = load()


@pytest.fixture
def tmux():
    session = TmuxSession("watch", width=100, height=50)
    yield session
    session.kill()


def _attempts(state, ex_id: str) -> int:
    data = json.loads((state / "progress.json").read_text())
    return data["exercises"].get(ex_id, {}).get("attempts", 0)


def test_watch_in_a_terminal(tmux, tmp_path):
    ws, state = tmp_path / "ws", tmp_path / "state"
    tmux.type(f"export PYTHONPATH={shlex.quote(str(ROOT))} SHAPETRACE_STATE_DIR={shlex.quote(str(state))}")
    python, folder = shlex.quote(sys.executable), shlex.quote(str(ws))
    tmux.type(f"{python} -m shapetrace exercise watch merge-heads --workspace {folder}")
    screen = tmux.wait_for("waiting for your next save", timeout=90)
    top = [line for line in screen.splitlines() if line.strip()][0]
    assert top.startswith("✗ wrong-values  merge-heads"), screen
    total = len(CURRICULUM.exercises)
    assert f"] 0/{total} done" in screen and "$ " not in screen, "the screen is cleared before each check"
    assert "transpose(1, 2)" not in screen and "hint" not in screen.split("h: a hint")[0]

    (ws / "merge_heads.py").write_text(CURRICULUM.exercise("merge-heads").solution.read_text())
    screen = tmux.wait_for("n or Enter: next exercise", timeout=90)
    assert [line for line in screen.splitlines() if line.strip()][0].startswith("✓ pass  merge-heads")
    assert f"] 1/{len(CURRICULUM.exercises)} done" in screen and screen.count("✓ pass") == 1
    time.sleep(1.5)
    assert "✓ pass  merge-heads" in tmux.screen(), "a pass stays on screen until a key"
    assert _attempts(state, "merge-heads") == 2, "one check at the start, one per save"

    tmux.keys("n")
    screen = tmux.wait_for(lambda s: "merge-contiguous" in s and "waiting for your next save" in s, timeout=90)
    assert [line for line in screen.splitlines() if line.strip()][0].startswith("✗ crash  merge-contiguous")
    tmux.keys("h")
    screen = tmux.wait_for("hint 1/3", timeout=10)
    assert _hints(state, "merge-contiguous") == 1, "a hint shown in watch is kept in progress"
    tmux.keys("C-c")
    screen = tmux.wait_for("stopped watching", timeout=30)
    assert "Traceback" not in screen and "Exception" not in screen
    tmux.type(f"{python} -m shapetrace exercise hint merge-contiguous")
    tmux.wait_for("hint 2/3", timeout=60)
    assert _hints(state, "merge-contiguous") == 2, "`exercise hint` goes on from the level watch reached"


def _hints(state, ex_id: str) -> int:
    data = json.loads((state / "progress.json").read_text())
    return data["exercises"].get(ex_id, {}).get("hints", 0)


def test_the_h_key_takes_the_hint_through_the_same_code_as_exercise_hint(tmp_path, monkeypatch, cli):
    """Watch's h and `exercise hint` share one path (cli.exercise.show_hint, which takes the hint with
    take_hint, under the progress lock)."""
    import io

    from rich.console import Console

    from shapetrace.cli import exercise as cli_exercise
    from shapetrace.exercises.progress import Progress
    from shapetrace.tui.watch import Watch

    state = tmp_path / "state"
    monkeypatch.setenv("SHAPETRACE_STATE_DIR", str(state))
    taken = []

    def spy(ex, verdict, problem, console):
        taken.append(ex.id)
        return cli_exercise.show_hint(ex, verdict, problem, console)

    out = io.StringIO()
    console = Console(file=out, width=100, color_system=None, legacy_windows=False)
    watch = Watch(CURRICULUM, tmp_path / "ws", console, None, None, None, 1.0, spy)
    watch.hint("merge-heads")
    assert taken == ["merge-heads"] and Progress.load(state).entry("merge-heads")["hints"] == 1
    assert "hint 1/3" in out.getvalue()
    res = cli("exercise", "hint", "merge-heads", "--width", "100")
    assert res.exit_code == 0 and "hint 2/3" in res.output
    watch.hint("merge-heads")
    watch.hint("merge-heads")
    assert "hint 3/3" in out.getvalue() and Progress.load(state).entry("merge-heads")["hints"] == 3


def test_the_reference_trace_comes_with_the_solution_in_a_terminal(tmux, tmp_path):
    state = shlex.quote(str(tmp_path / "state"))
    tmux.type(f"export PYTHONPATH={shlex.quote(str(ROOT))} SHAPETRACE_STATE_DIR={state}")
    tmux.type(f"{shlex.quote(sys.executable)} -m shapetrace exercise solution split-heads")
    screen = tmux.wait_for("pass split-heads first", timeout=60)
    tmux.type(f"{shlex.quote(sys.executable)} -m shapetrace exercise solution split-heads --give-up --width 100")
    screen = tmux.wait_for(lambda s: "the reference, traced" in s and "solution.py:10" in s, timeout=60)
    assert "transpose" in screen.split("the reference, traced")[1]


def test_a_hint_joins_the_foot_and_the_verdict_stays_on_top_at_80x24(tmp_path):
    """``h`` on an 80×24 watch screen (issue 35 round 3, first contact): the hint was printed under the
    screen, so the terminal scrolled the verdict's first lines off the top; now it joins the foot and
    the verdict gives up rows for it (the marker says how many are below). In-process, at that size."""
    import io

    from rich.console import Console

    from shapetrace.tui.watch import Watch

    def hint(ex, verdict, problem, console):
        console.print("hint 1/3 · split-heads\n" + "\n".join(f"hint line {i}" for i in range(5)))

    out = io.StringIO()
    console = Console(file=out, width=80, height=24, color_system=None, force_terminal=True, legacy_windows=False)
    watch = Watch(CURRICULUM, tmp_path / "ws", console, None, lambda quiet=False: None, None, 1.0, hint)
    watch.done_count = lambda: 0
    problem = "first line of the verdict; " + " ".join(f"word{i}" for i in range(400))
    watch.show("split-heads", tmp_path / "ws" / "split_heads.py", "poll", None, problem)
    watch.hint("split-heads")
    frame = out.getvalue().rsplit("\x1b[2J", 1)[-1].split("\x1b[H", 1)[-1]   # after the last clear
    lines = frame.rstrip("\n").split("\n")
    assert len(lines) <= 24, len(lines)
    assert lines[0].startswith("the checker could not run: first line of the verdict;")
    assert lines[-6:] == ["hint 1/3 · split-heads"] + [f"hint line {i}" for i in range(5)]
    assert any(line.startswith("↓ ") and "Space/↓ shows them" in line for line in lines)
