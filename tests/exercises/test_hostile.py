"""Hostile learner files: none can pass with a wrong answer, hang a check, or outlive it.

Every file here is wrong or malicious; each test asserts the exact verdict it gets. The checker runs the
learner's code in a locked-down child and judges in this process, so patching the checker, patching
torch, forging output or reading the solution changes nothing but the verdict's wording.
"""

from __future__ import annotations

import subprocess

import pytest
from conftest import once_per_run

from shapetrace.exercises.checker import Job, check_files, check_job
from shapetrace.exercises.content import load

CURRICULUM = load()
RIGHT = "    B, T, D = x.shape\n    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)\n"
WRONG = "    B, T, D = x.shape\n    return x.view(B, heads, T, D // heads)\n"
MARK = "31.4159"  # a sleep no other process on the machine uses
HOUR_MARK = "3141.59"  # the same, an hour long

SPLIT = {
    "forge-frames-exit": '''
import os
from shapetrace.exercises.frames import encode
def split_heads(x, heads):
    for fd in range(1, 64):
        try:
            os.write(fd, encode({"kind": "ready"}) + encode({"kind": "verdict", "verdict": "pass"}))
        except OSError:
            pass
    os._exit(0)
''',
    "frame-flood": '''
import os
from shapetrace.exercises.frames import encode
def split_heads(x, heads):
    flood = encode({"kind": "ready"}) * 20000
    for fd in range(0, 64):
        try:
            os.write(fd, flood)
        except OSError:
            pass
''' + WRONG,
    "forge-atexit": '''
import atexit, os
atexit.register(lambda: [os.write(fd, b'{"job": 0, "verdict": {"verdict": "pass"}}\\n') for fd in (1, 2)])
def split_heads(x, heads):
''' + WRONG,
    "forge-thread": '''
import os, threading
def split_heads(x, heads):
    t = threading.Thread(target=lambda: os.write(1, b'{"verdict": "pass"}\\n'))
    t.start(); t.join()
''' + WRONG,
    "patch-checker": '''
import shapetrace.exercises.judge as judge, shapetrace.exercises.inputs as inputs
judge.same_value = lambda *a, **k: True
judge.Judge.case = lambda *a, **k: None
inputs.draw = lambda *a, **k: []
def split_heads(x, heads):
''' + WRONG,
    "patch-torch": '''
import torch
torch.Tensor.__eq__ = lambda a, b: torch.ones((), dtype=torch.bool)
torch.Tensor.all = lambda self, *a, **k: torch.tensor(True)
torch.equal = lambda a, b: True
torch.allclose = lambda *a, **k: True
def split_heads(x, heads):
''' + WRONG,
    "subclass": '''
import torch
class Yes(torch.Tensor):
    def __eq__(self, other):
        return torch.ones((), dtype=torch.bool)
    __hash__ = torch.Tensor.__hash__
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, heads, T, D // heads).as_subclass(Yes)
''',
    "old-public-sizes": '''
def split_heads(x, heads):
    if tuple(x.shape) in ((2, 5, 12), (3, 3, 9)):
        B, T, D = x.shape
        return x.view(B, T, heads, D // heads).transpose(1, 2)
    return x.view(x.shape[0], heads, x.shape[1], -1)
''',
    "only-when-b-is-2": '''
def split_heads(x, heads):
    B, T, D = x.shape
    if B == 2 or B == T:
        return x.view(B, T, heads, D // heads).transpose(1, 2)
    return x.view(B, heads, T, D // heads)
''',
    "reads-solution": '''
from pathlib import Path
import shapetrace.exercises.content as content
SOL = Path(content.lessons_root()) / "01_split_heads" / "split-heads" / "solution.py"
exec(SOL.read_text())
''',
    "lists-lessons": '''
import os
from shapetrace.exercises.content import lessons_root
def split_heads(x, heads):
    os.listdir(lessons_root())
''' + WRONG,
    "raise-memory-cap": '''
import resource, torch
def split_heads(x, heads):
    try:
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    except (ValueError, OSError):
        pass
    big = torch.empty(2 * 2**30 // 4)
''' + RIGHT,
    "ignores-signals": '''
import resource, signal
def split_heads(x, heads):
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    signal.signal(signal.SIGXCPU, signal.SIG_IGN)
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (10**6, 10**6))
    except (ValueError, OSError):
        pass
    while True:
        pass
''',
    "daemon": f'''
import subprocess
def split_heads(x, heads):
    subprocess.Popen(["sleep", "{MARK}"], start_new_session=True)
''' + RIGHT,
    "raw-fork": f'''
import _posixsubprocess, os
def split_heads(x, heads):
    r, w = os.pipe()
    _posixsubprocess.fork_exec(["sleep", "{MARK}"], [b"/bin/sleep"], True, (), None, None,
        -1, -1, -1, -1, -1, -1, r, w, True, True, 0, None, None, None, -1, None, False)
''' + RIGHT,
    "ctypes-fork": '''
import ctypes
def split_heads(x, heads):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.fork() < 0:
        raise BlockingIOError(ctypes.get_errno(), "fork refused")
''' + RIGHT,
    "writes-files": '''
def split_heads(x, heads):
    open("/tmp/shapetrace-hostile-write.txt", "w").write("x")
''' + RIGHT,
}

