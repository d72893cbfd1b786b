"""``shapetrace exercise grade``: a class with honest students and attackers; each cell is that student's own.

Real checks in the real sandbox (no mocks). The attackers crash, hang, bomb, fork, signal the grader,
or hand in a symlink, a FIFO, a folder or a huge file; the honest students' cells are right, the
attackers' are fail, timed out or refused (a grader that hung would trip the suite's timeout guard).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import cli_in_process, run_cli

from shapetrace.exercises.content import load
from shapetrace.exercises.grade import Cell, csv_text, find_submissions, grade, refusal

CURRICULUM = load()
SPLIT_SOL = CURRICULUM.exercise("split-heads").solution.read_text()
SPLIT_BAD = CURRICULUM.exercise("split-heads").starter.read_text()
HEAD_SOL = CURRICULUM.exercise("head-dim").solution.read_text()
MARK = "27.1828"

#: student -> {file name: text, or a maker(path)}
CLASS = {
    "ada": {"split_heads.py": SPLIT_SOL, "head_dim.py": HEAD_SOL},
    "ben": {"split_heads.py": SPLIT_BAD, "head-dim.py": HEAD_SOL},
    "cy": {"split_heads.py": "def split_heads(x, heads):\n    while True:\n        pass\n"},
    "dee": {"split_heads.py": "import torch\ndef split_heads(x, heads):\n    return torch.ones(2**40)\n"},
    "eve": {"split_heads.py": f"import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"
                              f"os.kill(-1, signal.SIGKILL)\nimport subprocess\n"
                              f"subprocess.Popen(['sleep', '{MARK}'], start_new_session=True)\n" + SPLIT_SOL,
            "head_dim.py": lambda p: p.symlink_to("/etc/passwd")},
    "fay": {"split_heads.py": lambda p: os.mkfifo(p), "head_dim.py": lambda p: p.mkdir()},
    "gus": {"split_heads.py": "# " + "x" * (300 << 10) + "\n" + SPLIT_SOL, "notes.txt": "not an exercise"},
    "hal": {"head_dim.py": "import os\nos._exit(0)\n"},
}


def make_class(root: Path) -> Path:
    for student, files in CLASS.items():
        (root / student).mkdir(parents=True)
        for name, content in files.items():
            path = root / student / name
            if callable(content):
                content(path)
            else:
                path.write_text(content)
    return root


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = make_class(tmp_path_factory.mktemp("class") / "submissions")
    done = []
    cells = grade(root, CURRICULUM.root, time_limit=2, memory_mb=512, workers=2,
                  on_done=lambda cell, n, total: done.append((n, total)))
    return {(c.student, c.exercise): c for c in cells}, done, root


def test_the_table_has_every_student_and_every_submitted_exercise(graded):
    cells = graded[0]
    assert sorted({s for s, _ in cells}) == sorted(CLASS)
    assert {e for _, e in cells} == {"split-heads", "head-dim"}
    assert graded[1][-1] == (12, 12) and len(graded[1]) == 12  # 12 files found; one progress step each


def test_honest_students_get_their_cells(graded):
    cells = graded[0]
    assert cells["ada", "split-heads"].status == "pass" and cells["ada", "head-dim"].status == "pass"
    ben = cells["ben", "split-heads"]
    assert (ben.status, ben.verdict) == ("fail", "wrong-values")
    assert cells["ben", "head-dim"].status == "pass"  # the id spelling with a dash is found too
    assert cells["cy", "head-dim"].status == "missing"


def test_attackers_only_mark_their_own_cells(graded):
    cells = graded[0]
    assert cells["cy", "split-heads"].status == "timed out"
    dee = cells["dee", "split-heads"]
    assert dee.status == "fail" and dee.verdict in ("out-of-memory", "crash"), dee
    eve = cells["eve", "split-heads"]
    assert (eve.status, eve.verdict) == ("fail", "crash") and "Operation not permitted" in eve.summary, eve
    assert cells["hal", "head-dim"].status == "fail"
    left = subprocess.run(["pgrep", "-f", f"sleep {MARK}"], capture_output=True, text=True).stdout
    assert left == "", "a student's process outlived the grading"


def test_files_the_grader_will_not_open_are_refused(graded):
    cells = graded[0]
    assert cells["eve", "head-dim"].summary == "refused: a symbolic link (the grader checks only a student's own files)"
    assert cells["fay", "split-heads"].summary == "refused: not a regular file"
    assert cells["fay", "head-dim"].summary == "refused: not a regular file"
    assert cells["gus", "split-heads"].status == "refused" and "bytes (the grader takes up to" in \
        cells["gus", "split-heads"].summary


def test_csv_and_json_reports_through_the_cli(graded, tmp_path):
    root = graded[2]
    sub = tmp_path / "small"
    (sub / "ada").mkdir(parents=True)
    (sub / "ada" / "head_dim.py").write_text(HEAD_SOL)
    (sub / "ben").mkdir()
    (sub / "ben" / "head_dim.py").write_text("def head_dim(d, h):\n    return d // h\n")
    out_json = tmp_path / "grades.json"
    r = run_cli("exercise", "grade", str(sub), "--time-limit", "3", "--csv", "-", "--json", str(out_json),
                timeout=300)   # (the CSV goes to the real standard output)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "student,exercise,status,verdict,summary,file"
    assert lines[1].startswith('ada,head-dim,pass,pass,"head-dim: correct on all 5 random input cases')
    assert lines[2].startswith("ben,head-dim,fail,wrong-values,")
    rows = json.loads(out_json.read_text())
    assert [(r["student"], r["status"]) for r in rows] == [("ada", "pass"), ("ben", "fail")]
    assert root.exists()


def test_a_folder_without_students_is_a_usage_error(tmp_path):
    r = cli_in_process("exercise", "grade", str(tmp_path / "nowhere"))
    assert r.returncode == 2 and "is not a folder of submissions" in r.stderr, r.stderr


def test_helpers_refuse_without_opening_and_write_csv(tmp_path):
    fifo = tmp_path / "f.py"
    os.mkfifo(fifo)
    assert refusal(fifo) == "not a regular file"  # returns at once: a FIFO is never opened
    (tmp_path / "s" / "x").mkdir(parents=True)
    (tmp_path / "s" / "x" / "split_heads.py").write_text("x")
    students, found = find_submissions(tmp_path / "s", ["split-heads"])
    assert students == ["x"] and [(s, e) for s, e, _ in found] == [("x", "split-heads")]
    text = csv_text([Cell("a", "split-heads", "fail", "crash", "boom\nsecond line", "/f.py")])
    assert text == "student,exercise,status,verdict,summary,file\na,split-heads,fail,crash,boom,/f.py\n"
