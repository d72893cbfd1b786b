"""What a learner's test receives (:mod:`shapetrace.exercises.sealed`), and what it cannot reach.

The facades of the reference and of every broken version are indistinguishable to introspection; the
real code runs in a process of its own (:mod:`shapetrace.exercises.remote`). Each fingerprinting test in
tests/hostile/ is run against the implementations twice, in a subprocess of its own (some patch torch):
compiled plainly in the test's process, as the child did before, it passes (the control: the attack
works), and behind the facades, with the implementation in a forked process, it no longer can. The same
files go through the full sandbox in tests/exercises/test_hostile_corpus.py; the attacks on the implementation's
process run here with its layers one at a time.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import ROOT

from shapetrace.exercises.checker import PARALLEL, Job, check_job
from shapetrace.exercises.content import load
from shapetrace.exercises.sealed import Guard, facades, normalise

CURRICULUM = load()
TESTS = [e for e in CURRICULUM.exercises if e.kind == "test"]
HOSTILE = ROOT / "tests" / "hostile"
ATTACKS = sorted(HOSTILE.glob("fingerprint_*.py"))


def _looks(fn) -> str:
    co = fn.__code__
    try:
        source = inspect.getsource(fn)
    except OSError:
        source = None
    seen = (co.co_code, co.co_consts, co.co_names, co.co_varnames, co.co_filename, co.co_firstlineno,
            list(co.co_lines()), co.co_stacksize, co.co_flags, fn.__name__, fn.__qualname__, fn.__module__,
            fn.__defaults__, fn.__kwdefaults__, fn.__doc__, fn.__closure__, source, sorted(fn.__dict__))
    return hashlib.sha256(repr(seen).encode()).hexdigest()


class _Client:
    """Stands for the pipe to one implementation's process (the facades only keep its ``call``)."""

    def __init__(self, code: str):
        self.code = code

    def call(self, k, args, kwargs):
        raise AssertionError("not called here")


@pytest.mark.parametrize("exercise", [e.id for e in TESTS])
def test_every_implementation_looks_the_same(exercise):
    ex = CURRICULUM.exercise(exercise)
    impls = [ex.reference_code] + [m.code for m in ex.mutants]
    looks = {tuple(_looks(f) for f in facades(_Client(code), list(ex.subjects), Guard())) for code in impls}
    assert len(looks) == 1
    plain = set()
    for code in impls:
        namespace: dict = {}
        exec(compile(code, "<implementation under test>", "exec"), namespace)
        plain.add(tuple(_looks(namespace[s]) for s in ex.subjects))
    assert len(plain) == len(impls)  # the control: compiled plainly, every one has its own fingerprint


def test_the_facade_calls_the_real_code():
    import torch
    from test_remote import Served

    ex = CURRICULUM.exercise("test-split-square")
    right = Served(ex.reference_code, ["split_heads"])
    skip = Served(next(m.code for m in ex.mutants if m.id == "skip-transpose"), ["split_heads"])
    x = torch.arange(2 * 3 * 8.0).view(2, 3, 8)  # (B, T, D)
    assert right.fns[0](x, 4).stride() == (24, 2, 8, 1) and right.fns[0](x, heads=4).shape == (2, 4, 3, 2)
    assert skip.fns[0](x, 4).stride() == (24, 6, 2, 1)
    with pytest.raises(RuntimeError, match="shape '\\[2, 3, 3, 2\\]' is invalid"):
        right.fns[0](torch.zeros(2, 3, 8), 3)
    right.close()
    skip.close()


def test_normalised_source_has_no_comments_or_docstrings():
    code = 'import torch\n\n\ndef f(x):\n    """Doc."""\n    return x + 1  # why\n'
    assert normalise(code) == "import torch\n\ndef f(x):\n    return x + 1\n"


HARNESS = r'''
import json, runpy, sys
from shapetrace.exercises import remote
from shapetrace.exercises.content import load
from shapetrace.exercises.sealed import Guard, facades
ex = load().exercise("test-split-square")
impls = [("reference", ex.reference_code)] + [(m.id, m.code) for m in ex.mutants]
# forked before the learner's file runs, as in the child: one process per implementation
clients = [remote.start(lambda code=code: (code, ["split_heads"])) for _, code in impls]
assert all(c.hello() == [] for c in clients)
guard = Guard()
check = runpy.run_path(sys.argv[1])["check"]
out = {}
for how in ("apart", "plain"):  # apart first: nothing plain is alive yet, as in the child
    raised = []
    for (name, code), client in zip(impls, clients):
        if how == "plain":
            ns = {"__name__": "implementation"}
            exec(compile(code, "<implementation under test>", "exec"), ns)
            fns = [ns["split_heads"]]
        else:
            fns = facades(client, ["split_heads"], guard)
        try:
            check(*fns)
            raised.append(False)
        except Exception:
            raised.append(True)
    out[how] = raised
print(json.dumps(out))
'''


