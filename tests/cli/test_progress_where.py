"""Issue 23 (9, 13): progress is one file, documented, movable with --state-dir on every command that
reads it, and ``lessons`` says where the marks it shows come from; "(write a test)" is never split."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, cli_in_process


def test_lessons_says_where_its_progress_lives(tmp_path):
    res = cli_in_process("lessons", "--state-dir", str(tmp_path / "st"), env={"COLUMNS": "300"})  # any tmp path
    assert res.returncode == 0, res.stderr
    assert res.stdout.rstrip().splitlines()[-1] == (
        f"progress: {tmp_path / 'st' / 'progress.json'} (one file for every folder you work in; --state-dir DIR "
        "or SHAPETRACE_STATE_DIR=DIR keeps it elsewhere)")


def test_state_dir_keeps_progress_where_it_says(tmp_path):
    state = tmp_path / "mine"
    res = cli_in_process("exercise", "hint", "split-heads", "--state-dir", str(state), env={"SHAPETRACE_STATE_DIR": ""})
    assert res.returncode == 0, res.stderr
    data = json.loads((state / "progress.json").read_text())
    assert data["exercises"]["split-heads"]["hints"] == 1
    listed = cli_in_process("exercise", "list", "--state-dir", str(tmp_path / "other"))
    assert listed.returncode == 0 and not (tmp_path / "other" / "progress.json").exists()


@pytest.mark.parametrize("args", [["lessons"], ["lesson", "1"], ["quiz"], ["exercise", "list"],
                                  ["exercise", "start", "split-heads"], ["exercise", "check", "split-heads"],
                                  ["exercise", "hint", "split-heads"], ["exercise", "solution", "split-heads"],
                                  ["exercise", "reset", "split-heads"], ["exercise", "watch", "split-heads"]])
def test_every_command_that_reads_progress_takes_state_dir(args):
    res = cli_in_process(*args, "--help", env={"COLUMNS": "200"})
    assert res.returncode == 0 and "--state-dir" in res.stdout


def test_state_dir_that_is_a_file_is_a_usage_error(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    res = cli_in_process("lessons", "--state-dir", str(f))
    assert res.returncode == 2
    assert res.stderr == f"error: --state-dir {f} is a file; give a folder for your progress\n"


def test_write_a_test_is_never_split_at_80_columns(tmp_path):
    res = cli_in_process("lessons", "--state-dir", str(tmp_path), env={"COLUMNS": "80"})
    lines = res.stdout.splitlines()
    assert not any(line.rstrip().endswith("(write") for line in lines)
    assert sum("(write a test)" in line for line in lines) == 9


def test_the_readme_documents_progress():
    readme = (ROOT / "README.md").read_text()
    assert "SHAPETRACE_STATE_DIR" in readme and "--state-dir" in readme and "progress.json" in readme


def test_check_takes_a_path_and_the_next_step_is_one_that_works(tmp_path):
    """After a pass, the tip names the next exercise not yet passed; when its file already exists it
    says check (start would refuse to overwrite it). The exercise can be named by its file's path."""
    ws, st = tmp_path / "ws", tmp_path / "st"
    lesson = ROOT / "lessons" / "01_split_heads"
    for ex in ("split-heads", "attention-scores"):
        assert cli_in_process("exercise", "start", ex, "--workspace", str(ws), "--state-dir", str(st)).returncode == 0
    (ws / "split_heads.py").write_text((lesson / "split-heads" / "solution.py").read_text())
    res = cli_in_process("exercise", "check", str(ws / "split_heads.py"), "--workspace", str(ws),
                         "--state-dir", str(st),
                  env={"COLUMNS": "300"})
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.rstrip().splitlines()[-1] == (
        f"next: shapetrace exercise check attention-scores (your file {ws / 'attention_scores.py'} is there already)")
    (ws / "attention_scores.py").unlink()
    res = cli_in_process("exercise", "check", "split-heads", "--workspace", str(ws), "--state-dir", str(st),
                  env={"COLUMNS": "300"})
    assert res.stdout.rstrip().splitlines()[-1] == "next: shapetrace exercise start attention-scores"
