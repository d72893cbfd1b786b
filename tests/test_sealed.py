"""The implementation a learner's test receives is sealed (:mod:`shapetrace.exercises.sealed`).

The facades of the reference and of every broken version are indistinguishable to introspection (and
differ in what they return). Each fingerprinting test in tests/hostile/ is run against the
implementations twice, in a subprocess of its own (some patch torch): compiled plainly, as the child
did before, it passes (the control: the attack works), and sealed it no longer can. The same files
go through the full sandbox in tests/test_hostile_corpus.py.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import ROOT

from shapetrace.exercises.content import load
from shapetrace.exercises.sealed import Guard, normalise, seal

CURRICULUM = load()
TESTS = [e for e in CURRICULUM.exercises if e.kind == "test"]
ATTACKS = sorted((Path(__file__).parent / "hostile").glob("fingerprint_*.py"))


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


@pytest.mark.parametrize("exercise", [e.id for e in TESTS])
def test_every_implementation_looks_the_same_and_behaves_as_itself(exercise):
    ex = CURRICULUM.exercise(exercise)
    guard = Guard()
    impls = [ex.reference_code] + [m.code for m in ex.mutants]
    looks = {tuple(_looks(f) for f in seal(code, list(ex.subjects), guard)) for code in impls}
    assert len(looks) == 1
    plain = set()
    for code in impls:
        namespace: dict = {}
        exec(compile(code, "<implementation under test>", "exec"), namespace)
        plain.add(tuple(_looks(namespace[s]) for s in ex.subjects))
    assert len(plain) == len(impls)  # the control: compiled plainly, every one has its own fingerprint


def test_the_facade_calls_the_real_code():
    ex = CURRICULUM.exercise("test-split-square")
    [right] = seal(ex.reference_code, ["split_heads"], Guard())
    [skip] = seal(next(m.code for m in ex.mutants if m.id == "skip-transpose"), ["split_heads"], Guard())
    x = torch.arange(2 * 3 * 8.0).view(2, 3, 8)  # (B, T, D)
    assert right(x, 4).stride() == (24, 2, 8, 1) and right(x, heads=4).shape == (2, 4, 3, 2)
    assert skip(x, 4).stride() == (24, 6, 2, 1)
    with pytest.raises(RuntimeError, match="shape '\\[2, 3, 3, 2\\]' is invalid") as caught:
        right(torch.zeros(2, 3, 8), 3)
    frames = []
    tb = caught.value.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    assert "split_heads" in frames and frames[-1] == "_enter"  # nothing below the facade's own entry


def test_normalised_source_has_no_comments_or_docstrings():
    code = 'import torch\n\n\ndef f(x):\n    """Doc."""\n    return x + 1  # why\n'
    assert normalise(code) == "import torch\n\ndef f(x):\n    return x + 1\n"


def test_arguments_must_be_plain():
    ex = CURRICULUM.exercise("test-split-square")
    [split] = seal(ex.reference_code, ["split_heads"], Guard())

    class Spy(torch.Tensor):
        pass

    with pytest.raises(TypeError, match="not Spy"):
        split(torch.zeros(2, 3, 8).as_subclass(Spy), 4)
    tagged = torch.zeros(2, 3, 8)
    tagged.view = lambda *a: None
    with pytest.raises(TypeError, match="this one has attributes set"):
        split(tagged, 4)


HARNESS = r'''
import json, runpy, sys
from shapetrace.exercises.content import load
from shapetrace.exercises.sealed import Guard, seal
ex = load().exercise("test-split-square")
impls = [("reference", ex.reference_code)] + [(m.id, m.code) for m in ex.mutants]
guard = Guard()  # before the learner's file runs, as in the child
check = runpy.run_path(sys.argv[1])["check"]
out = {}
for how in ("sealed", "plain"):  # sealed first: nothing plain is alive yet, as in the child
    raised = []
    for name, code in impls:
        if how == "plain":
            ns = {"__name__": "implementation"}
            exec(compile(code, "<implementation under test>", "exec"), ns)
            fns = [ns["split_heads"]]
        else:
            fns = seal(code, ["split_heads"], guard)
        try:
            check(*fns)
            raised.append(False)
        except Exception:
            raised.append(True)
    out[how] = raised
print(json.dumps(out))
'''


@pytest.mark.parametrize("attack", [p.name for p in ATTACKS])
def test_each_fingerprinting_attack_worked_before_and_fails_sealed(attack):
    done = subprocess.run([sys.executable, "-c", HARNESS, str(Path(__file__).parent / "hostile" / attack)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    raised = json.loads(done.stdout.splitlines()[-1])
    n = len(raised["plain"])
    assert raised["plain"] == [False] + [True] * (n - 1)  # plain: passes the reference, fails every mutant
    assert raised["sealed"] in ([True] * n, [False] * n)  # sealed: the same answer for all of them
    assert raised["sealed"] == [True] * n  # (and every one of these attacks ends up rejecting the reference)


def test_there_are_nine_fingerprinting_attacks():
    assert len(ATTACKS) == 9


REMAINING = Path(__file__).parent / "hostile" / "remaining" / "ctypes_trace_real_function.py"


def test_what_remains_raw_memory_leads_to_the_real_code_and_its_ops_give_it_away():
    """A measurement of the hole the salt leaves, not a wish: through ctypes the test reaches the real
    function and compares the torch ops it runs with the reference's; sealed and salted, it still tells
    every broken version from the reference. When the implementation moves to a process of its own this
    test must flip (and the README's paragraph with it)."""
    done = subprocess.run([sys.executable, "-c", HARNESS, str(REMAINING)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    raised = json.loads(done.stdout.splitlines()[-1])
    n = len(raised["plain"])
    assert raised["plain"] == raised["sealed"] == [False] + [True] * (n - 1)


def test_what_remains_in_the_full_sandbox_too():
    """The same measurement through the real checker: every layer on, the verdict is a pass."""
    from shapetrace.exercises.checker import Job, check_job

    v = check_job(Job("test-split-square", str(REMAINING)), CURRICULUM.root, time_limit=5, memory_mb=512)
    assert v["verdict"] == "pass" and "catches all 4 broken versions" in v["summary"], v


def _fingerprint(fn) -> tuple:
    co = fn.__code__
    return co.co_code, co.co_consts, co.co_names, co.co_varnames


@pytest.mark.parametrize("exercise", [e.id for e in TESTS])
def test_salt_makes_every_seal_look_new_and_every_implementation_use_the_same_names(exercise):
    import random

    from shapetrace.exercises.sealed import FILENAME, decoy_names, salted

    ex = CURRICULUM.exercise(exercise)
    impls = [ex.reference_code] + [m.code for m in ex.mutants]
    decoys = decoy_names(impls)
    names, looks = set(), []
    for code in impls:
        for seed in range(4):
            namespace: dict = {}
            exec(compile(salted(code, random.Random(seed), decoys), FILENAME, "exec"), namespace)
            fns = [namespace[s] for s in ex.subjects]
            names.add(tuple(frozenset(f.__code__.co_names) for f in fns))
            looks.append(tuple(_fingerprint(f) for f in fns))
    assert len(names) == 1  # the names any function uses: the same set for every implementation
    assert len(set(looks)) == len(looks)  # no two seals alike, of one implementation or of two
    plain: dict = {}
    exec(compile(normalise(ex.reference_code), FILENAME, "exec"), plain)
    assert tuple(_fingerprint(plain[s]) for s in ex.subjects) not in looks  # nothing computed beforehand


def test_salted_code_does_what_the_original_does():
    """Every implementation of the tensor-only exercises, salted, returns the same values, shapes and strides
    (and raises the same errors) as compiled plainly."""
    import random

    from shapetrace.exercises.sealed import decoy_names, salted

    x = torch.randn(2, 6, 12)  # (B, T, D)
    calls = {"test-split-square": [(x, 4), (x, 3), (x, 5)],
             "test-round-trip": [(x, 4)],
             "test-repeat-kv": [(torch.randn(2, 3, 5, 4), 2)],
             "test-append-kv": [(torch.randn(2, 3, 5, 4), torch.randn(2, 3, 1, 4))],
             "test-fused-attention": [(torch.randn(2, 5, 3, 4), torch.randn(2, 5, 3, 4), torch.randn(2, 5, 3, 4))],
             "test-causal-mask": [(torch.randn(2, 3, 5, 5),)],
             "test-patchify": [(torch.randn(2, 3, 8, 8), 4)]}
    for exercise, inputs in calls.items():
        ex = CURRICULUM.exercise(exercise)
        impls = [ex.reference_code] + [m.code for m in ex.mutants]
        decoys = decoy_names(impls)
        for code in impls:
            plain: dict = {}
            exec(compile(code, "<p>", "exec"), plain)
            salty: dict = {}
            exec(compile(salted(code, random.Random(7), decoys), "<s>", "exec"), salty)
            subject = ex.subjects[0]
            for args in inputs:
                assert _outcome(plain[subject], args) == _outcome(salty[subject], args), (exercise, code)


def _outcome(fn, args):
    try:
        out = fn(*args)
    except Exception as exc:  # the same error, word for word
        return type(exc).__name__, str(exc)
    return tuple(out.shape), out.stride(), out.storage_offset(), out.flatten().nan_to_num(nan=-7.0).tolist()


def test_salt_keeps_scoping_right():
    """Parameters (a call by keyword), class attributes, ``import a.b``, ``except ... as``, comprehensions,
    lambdas, closures and match captures keep working when the locals get random names."""
    import random

    from shapetrace.exercises.sealed import salted

    code = ("def f(x, y=2, *a, k=3, **kw):\n    class A:\n        z = 1\n    try:\n        r = int(x) + A.z\n"
            "    except ValueError as e:\n        e = str(e)\n        return e\n    g = lambda y: y + r\n"
            "    import os.path\n    out = [t * 2 for t in range(x)]\n    match x:\n        case 1:\n"
            "            pass\n        case q:\n            out.append(q)\n    def h(n):\n        return n + r\n"
            "    return g(1), h(2), out, y, k, len(a), kw, os.path.sep\n")
    plain: dict = {}
    exec(code, plain)
    for seed in range(5):
        salty: dict = {}
        exec(salted(code, random.Random(seed), ["view", "torch.nn.functional"]), salty)
        assert salty["f"](3, k=5, w=1) == plain["f"](3, k=5, w=1) == (5, 6, [0, 2, 4, 3], 2, 5, 0, {"w": 1}, "/")
        assert salty["f"]("s") == plain["f"]("s") == "invalid literal for int() with base 10: 's'"  # except