def _harness(zygote, attack: Path) -> dict:
    """HARNESS on ``attack`` in a process of its own (some attacks patch torch), forked from a zygote that
    has imported torch (tests/zygote.py): the same fresh ``__main__``, the same imports done by the script,
    the same forked implementations; the interpreter start it no longer pays is not what the attacks try."""
    done = zygote.run(HARNESS, str(attack), timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("attack", [p.name for p in ATTACKS])
def test_each_fingerprinting_attack_worked_before_and_fails_apart(torch_zygote, attack):
    raised = _harness(torch_zygote, HOSTILE / attack)
    n = len(raised["plain"])
    assert raised["plain"] == [False] + [True] * (n - 1)  # plain: passes the reference, fails every mutant
    assert raised["apart"] == [True] * n  # apart: the same answer for all of them, the reference rejected


def test_there_are_nine_fingerprinting_attacks():
    assert len(ATTACKS) == 9


TRACE = HOSTILE / "ctypes_trace_real_function.py"


def test_tracing_the_real_function_worked_in_process_and_fails_apart(torch_zygote):
    """What the salt could not stop (it hid what the code looks like, not what it does): through ctypes the
    test reached the real function and compared the torch ops it runs with the reference's. With the code
    in the test's process it still tells every broken version from the reference; with the implementation
    in its own process there is no function to reach, for any of them."""
    raised = _harness(torch_zygote, TRACE)
    n = len(raised["plain"])
    assert raised["plain"] == [False] + [True] * (n - 1)
    assert raised["apart"] == [True] * n


def test_tracing_the_real_function_fails_in_the_full_sandbox():
    v = check_job(Job("test-split-square", str(TRACE)), CURRICULUM.root, time_limit=5, memory_mb=512)
    assert v["verdict"] == "rejects-reference", v
    assert v["summary"] == ("your test fails the reference implementation, which is correct: on the inputs your "
                            "test builds, it raised AssertionError: no address behind the facade"), v


SCAN = r'''
import runpy, sys
import torch
code = open(sys.argv[2]).read()
ns = {}
exec(compile(code, "<implementation under test>", "exec"), ns)
meta = {"implementation": code}  # as the child held it when the implementation ran in its process
check = runpy.run_path(sys.argv[1])["check"]
try:
    check(ns["split_heads"])
    print("passed")
except AssertionError as exc:
    print(f"raised {exc}")
'''


def test_scanning_memory_finds_the_code_where_it_is_in_the_process(tmp_path, torch_zygote):
    """The control of tests/hostile/scan_memory_for_code.py: in a process that holds one implementation's
    code (and nothing else of the exercise), the scan passes the reference and fails every broken version.
    Each process is forked from a zygote that imported torch alone and never reads an implementation, so
    what the scan finds is what that process read (tests/zygote.py)."""
    ex = CURRICULUM.exercise("test-split-square")
    got = []
    for code in [ex.reference_code] + [m.code for m in ex.mutants]:
        (tmp_path / "code.py").write_text(code)
        done = torch_zygote.run(SCAN, str(HOSTILE / "scan_memory_for_code.py"), str(tmp_path / "code.py"),
                                timeout=120, cwd=ROOT)
        assert done.returncode == 0, done.stderr[-2000:]
        got.append(done.stdout.strip())
    assert got == ["passed"] + ["raised the reference's code is not in this process"] * len(ex.mutants)


REACH = HOSTILE / "reach_the_server.py"
#: The layers each run of the attack on the implementation's process keeps (bubblewrap always).
REACH_RUNS = [("bwrap",), ("bwrap", "dumpable"), ("bwrap", "landlock"), ("bwrap", "dumpable", "seccomp")]


@pytest.fixture(scope="module")
def reached():
    def one(layers):
        return check_job(Job("test-split-square", str(REACH)), CURRICULUM.root, time_limit=5, memory_mb=512,
                         layers=layers)

    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        return dict(zip(REACH_RUNS, pool.map(one, REACH_RUNS)))


def _out_of_reach(v: dict, tried: str) -> None:
    assert v["verdict"] == "rejects-reference", v
    assert v["summary"].endswith(f"it raised AssertionError: the implementation's process is out of reach: {tried}"), v


def test_without_layers_the_implementations_memory_gives_it_away(reached):
    """The control: with no layer on the implementation's process, this test reads its memory
    (/proc/PID/mem) and tells the reference from every broken version without checking a value."""
    v = reached[("bwrap",)]
    assert v["verdict"] == "unverified" and "catches all 4 broken versions" in v["summary"], v


def test_non_dumpable_alone_keeps_its_memory_and_ptrace_out(reached):
    _out_of_reach(reached[("bwrap", "dumpable")],
                  "mem PermissionError, process_vm_readv EPERM, ptrace EPERM, kill sent")


def test_landlock_alone_keeps_its_memory_ptrace_and_signals_out(reached):
    """The test's Landlock domain is created after the fork: the implementation's process is outside it."""
    _out_of_reach(reached[("bwrap", "landlock")],
                  "mem PermissionError, process_vm_readv EPERM, ptrace EPERM, kill PermissionError")


def test_seccomp_refuses_the_signal_non_dumpable_lets_through(reached):
    _out_of_reach(reached[("bwrap", "dumpable", "seccomp")],
                  "mem PermissionError, process_vm_readv EPERM, ptrace EPERM, kill PermissionError")
