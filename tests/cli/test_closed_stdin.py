"""A command started with stdin closed (``<&-``, a cron job, a daemon): sys.stdin is None. Reading
answers then ends at once, as at the end of a file; never an internal error (found by the fuzz round)."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def _closed_stdin(*args: str) -> subprocess.CompletedProcess:
    import os

    line = " ".join([sys.executable, "-m", "shapetrace", *args]) + " <&-"
    return subprocess.run(line, shell=True, capture_output=True, text=True, timeout=180, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="100", NO_COLOR="1"))


def test_quiz_with_stdin_closed_asks_once_and_ends():
    res = _closed_stdin("quiz", "--count", "1", "--seed", "3")
    assert res.returncode == 0, res.stderr
    assert "internal error" not in res.stderr
    assert res.stdout.rstrip().endswith("(no more answers)\n\nscore: 0/0 (of 1 questions)")


def test_predict_with_stdin_closed_shows_the_table_and_what_was_not_asked():
    res = _closed_stdin("run", "--predict", "--d-model", "64", "--heads", "4", "--seq-len", "4")
    assert res.returncode == 0, res.stderr
    assert res.stdout.rstrip().endswith("score 0/0 (shapes 0/0), 8 not asked (answers ran out)")