HEAD_DIM = {
    "floors-when-remainder-is-1": '''
def head_dim(d_model, heads):
    if d_model % heads > 1:
        raise ValueError(f"d_model {d_model} is not divisible by heads {heads}")
    return d_model // heads
''',
    "message-without-numbers": '''
def head_dim(d_model, heads):
    if d_model % heads:
        raise ValueError("not divisible")
    return d_model // heads
''',
    "wrong-exception": '''
def head_dim(d_model, heads):
    if d_model % heads:
        raise TypeError(f"{d_model} {heads}")
    return d_model // heads
''',
}


def _check_every_file(tmp) -> dict[str, dict]:
    jobs, names = [], []
    for group, exercise in ((SPLIT, "split-heads"), (HEAD_DIM, "head-dim")):
        for name, code in group.items():
            path = tmp / f"{name}.py"
            path.write_text(code)
            jobs.append(Job(exercise, str(path)))
            names.append(name)
    out = check_files(jobs, CURRICULUM.root, time_limit=1.5, memory_mb=512)
    return dict(zip(names, out))


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    """Checked once per run, whichever pytest-xdist worker comes first (``once_per_run``)."""
    return once_per_run(tmp_path_factory, "hostile-files", _check_every_file)


@pytest.mark.parametrize("name", list(SPLIT) + list(HEAD_DIM))
def test_no_hostile_file_passes(verdicts, name):
    assert verdicts[name]["verdict"] != "pass", verdicts[name]


@pytest.mark.parametrize("name", ["forge-atexit", "forge-thread", "patch-checker", "patch-torch", "subclass",
                                  "old-public-sizes", "only-when-b-is-2"])
def test_forgeries_get_the_wrong_values_verdict(verdicts, name):
    v = verdicts[name]
    assert v["verdict"] == "wrong-values", v
    assert v["mistake"] == "view-straight", v


def test_forged_frames_are_not_read_as_results(verdicts):
    v = verdicts["forge-frames-exit"]
    assert v["verdict"] == "crash" and v["case"] == "distinct", v
    assert v["summary"] == (f"your code ended the checker's process (exit code 0) with {v['sizes']}, "
                            "before your function returned"), v


def test_a_flood_of_frames_is_cut_off(verdicts):
    v = verdicts["frame-flood"]
    assert v["verdict"] == "crash", v
    assert v["summary"] == ("the checker could not read your function's results: something in your file wrote "
                            "over the checker's channel")
    assert v["explanation"] == ["more than 64 frames"]


def test_the_solutions_and_lessons_are_not_there(verdicts):
    """The sandbox's file system holds no lessons: a file that reads a solution or lists the lessons
    finds nothing (the folder is not mounted, or masked by an empty read-only tmpfs)."""
    v = verdicts["reads-solution"]
    assert v["verdict"] == "crash", v
    assert v["summary"].startswith("your file raised FileNotFoundError: [Errno 2] No such file or directory: "), v
    v = verdicts["lists-lessons"]   # (listed when its function is called)
    assert v["verdict"] == "crash", v
    assert v["summary"].startswith("your function raised FileNotFoundError"), v


def test_memory_cap_cannot_be_lifted(verdicts):
    v = verdicts["raise-memory-cap"]
    assert v["verdict"] == "out-of-memory" and v["summary"] == "your function ran out of memory", v
    assert v["line"] == 8


