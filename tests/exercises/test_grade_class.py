"""``exercise grade`` on a class of 30: right, wrong, endless, crashing and hostile students, every cell exact.

Real checks in the real sandbox (no mocks), two at a time. Each student hands in one to three files; the
table must give each its own verdict, the attackers fail or are refused (among them files of the hostile
corpus that forge frames, nest a header 2,040 arrays deep and hide escape sequences in what they print and
raise), and the grader's process, its files, the lessons and the machine are as they were. What was
assigned is given, so every score is out of the same three exercises; the gradebook CSV reads back with one
row per student. How long grading takes is measured in benchmarks/bench_checker.py; here only a generous
bound per file is asserted (a grader that hung would trip it, or the suite's timeout guard).
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import re
import resource
import subprocess
import time
from pathlib import Path

import pytest
from conftest import ROOT

from shapetrace.exercises.content import load
from shapetrace.exercises.grade import grade_class, gradebook_text

CURRICULUM = load()
SPLIT = CURRICULUM.exercise("split-heads")
SOL = SPLIT.solution.read_text()
HEAD_SOL = CURRICULUM.exercise("head-dim").solution.read_text()
TEST_SOL = CURRICULUM.exercise("test-split-square").solution.read_text()
MARK = "31.4159"
HOSTILE = ROOT / "tests" / "hostile"
DEF = "import torch\ndef split_heads(x, heads):\n    B, T, D = x.shape\n"

#: A case frame numbered 0.0 (tests/hostile/float_case_frame.py, for head-dim): it once indexed the parent's
#: list of cases, an internal error that stopped the whole grade.
FLOAT_CASE = """import os
from shapetrace.exercises.frames import encode
from shapetrace.exercises.plain import pack
def head_dim(d_model, heads):
    frame = encode({"kind": "case", "case": 0.0}, pack({"value": 1, "args": [d_model, heads]}, {"output": ""}))
    for fd in range(64):
        try:
            os.write(fd, frame)
        except OSError:
            pass
    os._exit(0)
