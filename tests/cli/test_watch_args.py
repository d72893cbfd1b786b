"""``exercise watch ''``: an empty id is no exercise, refused at once as ``check`` and ``hint`` refuse it
(it used to start watching the first exercise not passed, until q: found by the fuzz round)."""

from __future__ import annotations

from conftest import cli_in_process


def test_watch_refuses_an_empty_exercise_id(tmp_path):
    res = cli_in_process("exercise", "watch", "", "--workspace", str(tmp_path / "ws"), input="")
    assert res.returncode == 2
    assert res.stderr.strip() == "error: no exercise called ''; `shapetrace exercise list` shows them all"
    hint = cli_in_process("exercise", "hint", "", "--workspace", str(tmp_path / "ws"), input="")
    assert hint.returncode == 2 and hint.stderr == res.stderr