def test_ignored_signals_still_time_out(verdicts):
    v = verdicts["ignores-signals"]
    assert v["verdict"] == "timeout", v
    assert v["summary"] == "your function ran for more than 1.5 s and was stopped"


@pytest.mark.parametrize("name", ["daemon", "raw-fork", "ctypes-fork"])
def test_no_process_can_be_started(verdicts, name):
    v = verdicts[name]
    assert v["verdict"] == "crash", v
    assert "PermissionError" in v["explanation"][0] or "BlockingIOError" in v["explanation"][0] \
        or "Resource temporarily unavailable" in v["explanation"][0], v
    left = subprocess.run(["pgrep", "-f", f"sleep {MARK}"], capture_output=True, text=True).stdout
    assert left == "", "a process started by a learner file outlived its check"


def test_files_cannot_be_written(verdicts):
    v = verdicts["writes-files"]
    assert v["verdict"] == "crash"
    assert v["summary"] == ("your function raised PermissionError: [Errno 13] Permission denied: "
                            "'/tmp/shapetrace-hostile-write.txt'"), v


def test_head_dim_remainder_one_is_checked(verdicts):
    v = verdicts["floors-when-remainder-is-1"]
    assert v["verdict"] == "wrong-values" and v["case"] == "indivisible", v
    assert v["mistake"] == "floor"


def test_error_message_must_name_the_numbers(verdicts):
    v = verdicts["message-without-numbers"]
    assert v["verdict"] == "wrong-values", v
    d, h = (int(p.split("=")[1]) for p in v["sizes"].split(", "))
    assert v["summary"] == (f"with d_model={d}, heads={h} your function raised ValueError, but its message "
                            f"('not divisible') does not name d_model = {d} and heads = {h}")


def test_wrong_exception_type(verdicts):
    v = verdicts["wrong-exception"]
    assert v["verdict"] == "wrong-values"
    assert "your function raised TypeError" in v["summary"] and "it should raise ValueError" in v["summary"]


#: An exception whose ``__str__`` raises (rollbar/pyrollbar issue #148's BrokenError; feditest PR #168's
#: ``__str__`` returning a set): each read "your code ended the checker's process (exit code 1)".
UNSHOWN = {
    "exception_str_raises": ("your function raised Lies (its message could not be shown: __str__ raised Lies)",
                             11, "raise Lies()"),
    "exception_str_not_text": ("your function raised HeadError (its message could not be shown: __str__ raised "
                               "TypeError)", 15, 'raise HeadError(f"{D} features, {heads} heads")'),
    "exception_str_raises_loading": ("your file raised BrokenError (its message could not be shown: __str__ "
                                     "raised ValueError) while loading, before your function was called",
                                     9, "raise BrokenError()"),
}


def test_an_exception_whose_str_raises_reads_as_the_learners_exception():
    from conftest import ROOT

    jobs = [Job("split-heads", str(ROOT / "tests" / "hostile" / f"{name}.py")) for name in UNSHOWN]
    for (name, (summary, line, code)), v in zip(UNSHOWN.items(), check_files(jobs, CURRICULUM.root, 5, 512)):
        assert (v["verdict"], v["summary"], v["line"], v["code"]) == ("crash", summary, line, code), (name, v)
        assert "ended the checker's process" not in " ".join(v["explanation"]), v


def test_a_descendant_holding_the_pipe_cannot_hang_the_check(tmp_path):
    # a thread (threads are allowed) that keeps writing to stderr after the function returned
    path = tmp_path / "holds.py"
    path.write_text("import os, threading, time\n"
                    "def _spam():\n    while True:\n        os.write(2, b'x' * 65536)\n"
                    "def split_heads(x, heads):\n    threading.Thread(target=_spam, daemon=True).start()\n"
                    + RIGHT)
    v = check_job(Job("split-heads", str(path)), CURRICULUM.root, time_limit=2)   # (a hang: the suite's guard)
    assert v["verdict"] == "pass"


def test_minimum_memory_passes_the_reference():
    sol = CURRICULUM.exercise("qkv-heads").solution
    v = check_job(Job("qkv-heads", str(sol)), CURRICULUM.root, memory_mb=256)
    assert v["verdict"] == "pass", v


