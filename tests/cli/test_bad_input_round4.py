"""The fourth round of bad input (stop 52): the leftovers of round 3. Each case, on main (f714c55), exited 0
with a screen that answered a question the user did not ask; now one line on stderr and exit 2, and nothing
recorded. Every test here fails on f714c55 (each docstring says how)."""

from __future__ import annotations

import json

import pytest
from conftest import cli_in_process


def one_line(res, code: int) -> str:
    assert res.returncode == code, (res.returncode, res.stdout[-500:], res.stderr[-500:])
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and res.stdout == "", (res.stdout[-500:], res.stderr)
    return lines[0]


@pytest.mark.parametrize("given, line", [
    ("folder", "error: {path} is a folder, not your exercise file: give the .py file (split_heads.py, from "
               "`shapetrace exercise start split-heads`)"),
    ("missing.py", "error: {path} does not exist: run `shapetrace exercise start split-heads` first (or pass "
                   "--workspace)"),
])
def test_a_hint_for_a_file_that_is_not_one_is_refused_and_takes_no_hint(given, line, tmp_path):
    """On f714c55 ``exercise hint split-heads --file FOLDER`` printed 'your file could not be checked (... is
    a folder ...)' and hint 1 of 3 (exit 0), and a typo in ``--file`` gave 'you have no file yet' and hint 1:
    each took a hint the learner cannot take back. ``exercise check`` refused both."""
    path = tmp_path / given
    if given == "folder":
        path.mkdir()
    state = tmp_path / "state"
    res = cli_in_process("exercise", "hint", "split-heads", "--file", str(path),
                         env={"SHAPETRACE_STATE_DIR": str(state)})
    assert one_line(res, 2) == line.format(path=path)
    assert not (state / "progress.json").exists() or "split-heads" not in json.dumps(
        json.loads((state / "progress.json").read_text()).get("hints", {}))


def test_without_a_file_in_the_workspace_a_hint_is_still_given(tmp_path):
    """The workspace's file not made yet is not an error: hints help before the first line is written (the
    first hint, with why)."""
    state = tmp_path / "state"
    res = cli_in_process("exercise", "hint", "split-heads", "--workspace", str(tmp_path / "ws"), "--width", "100",
                         env={"SHAPETRACE_STATE_DIR": str(state)})
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("hint 1 of 3, in order: you have no file yet\n(")
    assert "split-heads" in (state / "progress.json").read_text()   # (the hint taken is recorded)
