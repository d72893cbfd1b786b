"""``exercise grade`` on a class of 30: right, wrong, endless, crashing and hostile students, every cell exact.

Real checks in the real sandbox (no mocks), two at a time. Each student hands in one or two files; the
table must give each its own verdict, the attackers fail or are refused, and the grader's process,
its files, the lessons and the machine are as they were. How long grading takes is measured in
benchmarks/bench_checker.py, never asserted here (a grader that hung would trip the suite's timeout guard).
"""

from __future__ import annotations

import hashlib
import os
import resource
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT

from shapetrace.exercises.content import load
from shapetrace.exercises.grade import grade

CURRICULUM = load()
SPLIT = CURRICULUM.exercise("split-heads")
SOL = SPLIT.solution.read_text()
HEAD_SOL = CURRICULUM.exercise("head-dim").solution.read_text()
TEST_SOL = CURRICULUM.exercise("test-split-square").solution.read_text()
MARK = "31.4159"
HOSTILE = ROOT / "tests" / "hostile"
DEF = "import torch\ndef split_heads(x, heads):\n    B, T, D = x.shape\n"

#: student -> {file: text, or a maker(path)}, and the cells (status, verdict) each must get.
CLASS: dict[str, tuple[dict, dict]] = {
    # honest and right (the reference, and right answers written differently)
    "s01": ({"split_heads.py": SOL, "head_dim.py": HEAD_SOL}, {"split-heads": "pass", "head-dim": "pass"}),
    "s02": ({"split_heads.py": DEF + "    return x.reshape(B, T, heads, D // heads).permute(0, 2, 1, 3)\n"},
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
    "s12": ({"head_dim.py": "def head_dim(d_model, heads):\n    return d_model // heads\n"},
            {"head-dim": "fail wrong-values"}),
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
    "s16": ({"head_dim.py": "while True:\n    pass\n"}, {"head-dim": "timed out timeout"}),
    # crashing
    "s17": ({"split_heads.py": "def split_heads(x, heads)\n    return x\n"}, {"split-heads": "fail crash"}),
    "s18": ({"split_heads.py": "def split_heads(x, heads):\n    raise ValueError('not yet')\n"},
            {"split-heads": "fail crash"}),
    "s19": ({"head_dim.py": "import os\nos._exit(0)\n"}, {"head-dim": "fail crash"}),
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
    cells = grade(root, CURRICULUM.root, time_limit=2, memory_mb=512, workers=2,
                  on_done=lambda cell, n, total: done.append((n, total)))
    return {(c.student, c.exercise): c for c in cells}, done, before


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


def test_the_table_has_30_students_and_a_progress_step_per_file(graded):
    cells, done, _ = graded
    files = sum(len(files_) for files_, _ in CLASS.values())
    assert sorted({s for s, _ in cells}) == sorted(CLASS) and len(CLASS) == 30
    assert len(done) == files and done[-1] == (files, files)
    assert sum(c.status == "pass" for c in cells.values()) == 8


def test_nothing_escaped_and_the_grader_is_as_it_was(graded):
    before = graded[2]
    assert _guarded() == before["files"]
    assert resource.getrlimit(resource.RLIMIT_CPU) == before["cpu"]  # s24 tried to lower it
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == before["nofile"]
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    assert os.getcwd() == before["cwd"] and env == before["env"]
    assert not (Path.home() / f"graded-{MARK}").exists()
    left = subprocess.run(["pgrep", "-f", f"sleep {MARK}"], capture_output=True, text=True).stdout
    assert left == "", "a student's process outlived the grading"