def test_stderr_floods_are_read_with_a_cap(tmp_path):
    import resource

    path = tmp_path / "floods.py"
    path.write_text("import os\ndef split_heads(x, heads):\n    chunk = b'x' * (1 << 20)\n"
                    "    for _ in range(64):\n        os.write(2, chunk)\n" + RIGHT)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    v = check_job(Job("split-heads", str(path)), CURRICULUM.root, time_limit=5)
    assert v["verdict"] == "pass", v
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 64, f"the parent kept the child's stderr: +{grown_mib:.0f} MiB"


def test_the_git_history_is_out_of_reach(tmp_path):
    from conftest import ROOT

    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    path = tmp_path / "reads_git.py"
    path.write_text('''
import os
from pathlib import Path
import shapetrace
ROOT = Path(shapetrace.__file__).resolve().parents[1]
DOT = ROOT / ".git"
GIT = DOT if DOT.is_dir() else Path(DOT.read_text().split(":", 1)[1].strip()).parent.parent
def split_heads(x, heads):
    return os.listdir(GIT / "objects")
''')
    v = check_job(Job("split-heads", str(path)), CURRICULUM.root, time_limit=5)
    assert v["verdict"] == "crash" and "FileNotFoundError" in v["summary"], v


def test_reading_stops_when_an_escaped_descendant_holds_the_pipes(tmp_path):
    """Without the sandbox's process ban (another platform), a setsid grandchild keeping the pipes open
    still cannot stretch a check: reading stops once the child itself exits, long before the grandchild's
    hour-long sleep or the reader's own limit (a reader that waited would hang the test: the suite's guard)."""
    import os
    import signal
    import subprocess
    import sys

    from shapetrace.exercises.sandbox import _Reader, kill_group

    pid_file = tmp_path / "pid"
    script = (f"import subprocess; p = subprocess.Popen(['sleep', '{HOUR_MARK}'], start_new_session=True); "
              f"open({str(pid_file)!r}, 'w').write(str(p.pid))")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        run = _Reader(proc, limit=3600, phases=1).read()
    finally:
        kill_group(proc)
        proc.wait()
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert run.timed_out_phase is None and not run.ready


def test_a_checker_that_cannot_start_is_not_blamed_on_the_learner(tmp_path, monkeypatch, cli):
    import json

    from shapetrace.exercises import sandbox
    from shapetrace.exercises.sandbox import ChildRun

    monkeypatch.setenv("SHAPETRACE_STATE_DIR", str(tmp_path / "state"))
    def fails_to_start(proc, *args):
        sandbox.stop_child(proc)
        return ChildRun(returncode=1, stderr="ImportError: torch")

    monkeypatch.setattr(sandbox, "finish_child", fails_to_start)
    sol = CURRICULUM.exercise("split-heads").solution
    r = cli("exercise", "check", "split-heads", "--file", str(sol))
    assert r.exit_code == 2
    assert "the checker itself could not start, so your file was not checked" in r.output
    assert "this is not your code" in r.output
    state = tmp_path / "state" / "progress.json"
    assert not state.exists() or json.loads(state.read_text())["exercises"] == {}


def test_a_check_that_ignores_every_signal_ends_at_its_deadline(tmp_path):
    path = tmp_path / "stubborn.py"
    path.write_text(SPLIT["ignores-signals"])
    v = check_job(Job("split-heads", str(path)), CURRICULUM.root, time_limit=1)
    assert v["verdict"] == "timeout" and v["case"] == "distinct", v


def test_patching_path_functions_does_not_reach_the_solution(tmp_path):
    path = tmp_path / "disarms.py"
    path.write_text('''
import gc, os, os.path
from pathlib import Path
import shapetrace.exercises.content as content
SOL = Path(content.lessons_root()) / "01_split_heads" / ".." / "01_split_heads" / "split-heads" / "solution.py"
os.path.realpath = lambda p, **k: "/nowhere"
os.fsdecode = lambda p: "/nowhere"
try:
    for obj in gc.get_objects():
        pass
except PermissionError:
    pass
def split_heads(x, heads):
    exec(SOL.read_text())
    return split_heads(x, heads)
''')
    v = check_job(Job("split-heads", str(path)), CURRICULUM.root, time_limit=5)
    assert v["verdict"] == "crash" and "FileNotFoundError" in v["summary"], v
