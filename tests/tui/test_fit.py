"""Every interactive screen fits its terminal (issue 35), read off a real terminal (tmux) at 80×24,
100×30 and 120×40: the title and keys stay in sight, the verdict and its first explanation come first,
and what does not fit is announced by a marker line and shown by Space/↓."""

from __future__ import annotations

import shlex
import sys

import pytest
from tmux_session import ROOT, TmuxSession

PYTHON = f"PYTHONPATH={shlex.quote(str(ROOT))} {shlex.quote(sys.executable)} -m shapetrace"
SIZES = [(80, 24), (100, 30), (120, 40)]


@pytest.fixture
def tmux(request):
    session = TmuxSession(request.node.name[:12], width=80, height=24)
    yield session
    session.kill()


def rows(screen: str) -> list[str]:
    """The screen's lines without the empty ones at its bottom."""
    lines = [line.rstrip() for line in screen.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def drawn_at(width: int, title: str) -> callable:
    """A predicate: the screen is redrawn for ``width`` columns under ``title`` (a line uses more than
    the next smaller size's columns, or none uses more than ``width``)."""
    smaller = max([w for w, _ in SIZES if w < width], default=0)

    def check(screen: str) -> bool:
        lines = [line.rstrip() for line in screen.splitlines()]
        longest = max(map(len, lines), default=0)
        return bool(lines) and lines[0].startswith(title) and smaller < longest <= width
    return check


def fits(screen: str, width: int, height: int) -> bool:
    lines = screen.splitlines()
    return len(lines) <= height and all(len(line) <= width for line in lines)


ERROR_FIRST = "✗ error mixed-axis at #0: view #0 turns [B=2, T=5, D=12] into"
ERROR_LAST = "transpose(1, 2) to move the heads ahead of the tokens."


def test_a_presented_screen_taller_than_the_terminal_is_shown_in_whole_pages(tmux):
    """lesson 1's screen 4 at 80×24 stopped mid-sentence in its ✗ error, then (scrolling by lines) after
    two of its lines, ``↓ 8 more lines``: now a page ends before the traced example, and the next shows the
    table with its whole error and the closing paragraph; Enter (the presenter's key) shows it, b goes
    back a page."""
    tmux.type(f"{PYTHON} lesson 1 --present; echo EXIT=$?")
    tmux.wait_for(" shapetrace lesson 1 · 1/7", timeout=120)
    # screen 2 is two pages at 80×24 (its prose and code, then its traced example): Enter shows each
    for where, mark in (("2/7", "↓ "), ("2/7", "↑ lines"), ("3/7", "Step 2"), ("4/7", "↓ ")):
        tmux.keys("Enter")
        screen = tmux.wait_for(lambda s, where=where, mark=mark: f"lesson 1 · {where}" in s and mark in s,
                               timeout=120)
    lines = rows(screen)
    assert lines[0].startswith(" shapetrace lesson 1 · 4/7") and lines[0].endswith("q quit")
    assert lines[-3:-1] == ["    bad = x.view(2, 3, 5, 4)                          # (B, ?, ?, d_k): mixed", ""]
    assert lines[-1] == "↓ 19 more lines (lines 1-11 of 30) · Space/↓ shows them"
    assert "✗ error" not in screen and "traced:" not in screen   # nothing of the example's table is cut
    tmux.keys("Enter")   # the next page of the same screen, not the next screen
    screen = tmux.wait_for(lambda s: "↑ lines 12-30 of 30" in s, timeout=30)
    lines = rows(screen)
    assert lines[0].startswith(" shapetrace lesson 1 · 4/7") and lines[1] == "example 2, traced:"
    assert ERROR_FIRST in lines and ERROR_LAST in " ".join(lines)   # the whole error, with its table
    assert lines.index(ERROR_FIRST) > lines.index("example 2, traced:") and lines[-2] == "coincide."
    assert lines[-1] == "↑ lines 12-30 of 30 · ↑ scrolls back"
    tmux.keys("b")   # the page before
    tmux.wait_for(lambda s: "↓ 19 more lines (lines 1-11 of 30)" in s, timeout=30)
    tmux.keys("Enter")
    tmux.wait_for(lambda s: "↑ lines 12-30 of 30" in s, timeout=30)
    for width, height in SIZES[1:]:
        tmux.resize(width, height)
        screen = tmux.wait_for(drawn_at(width, " shapetrace lesson 1 · 4/7"), timeout=30)
        assert fits(screen, width, height) and rows(screen)[0].startswith(" shapetrace lesson 1 · 4/7")
        assert "✗ error mixed-axis" in screen or "transpose(1, 2) to move the heads" in screen
    assert "↓" not in screen and "coincide." in screen   # 120×40: the whole screen, no marker
    tmux.keys("Space")   # at the screen's end, Space goes on
    tmux.wait_for("lesson 1 · 5/7", timeout=120)
    tmux.keys("q")
    tmux.wait_for("EXIT=0", timeout=30)


def test_step_with_the_diagram_keeps_its_row_and_keys_at_every_size(tmux):
    """``d`` pushed the walk/why lines and the key legend off an 80×24 screen."""
    tmux.type(f"{PYTHON} run --step; echo EXIT=$?")
    tmux.wait_for(" shapetrace step · #0", timeout=120)
    tmux.keys("g", "5", "Enter")
    tmux.wait_for(" shapetrace step · #5 transpose", timeout=30)
    tmux.keys("d")
    tmux.wait_for("memory diagram · #5 transpose (d hides it)", timeout=30)
    for width, height in SIZES:
        tmux.resize(width, height)
        keys = "⏎ next · b back · d diagram" if width < 100 else "Enter/Space/→ next · b/← back"
        # the whole frame at this width, its last line (the keys) drawn too: under CI's load a capture once
        # came between the new title and the new legend
        screen = tmux.wait_for(lambda s, w=width, k=keys: drawn_at(w, " shapetrace step · #5 transpose")(s)
                               and bool(rows(s)) and rows(s)[-1].startswith(k), timeout=30)
        lines = rows(screen)
        assert fits(screen, width, height) and lines[0].startswith(" shapetrace step · #5 transpose")
        assert lines[-1].startswith(keys)
        assert "memory diagram · #5 transpose (d hides it)" in screen
        assert "    5 transpose    [B=2, H=8, T=6, d_k=64]" in screen and "swaps H and T" in screen
        if "more line" in screen:
            assert lines[-2].startswith("↓ ") and lines[-2].endswith("Space/↓ shows them")
        else:
            assert "walk    " in screen
    tmux.resize(80, 24)
    screen = tmux.wait_for(lambda s: "more line" in s and drawn_at(80, " shapetrace step · #5")(s), timeout=30)
    assert "the rows" not in screen
    tmux.keys("Space")   # the rest of op #5's screen: the walk
    screen = tmux.wait_for(lambda s: "↑ lines" in s, timeout=30)
    assert "walk    " in screen and rows(screen)[0].startswith(" shapetrace step · #5 transpose")
    tmux.keys("Space")   # then op #6
    tmux.wait_for(" shapetrace step · #6", timeout=30)
    tmux.keys("q")
    tmux.wait_for("EXIT=0", timeout=30)


def test_watch_keeps_the_verdict_on_top_of_an_80x24_terminal(tmux, tmp_path):
    """The ✗ wrong-values line and its explanation scrolled off the top; now the table is what is cut."""
    tmux.type(f"export SHAPETRACE_STATE_DIR={shlex.quote(str(tmp_path / 'state'))}")
    tmux.type(f"{PYTHON} exercise watch merge-heads --workspace {shlex.quote(str(tmp_path / 'ws'))}")
    screen = tmux.wait_for("waiting for your next save", timeout=120)
    lines = rows(screen)
    assert fits(screen, 80, 24)
    assert lines[0].startswith("✗ wrong-values  merge-heads"), screen
    assert lines[1].startswith("your output's token 0 of batch 0 is built from tokens"), screen
    marker = next(line for line in lines if line.startswith("↓ "))
    assert marker.endswith("Space/↓ shows them") and lines[-1].startswith("h: a hint · q: quit · waiting")
    tmux.keys("Space")
    # (the whole page, not its first line drawn: under load a capture once came between the scrolled text
    # and the footer)
    screen = tmux.wait_for(lambda s: "↑ lines" in s and "    0 reshape      [B=" in s
                           and rows(s)[-1].startswith("h: a hint · q: quit"), timeout=30)
    tmux.keys("q")
    tmux.wait_for("stopped watching", timeout=30)