"""
#: student -> {file: text, or a maker(path)}, and the cells (status, verdict) each must get.
CLASS: dict[str, tuple[dict, dict]] = {
    # honest and right (the reference, and right answers written differently)
    "s01": ({"split_heads.py": SOL, "head_dim.py": HEAD_SOL}, {"split-heads": "pass", "head-dim": "pass"}),
    "s02": ({"split_heads.py": DEF + "    return x.reshape(B, T, heads, D // heads).permute(0, 2, 1, 3)\n",
             "HeadDim.py": HEAD_SOL, "week1/test_split_square.py": TEST_SOL},   # not graded: listed
            {"split-heads": "pass"}),
    "s03": ({"split_heads.py": "from einops import rearrange\ndef split_heads(x, heads):\n"
                               "    return rearrange(x, 'b t (h d) -> b h t d', h=heads)\n"}, {"split-heads": "pass"}),
    "s04": ({"split_heads.py": DEF + "    return x.unflatten(2, (heads, D // heads)).transpose(1, 2)\n"},
            {"split-heads": "pass"}),
    "s05": ({"head_dim.py": HEAD_SOL, "test_split_square.py": TEST_SOL},
            {"head-dim": "pass", "test-split-square": "pass"}),
    "s06": ({"split_heads.py": SOL + "print('debugging ' * 1000)\n"}, {"split-heads": "pass"}),
    # honest and wrong
    "s07": ({"split_heads.py": SPLIT.starter.read_text()}, {"split-heads": "fail wrong-values"}),
    "s08": ({"split_heads.py": DEF + "    return x.view(B, T, heads, D // heads)\n"},
            {"split-heads": "fail wrong-shape"}),
    "s09": ({"split_heads.py": DEF + "    return x.double().view(B, T, heads, D // heads).transpose(1, 2)\n"},
            {"split-heads": "fail wrong-dtype"}),
    "s10": ({"split_heads.py": DEF + "    x.mul_(2)\n    return x.view(B, T, heads, D // heads).transpose(1, 2)\n"},
            {"split-heads": "fail mutated-input"}),
    "s11": ({"split_heads.py": DEF + "    x.view(B, T, heads, D // heads).transpose(1, 2)\n"},
            {"split-heads": "fail not-a-tensor"}),
    "s12": ({"head_dim.py": "def head_dim(d_model, heads):\n    return d_model // heads\n",
             "split_heads.py": (HOSTILE / "escape_in_exception.py").read_text()},
            {"head-dim": "fail wrong-values", "split-heads": "fail crash"}),
    "s13": ({"test_split_square.py": "def check(split_heads):\n    import torch\n"
                                     "    assert split_heads(torch.zeros(2, 3, 12), 4).shape == (2, 4, 3, 3)\n"},
            {"test-split-square": "fail misses-mutants"}),
    # endless
    "s14": ({"split_heads.py": "def split_heads(x, heads):\n    while True:\n        pass\n"},
            {"split-heads": "timed out timeout"}),
    "s15": ({"split_heads.py": "import signal\ndef split_heads(x, heads):\n"
                               "    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                               "    while True:\n        x = x + 1\n"},
            {"split-heads": "!pass"}),   # the parent's deadline or the kernel's CPU limit, whichever first
    "s16": ({"head_dim.py": "while True:\n    pass\n",
             "split_heads.py": (HOSTILE / "deep_frame_header.py").read_text()},
            {"head-dim": "timed out timeout", "split-heads": "fail crash"}),
    # crashing
    "s17": ({"split_heads.py": "def split_heads(x, heads)\n    return x\n"}, {"split-heads": "fail crash"}),
    "s18": ({"split_heads.py": "def split_heads(x, heads):\n    raise ValueError('not yet')\n",
             "head_dim.py": FLOAT_CASE}, {"split-heads": "fail crash", "head-dim": "fail crash"}),
    "s19": ({"head_dim.py": "import os\nos._exit(0)\n",
             "split_heads.py": (HOSTILE / "forged_fact_types.py").read_text(),
             "test_split_square.py": (HOSTILE / "escape_in_test.py").read_text()},
            {"head-dim": "fail crash", "split-heads": "fail crash", "test-split-square": "fail rejects-reference"}),
    "s20": ({"split_heads.py": "def split_head(x, heads):\n    return x\n"}, {"split-heads": "fail crash"}),
    # hostile
    "s21": ({"split_heads.py": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n" + SOL},
            {"split-heads": "fail crash"}),
    "s22": ({"split_heads.py": f"import subprocess\nsubprocess.Popen(['sleep', '{MARK}'])\n" + SOL},
            {"split-heads": "fail crash"}),
    "s23": ({"split_heads.py": "import torch\ndef split_heads(x, heads):\n    return torch.ones(2**40)\n"},
            {"split-heads": "fail out-of-memory"}),
    "s24": ({"split_heads.py": "import resource, os\nresource.prlimit(os.getppid(), resource.RLIMIT_CPU, (1, 1))\n"
                               + SOL}, {"split-heads": "fail crash"}),
    "s25": ({"split_heads.py": (HOSTILE / "rewrite_solution_from_file.py").read_text()},
            {"split-heads": "fail crash"}),
    "s26": ({"test_split_square.py": (HOSTILE / "fingerprint_co_code.py").read_text()},
            {"test-split-square": "fail rejects-reference"}),
    "s27": ({"split_heads.py": "import os\nfor fd in range(64):\n    try:\n        os.write(fd, b'\\x00' * 100000)\n"
                               "    except OSError:\n        pass\n" + SOL}, {"split-heads": "!pass"}),
    # (a crash when the garbage reaches the channel; not checked when it lands before the child is ready)
    "s28": ({"split_heads.py": f"open({str(Path.home() / ('graded-' + MARK))!r}, 'w')\n" + SOL},
            {"split-heads": "fail crash"}),
    # refused without being opened
    "s29": ({"split_heads.py": lambda p: p.symlink_to(SPLIT.solution)}, {"split-heads": "refused"}),
    "s30": ({"split_heads.py": lambda p: os.mkfifo(p), "head_dim.py": "# " + "x" * (300 << 10) + "\n" + HEAD_SOL},
            {"split-heads": "refused", "head-dim": "refused"}),
}
EXERCISES = ("split-heads", "head-dim", "test-split-square")


def make_class(root: Path) -> Path:
    for student, (files, _) in CLASS.items():
        (root / student).mkdir(parents=True)
        for name, content in files.items():
            path = root / student / name
            path.parent.mkdir(exist_ok=True)
            content(path) if callable(content) else path.write_text(content)
    return root


def _guarded() -> dict[str, str]:
    package = Path(__import__("shapetrace").__file__).resolve().parent
    files = [*package.rglob("*.py"), *Path(CURRICULUM.root).rglob("*.py"), *Path(CURRICULUM.root).rglob("*.toml")]
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = make_class(tmp_path_factory.mktemp("class30") / "submissions")
    before = dict(files=_guarded(), cpu=resource.getrlimit(resource.RLIMIT_CPU),
                  nofile=resource.getrlimit(resource.RLIMIT_NOFILE), cwd=os.getcwd(),
                  env={k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"})
    done = []
    started = time.monotonic()
    result = grade_class(root, CURRICULUM.root, time_limit=2, memory_mb=512, workers=2,
                         on_done=lambda cell, n, total: done.append((n, total)), exercises=list(EXERCISES))
    before["seconds"] = time.monotonic() - started
    return {(c.student, c.exercise): c for c in result.cells}, done, before, result


def _want(verdict: str):
    if verdict in ("pass", "refused", "!pass"):
        return verdict, None
    if verdict.startswith("timed out"):
        return "timed out", "timeout"
    return "fail", verdict.split()[1]


@pytest.mark.parametrize("student", sorted(CLASS))
def test_each_student_gets_exactly_their_verdicts(graded, student):
    cells = graded[0]
    for exercise in EXERCISES:
        cell = cells.get((student, exercise))
        want = CLASS[student][1].get(exercise)
        if want is None:
            assert cell is None or cell.status == "missing", cell
            continue
        status, verdict = _want(want)
        if status == "!pass":
            assert cell.status in ("fail", "refused", "timed out"), cell
        else:
            assert cell.status == status, cell
            if verdict is not None:
                assert cell.verdict == verdict, cell


def _graded_files() -> int:
    return sum(1 for files, _ in CLASS.values() for name in files if "/" not in name and name[0].islower())


def test_the_table_has_30_students_and_a_progress_step_per_file(graded):
    cells, done, _, result = graded
    files = _graded_files()
    assert sorted({s for s, _ in cells}) == sorted(CLASS) and len(CLASS) == 30
    assert len(done) == files and done[-1] == (files, files)
    assert sum(c.status == "pass" for c in cells.values()) == 8
    assert result.exercises == list(EXERCISES) and len(result.cells) == 30 * len(EXERCISES)


def test_grading_took_a_bounded_time(graded):
    """Two files at a time, none past its limits: 20 s a file is far above a loaded machine's (a check that
    hung, or a student whose attack stalled the others, would pass it)."""
    assert graded[2]["seconds"] < 20 * _graded_files() / 2, graded[2]["seconds"]


def test_the_gradebook_has_one_row_per_student_and_reads_back(graded):
    cells, _, _, result = graded
    rows = list(csv.reader(io.StringIO(gradebook_text(result))))
    assert rows[0] == ["student", *EXERCISES, "passed", "out_of", "score"]
    assert [r[0] for r in rows[1:]] == sorted(CLASS)
    for student, *marks, passed, out_of, score in rows[1:]:
        wanted = sum(cells[student, e].status == "pass" for e in EXERCISES)
        assert (int(passed), int(out_of), float(score)) == (wanted, 3, round(100 * wanted / 3, 1)), student
        assert [m.split()[0] for m in marks] == [cells[student, e].status.split()[0] for e in EXERCISES]


def test_files_not_graded_are_listed_and_attackers_text_is_clean(graded):
    cells, _, _, result = graded
    assert [(x.file, x.why) for x in result.strays["s02"]] == [
        ("HeadDim.py", "did you mean head_dim.py?"),
        ("week1/test_split_square.py", "did you mean test_split_square.py? (the grader reads the top of each "
                                       "student's folder)")]
    controls = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
    dirty = [c for c in result.cells if any(controls.search(t) for t in (c.summary, c.detail, *c.explanation))]
    assert dirty == []
    assert "✓ pass" in cells["s12", "split-heads"].summary   # the attacker's text is shown, inert


def test_nothing_escaped_and_the_grader_is_as_it_was(graded):
    before = dict(graded[2])
    before.pop("seconds")
    assert _guarded() == before["files"]
    assert resource.getrlimit(resource.RLIMIT_CPU) == before["cpu"]  # s24 tried to lower it
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == before["nofile"]
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    assert os.getcwd() == before["cwd"] and env == before["env"]
    assert not (Path.home() / f"graded-{MARK}").exists()
    left = subprocess.run(["pgrep", "-f", f"sleep {MARK}"], capture_output=True, text=True).stdout
    assert left == "", "a student's process outlived the grading"
