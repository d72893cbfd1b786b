"""``shapetrace exercise grade``: a class with honest students and attackers; each cell is that student's own.

Real checks in the real sandbox (no mocks). The attackers crash, hang, bomb, fork, signal the grader,
or hand in a symlink, a FIFO, a folder or a huge file; the honest students' cells are right, the
attackers' are fail, timed out or refused (a grader that hung would trip the suite's timeout guard).
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import cli_forked, cli_in_process
from rich.console import Console

from shapetrace.errors import UsageError
from shapetrace.exercises.content import load
from shapetrace.exercises.grade import (
    Cell,
    ClassGrade,
    Stray,
    csv_text,
    did_you_mean,
    find_submissions,
    grade,
    gradebook_text,
    parse_assigned,
    refusal,
    survey,
)
from shapetrace.render.grade import assigned_line, cell_text, grade_view

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
    r = cli_forked("exercise", "grade", str(sub), "--time-limit", "3", "--csv", "-", "--json-file", str(out_json),
                   timeout=300)   # (the CSV goes to the real standard output: a pipe of its own)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "student,exercise,status,verdict,summary,file"
    assert lines[1].startswith('ada,head-dim,pass,pass,"head-dim: correct on all 5 random input cases')
    assert lines[2].startswith("ben,head-dim,fail,wrong-values,")
    rows = json.loads(out_json.read_text())["cells"]
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
    assert text == 'student,exercise,status,verdict,summary,file\na,split-heads,fail,crash,"boom\nsecond line",/f.py\n'
    assert list(csv.reader(io.StringIO(text)))[1][4] == "boom\nsecond line"  # the whole summary, one field


# -- what a teacher hands in: what was assigned, files not graded, a gradebook, nothing cut or replaced ------

IDS = [e.id for e in CURRICULUM.exercises]


def _folder(root: Path, files: dict[str, dict[str, str]]) -> Path:
    for student, named in files.items():
        for name, text in named.items():
            path = root / student / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return root


def test_misnamed_nested_and_unassigned_files_are_listed_with_the_exercise_they_answer(tmp_path):
    root = _folder(tmp_path / "subs", {
        "ada": {"SplitHeads.py": "x", "split_heads.py.txt": "x", "week1/split_heads.py": "x", "notes.txt": "x",
                "split_head.py": "x", "head_dim.py": "x", ".hidden.py": "x", "__pycache__/a.pyc": "x"},
        "ben": {"split_heads.py": "x", "split-heads.py": "x", "Head-Dim (1).py": "x"},
    })
    found = survey(root, IDS, ["split-heads"])
    assert found.students == ["ada", "ben"]
    assert [(s, e, p.name) for s, e, p in found.found] == [("ben", "split-heads", "split-heads.py")]
    assert [(x.file, x.why) for x in found.strays["ada"]] == [
        ("SplitHeads.py", "did you mean split_heads.py?"),
        ("head_dim.py", "not assigned (head-dim is not in --exercises)"),
        ("notes.txt", "not an exercise file"),
        ("split_head.py", "did you mean split_heads.py?"),
        ("split_heads.py.txt", "did you mean split_heads.py?"),
        ("week1/split_heads.py", "did you mean split_heads.py? (the grader reads the top of each student's folder)"),
    ]
    assert [(x.file, x.why) for x in found.strays["ben"]] == [
        ("Head-Dim (1).py", "did you mean head_dim.py? (head-dim is not in --exercises)"),
        ("split_heads.py", "a second file for split-heads: split-heads.py is graded"),
    ]
    everything = survey(root, IDS)   # nothing assigned: every exercise is graded
    assert [(s, e) for s, e, _ in everything.found] == [("ada", "head-dim"), ("ben", "split-heads")]


def test_did_you_mean_reads_words_not_spelling_rules():
    assert did_you_mean("SplitHeads.py", IDS) == "split-heads"
    assert did_you_mean("splitHeads.PY", IDS) == "split-heads"
    assert did_you_mean("TEST_SPLIT_SQUARE.py", IDS) == "test-split-square"
    assert did_you_mean("repeat_kv (2).py", IDS) == "repeat-kv"
    assert did_you_mean("causal_mask.ipynb", IDS) == "causal-mask"
    assert did_you_mean("notes.txt", IDS) is None and did_you_mean(".py", IDS) is None


def test_names_from_a_students_folder_are_cleaned_and_kept_apart(tmp_path):
    root = _folder(tmp_path / "subs", {"ada\x1b[2J": {"split_heads.py": "x", "\x1b]8;;x\x07Split.py": "x"},
                                       "ada": {"split_heads.py": "x"}})
    found = survey(root, IDS)
    assert found.students == ["ada", "ada (2)"]   # (sorted by the raw names: "ada" < "ada\x1b[2J")
    assert [(x.file, x.why) for x in found.strays["ada (2)"]] == [("Split.py", "not an exercise file")]


@pytest.mark.parametrize(("text", "wanted"), [("split-heads,head_dim", ["split-heads", "head-dim"]),
                                              (" head-dim , head-dim.py ,", ["head-dim"])])
def test_assigned_exercises_are_ids_in_the_order_given(text, wanted):
    assert parse_assigned(text, IDS) == wanted


def test_an_unknown_or_empty_assignment_is_a_usage_error():
    with pytest.raises(UsageError, match="no exercise 'split-head'; the exercises are split-heads, "):
        parse_assigned("split-head", IDS)
    with pytest.raises(UsageError, match="give the ids"):
        parse_assigned(" , ", IDS)


def test_a_summary_that_ends_in_a_colon_goes_on_with_what_it_announces():
    cell = Cell("a", "split-heads", "fail", "layout", "your result is a copy, but this exercise asks for a view "
                "of the input (no data moved):", explanation=[
                    "your result is a copy, but this exercise asks for a view of the input (no data moved):",
                    "  f.py:3: `x.contiguous()` contiguous copied 1.3 KiB"])
    assert cell.detail == ("your result is a copy, but this exercise asks for a view of the input (no data moved): "
                           "f.py:3: `x.contiguous()` contiguous copied 1.3 KiB")
    assert cell.to_dict()["summary"] == cell.detail
    assert cell_text(cell).plain == f"✗ layout: {cell.detail}"


def _result() -> ClassGrade:
    cells = [Cell("ada", "head-dim", "pass", "pass", "head-dim: correct"),
             Cell("=HYPERLINK(\"http://x\")", "head-dim", "fail", "crash", "-1 raised: @boom")]
    return ClassGrade(cells, ["head-dim"], True, ["ada", "=HYPERLINK(\"http://x\")"],
                      {"ada": [Stray("SplitHeads.py", "did you mean split_heads.py?")]})


def test_the_gradebook_is_one_row_per_student_and_a_spreadsheet_reads_it_back():
    rows = list(csv.reader(io.StringIO(gradebook_text(_result()))))
    assert rows == [["student", "head-dim", "passed", "out_of", "score"],
                    ["ada", "pass", "1", "1", "100"],
                    ["'=HYPERLINK(\"http://x\")", "fail (crash)", "0", "1", "0"]]   # never a formula
    long = list(csv.reader(io.StringIO(csv_text(_result().cells))))
    assert long[2][:2] == ["'=HYPERLINK(\"http://x\")", "head-dim"] and long[2][4] == "'-1 raised: @boom"


def test_the_report_says_what_was_assigned_and_what_was_not_graded():
    console = Console(file=io.StringIO(), width=100, color_system=None, legacy_windows=False)
    console.print(grade_view(_result()))
    text = console.file.getvalue()
    assert text.startswith("assigned (--exercises): head-dim; each score is out of 1\n")
    assert "│ ada " in text and "1/1" in text and "0/1" in text
    assert "found but not graded:\nada: SplitHeads.py — did you mean split_heads.py?\n" in text
    assert text.endswith("1 pass, 1 fail\n")
    unassigned = ClassGrade(_result().cells, ["head-dim"], False, ["ada"], {})
    assert assigned_line(unassigned) == ("assigned: not given (--exercises a,b); each score is out of the 1 "
                                         "exercises someone handed in: head-dim")


@pytest.mark.parametrize(("args", "message"), [
    ([""], "SUBMISSIONS is empty: give the folder of submissions"),
    (["{tmp}/nowhere"], "nowhere is not a folder of submissions"),
    (["{tmp}/empty"], "holds no student folders"),
    (["{tmp}/blank"], "the student folders are empty"),
    (["{tmp}/subs", "--json", "grades.json"], "--json prints the grade as JSON on standard output and takes no "
                                              "file name; to write it to a file use --json-file grades.json"),
    (["--json", "grades.json", "{tmp}/subs"], "use --json-file grades.json"),
    (["{tmp}/subs", "--json", "-"], "takes no file name; --json alone prints it there"),
    (["{tmp}/subs", "{tmp}/empty"], "give one folder of submissions; got 2"),
    (["{tmp}/subs", "--csv", "-", "--json"], "only one of --csv, --json can print on standard output"),
    (["{tmp}/subs", "--json-file", "-"], "--json-file -: to print the JSON on standard output use --json"),
    (["{tmp}/subs", "--csv", "{tmp}/kept.csv"], "kept.csv: a file with that name exists; add --force to replace"),
    (["{tmp}/subs", "--gradebook", "{tmp}/kept.csv"], "--gradebook {tmp}/kept.csv: a file with that name exists"),
    (["{tmp}/subs", "--json-file", "{tmp}/kept.csv"], "--json-file {tmp}/kept.csv: a file with that name exists"),
    (["{tmp}/subs", "--gradebook", "{tmp}/a.csv", "--csv", "{tmp}/a.csv"], "name the same file"),
    (["{tmp}/subs", "--gradebook", "{tmp}/no/a.csv"], "the folder {tmp}/no does not exist"),
    (["{tmp}/subs", "--exercises", "nope"], "--exercises: no exercise 'nope'"),
])
def test_bad_grade_arguments_are_one_line_usage_errors_before_anything_runs(tmp_path, args, message):
    _folder(tmp_path / "subs", {"ada": {"split_heads.py": "x"}})
    (tmp_path / "empty").mkdir()
    (tmp_path / "blank" / "ada").mkdir(parents=True)
    (tmp_path / "kept.csv").write_text("the teacher's own file")
    r = cli_in_process("exercise", "grade", *[a.format(tmp=tmp_path) for a in args])
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message.format(tmp=tmp_path) in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert (tmp_path / "kept.csv").read_text() == "the teacher's own file"


def test_a_grade_out_of_what_was_assigned_with_a_gradebook_and_json(tmp_path):
    """ada did the one exercise assigned: 1/1, not 1 of every exercise the class handed in."""
    root = _folder(tmp_path / "subs", {
        "ada": {"head_dim.py": HEAD_SOL},
        "ben": {"head_dim.py": "def head_dim(d, h):\n    return d // h\n", "split_heads.py": SPLIT_SOL,
                "week1/head_dim.py": HEAD_SOL},
    })
    book = tmp_path / "gradebook.csv"
    book.write_text("last week's")
    args = ("exercise", "grade", str(root), "--exercises", "head-dim", "--gradebook", str(book), "--json",
            "--time-limit", "3")
    assert cli_in_process(*args).returncode == 2 and book.read_text() == "last week's"
    r = cli_in_process(*args, "--force")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["assigned"] == ["head-dim"] and report["exercises"] == ["head-dim"]
    assert [(s["student"], s["passed"], s["out_of"], s["score"], s["cells"]) for s in report["students"]] == [
        ("ada", 1, 1, 100.0, {"head-dim": "pass"}), ("ben", 0, 1, 0.0, {"head-dim": "fail"})]
    assert report["students"][1]["not_graded"] == [
        {"file": "split_heads.py", "why": "not assigned (split-heads is not in --exercises)"},
        {"file": "week1/head_dim.py", "why": "did you mean head_dim.py? (the grader reads the top of each "
                                              "student's folder)"}]
    assert list(csv.reader(book.open())) == [["student", "head-dim", "passed", "out_of", "score"],
                                             ["ada", "pass", "1", "1", "100"],
                                             ["ben", "fail (wrong-values)", "0", "1", "0"]]


def test_a_folder_of_thousands_of_files_is_counted_not_read_file_by_file(tmp_path, monkeypatch):
    """A student who hands in a data folder with the answer (or a hostile one, 10**6 empty files): only the
    files listed are matched against the exercises; 100,000 of them took a minute of CPU on main."""
    import shapetrace.exercises.grade as grading

    root = _folder(tmp_path / "subs", {"ada": {"split_heads.py": "x", "SplitHeads.py": "x"}})
    for n in range(3000):
        (root / "ada" / "data" / f"batch_{n:04}.pt").parent.mkdir(exist_ok=True)
        (root / "ada" / "data" / f"batch_{n:04}.pt").touch()
    asked = []
    real = grading.did_you_mean
    monkeypatch.setattr(grading, "did_you_mean", lambda name, ids: asked.append(name) or real(name, ids))
    found = survey(root, IDS, ["split-heads"])
    assert [(x.file, x.why) for x in found.strays["ada"]][:2] == [
        ("SplitHeads.py", "did you mean split_heads.py?"),
        ("data/batch_0000.pt", "not an exercise file")]
    assert len(found.strays["ada"]) == grading.MAX_STRAYS + 1
    assert found.strays["ada"][-1] == Stray("…", f"and {3001 - grading.MAX_STRAYS} more files")
    assert len(asked) <= 2 * grading.MAX_STRAYS, len(asked)  # (assigned, then every exercise) per file listed


def test_a_grade_asks_the_child_for_no_traced_table_and_a_check_does(tmp_path, monkeypatch):
    # A gradebook shows verdicts and summaries, never a case's traced table: the grader's checks ask the
    # child to render none (each table costs ~10 ms a case), while `exercise check` shows the failing case's.
    from shapetrace.exercises import checker

    bad = tmp_path / "ben" / "split_heads.py"
    bad.parent.mkdir()
    bad.write_text(SPLIT_BAD)
    checked = checker.check_job(checker.Job("split-heads", str(bad)), CURRICULUM.root, time_limit=5, memory_mb=512)
    assert checked["verdict"] == "wrong-values" and checked["table"].splitlines()[0].split()[:2] == ["#", "op"]
    jobs, real = [], checker.check_job
    monkeypatch.setattr(checker, "check_job", lambda job, *a, **kw: jobs.append(job) or real(job, *a, **kw))
    (cell,) = grade(tmp_path, CURRICULUM.root, time_limit=5, memory_mb=512, workers=1)
    assert [job.tables for job in jobs] == [False]
    assert (cell.status, cell.verdict) == ("fail", "wrong-values") and cell.summary.endswith("every token.")
