"""Exercises where the learner writes the test: it must pass the reference and fail every mutant.

Each learner test runs in the checker's locked-down child against the reference and the broken
versions (sent as code, in a shuffled order); the parent decides from what came back (raised or not,
and what). The wording of every verdict is asserted exactly.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from shapetrace.exercises.checker import Job, check_files
from shapetrace.exercises.content import ContentError, load, load_exercise

CURRICULUM = load()
TESTS = [e for e in CURRICULUM.exercises if e.kind == "test"]
IDS = ["test-split-square", "test-round-trip", "test-causal-mask", "test-repeat-kv", "test-append-kv", "test-patchify",
       "test-apply-rope", "test-fused-attention", "test-head-backward"]
CHECKS_NOTHING = ("your test catches none of the {n} broken versions: it passes every one of them, so it "
                  "checks nothing that tells a broken implementation from the reference")

#: A test that fails the correct implementation, per exercise: (code, line, the exception's head).
FAILS_REFERENCE = {
    "test-split-square": ("x = torch.randn(2, 5, 12)\n"
                          "assert split_heads(x, 3).shape == (2, 5, 3, 4), 'expected [B, T, H, d_k]'",
                          "AssertionError: expected [B, T, H, d_k]"),
    "test-round-trip": ("x = torch.randn(2, 5, 12)\n"
                        "assert combine_heads(split_heads(x, 3)).shape == (2, 3, 5, 4), 'merge kept the heads'",
                        "AssertionError: merge kept the heads"),
    "test-causal-mask": ("w = causal_weights(torch.randn(1, 1, 4, 4))\n"
                         "assert (w[..., 0, 0] == 0).all(), 'query 0 attends to itself'",
                         "AssertionError: query 0 attends to itself"),
    "test-repeat-kv": ("out = repeat_kv(torch.randn(1, 2, 3, 4), 2)\n"
                       "assert out.shape == (1, 2, 6, 4), f'repeat gave {tuple(out.shape)}'",
                       "AssertionError: repeat gave (1, 4, 3, 4)"),
    "test-append-kv": ("out = append_kv(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 1, 4))\n"
                       "assert out.shape == (1, 2, 3, 4), f'cache is {tuple(out.shape)}'",
                       "AssertionError: cache is (1, 2, 4, 4)"),
    "test-patchify": ("out = patchify(torch.randn(1, 3, 4, 6), 2)\n"
                      "assert out.shape == (1, 12, 6), f'patches are {tuple(out.shape)}'",
                      "AssertionError: patches are (1, 6, 12)"),
    "test-apply-rope": ("out = apply_rope(torch.ones(1, 1, 1, 2), torch.zeros(1, 2), torch.ones(1, 2))\n"
                        "assert torch.equal(out, torch.ones(1, 1, 1, 2)), f'turned to {out.flatten().tolist()}'",
                        "AssertionError: turned to [-1.0, 1.0]"),
    "test-fused-attention": ("q = torch.randn(1, 4, 2, 3)\n"
                             "assert fused_attention(q, q, q).shape == (1, 2, 4, 3), 'expected SDPA layout'",
                             "AssertionError: expected SDPA layout"),
    "test-head-backward": ("dq, dk, dv = head_backward(*(torch.randn(n, 2) for n in (3, 4, 4, 3)))\n"
                           "assert dk.shape == (3, 2), f'dk is {tuple(dk.shape)}'",
                           "AssertionError: dk is (4, 2)"),
}


def _source(ex, body: str) -> str:
    args = ", ".join(ex.subjects)
    return f"import torch\n\n\ndef check({args}):\n" + textwrap.indent(body, "    ") + "\n"


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory, curriculum_verdicts):
    """Every learner test of this module, checked in locked-down children (two at a time); the solutions'
    and starters' verdicts are the session's (tests/exercises/conftest.py)."""
    tmp = tmp_path_factory.mktemp("learner_tests")
    files = {}
    for ex in TESTS:
        for name, body in (("nothing", "pass"), ("name-error", "assert torch.equal(x, x)"),
                           ("fails-reference", FAILS_REFERENCE[ex.id][0])):
            path = tmp / f"{ex.id}__{name}.py"
            path.write_text(_source(ex, body))
            files[(ex.id, name)] = str(path)
    rt = CURRICULUM.exercise("test-round-trip")
    for name, body in (("returns-bool", "x = torch.randn(2, 5, 12)\n"
                                        "return torch.equal(combine_heads(split_heads(x, 3)), x)"),
                       ("crash-on-mutant", "x = torch.randn(2, 5, 12)\ny = split_heads(x, 3)\n"
                                           "if y.shape[1] != 3:\n    undefined_name\n"
                                           "assert torch.equal(combine_heads(y), x)")):
        path = tmp / f"round-trip__{name}.py"
        path.write_text(_source(rt, body))
        files[(rt.id, name)] = str(path)
    jobs = [Job(key[0], path) for key, path in files.items()]
    shared = {(ex.id, kind): curriculum_verdicts[(ex.id, kind)] for ex in TESTS for kind in ("solution", "starter")}
    return shared | dict(zip(files, check_files(jobs, CURRICULUM.root, time_limit=20, seed=11)))


def test_nine_test_exercises_across_the_lessons():
    assert [e.id for e in TESTS] == IDS
    assert len({e.lesson for e in TESTS}) == 9
    for ex in TESTS:
        assert ex.starter_verdict == "misses-mutants" and len(ex.mutants) >= 4
        assert ex.function == "check" and ex.subjects


@pytest.mark.parametrize("ex", TESTS, ids=lambda e: e.id)
def test_the_solution_passes_the_reference_and_kills_every_mutant(ex, verdicts):
    v = verdicts[(ex.id, "solution")]
    assert v["verdict"] == "pass", v
    ids = ", ".join(m.id for m in ex.mutants)
    assert v["summary"] == (f"{ex.id}: your test passes the reference and catches all {len(ex.mutants)} "
                            f"broken versions ({ids})")


@pytest.mark.parametrize("ex", TESTS, ids=lambda e: e.id)
def test_a_test_that_checks_nothing_kills_no_mutant_and_is_told_so(ex, verdicts):
    v = verdicts[(ex.id, "nothing")]
    assert v["verdict"] == "misses-mutants"
    assert v["summary"] == CHECKS_NOTHING.format(n=len(ex.mutants))
    assert v["explanation"] == [f"{m.id}: your test passes {m.does}: {m.missed}" for m in ex.mutants]


@pytest.mark.parametrize("ex", TESTS, ids=lambda e: e.id)
def test_a_test_that_fails_the_reference_is_told_what_it_raised(ex, verdicts):
    v = verdicts[(ex.id, "fails-reference")]
    assert v["verdict"] == "rejects-reference"
    assert v["summary"] == ("your test fails the reference implementation, which is correct: on the inputs "
                            f"your test builds, it raised {FAILS_REFERENCE[ex.id][1]}")
    assert v["line"] == 6 and v["code"].startswith("assert "), v


@pytest.mark.parametrize("ex", TESTS, ids=lambda e: e.id)
def test_a_test_that_crashes_for_an_unrelated_reason_is_a_crash(ex, verdicts):
    v = verdicts[(ex.id, "name-error")]
    assert v["verdict"] == "crash"
    assert v["summary"] == ("your test crashed on the reference implementation with NameError: name 'x' is "
                            "not defined: that is a bug in the test itself, not a check that failed")
    assert v["line"] == 5 and v["code"] == "assert torch.equal(x, x)"


def test_round_trip_only_misses_the_consistent_wrong_pairs(verdicts):
    v = verdicts[("test-round-trip", "starter")]
    assert v["verdict"] == "misses-mutants" and v["mistake"] is None
    assert v["summary"] == ("your test misses 3 of the 5 broken versions: skip-transpose, interleaved-heads, "
                            "transpose-h-dk")
    assert v["explanation"][0] == (
        "skip-transpose: your test passes the split that views [B, T, D] straight as [B, H, T, d_k] and forgets "
        "the transpose, with the merge that views [B, H, T, d_k] straight back as [B, T, D]: split and merge "
        "are both wrong in the same way, so the round trip hides it; check which token's features land in "
        "head 0")
    assert v["explanation"][-1] == "caught: merge-without-transpose, reshape-not-transpose"


@pytest.mark.parametrize("ex_id,summary", [
    ("test-split-square", CHECKS_NOTHING.format(n=4)),
    ("test-causal-mask", "your test misses 3 of the 4 broken versions: tril-for-triu, off-by-one, no-mask"),
    ("test-repeat-kv", "your test misses 3 of the 4 broken versions: repeat-tiles, expand-wrong-axis, "
                       "first-head-only"),
    ("test-append-kv", "your test misses 4 of the 5 broken versions: cache-wrong-axis, cache-new-first, "
                       "cache-stale-step, cache-first-head-step"),
    ("test-patchify", "your test misses 4 of the 5 broken versions: patches-without-permute, patches-column-major, "
                      "patch-pixels-transposed, patches-channel-last"),
    ("test-apply-rope", CHECKS_NOTHING.format(n=4)),
    ("test-fused-attention", "your test misses 4 of the 5 broken versions: sdpa-wrong-layout, "
                             "sdpa-view-not-transpose, sdpa-is-causal, sdpa-wrong-scale"),
    # the shapes-only starter catches the one mutant that raises at T ≠ T_k (dS · q), and no other
    ("test-head-backward", "your test misses 3 of the 4 broken versions: softmax-grad-no-row-term, "
                           "softmax-grad-no-scale, grad-dv-from-scores"),
])
def test_each_starter_checks_too_little(ex_id, summary, verdicts):
    v = verdicts[(ex_id, "starter")]
    assert v["verdict"] == "misses-mutants" and v["summary"] == summary, v


def test_a_test_that_returns_false_instead_of_raising_is_told(verdicts):
    v = verdicts[("test-round-trip", "returns-bool")]
    assert v["verdict"] == "misses-mutants"
    assert v["explanation"][-1] == ("your test returned a value (bool) instead of raising: the checker counts "
                                    "a check as failed only when your test raises, and ignores what it returns")


def test_a_crash_on_a_mutant_is_not_a_catch(verdicts):
    v = verdicts[("test-round-trip", "crash-on-mutant")]
    assert v["verdict"] == "misses-mutants"
    assert v["summary"] == ("your test misses 3 of the 5 broken versions: skip-transpose, interleaved-heads, "
                            "transpose-h-dk")
    assert v["explanation"][2].startswith("transpose-h-dk: your test passes")
    assert v["explanation"][3] == ("  (your test did raise on it, but NameError: name 'undefined_name' is not "
                                   "defined is a bug in the test, not a check)")


def test_the_child_receives_the_implementations_unnamed_and_shuffled():
    from shapetrace.exercises.testjudge import REFERENCE, TestJudge

    ex = CURRICULUM.exercise("test-round-trip")
    orders = {tuple(i.id for i in TestJudge(ex, "f.py", seed).cases) for seed in range(20)}
    assert len(orders) > 5 and any(order[0] != REFERENCE for order in orders)
    assert all("reference" not in impl.code and "mutant" not in impl.code for impl in TestJudge(ex, "f.py", 0).cases)



def _learned(raised: str | None = None, timed_out: bool = False):
    from shapetrace.exercises.judge import Learned

    exc = {"type": raised or "CheckTimeout", "message": "m", "mro": [raised or "CheckTimeout"],
           "timed_out": timed_out} if raised or timed_out else None
    return Learned(facts={"exc": exc, "frame": [6, "assert False"]} if exc else {})


def test_the_reference_outcome_ranks_before_a_broken_versions_timeout():
    """The reference's child starts first and settles a test that does not pass it; a broken version that
    timed out beside it (two children run at once) must not change that verdict."""
    from shapetrace.exercises.testjudge import REFERENCE, TestJudge

    judge = TestJudge(CURRICULUM.exercise("test-split-square"), "f.py", 3)
    ref = next(i for i, impl in enumerate(judge.cases) if impl.id == REFERENCE)
    other = next(i for i in range(len(judge.cases)) if i != ref)
    rejected = judge.decide({ref: _learned("AssertionError"), other: _learned(timed_out=True)}, 2.0)
    assert rejected.verdict == "rejects-reference"
    alone = judge.decide({ref: _learned("AssertionError")}, 2.0)
    assert alone.to_dict() == rejected.to_dict()
    timed_out = judge.decide({i: _learned(timed_out=i == other) for i in range(len(judge.cases))}, 2.0)
    assert timed_out.verdict == "timeout"
    assert judge.decide({ref: _learned(timed_out=True)}, 2.0).verdict == "timeout"


def test_a_test_that_rejects_the_reference_still_runs_every_implementation(verdicts, monkeypatch, tmp_path):
    """Every implementation's child runs, and the verdict is settled when all have finished (issue 34: a
    run that stopped once the reference's child, started first, had failed made the order mean something);
    the verdict is still the reference's."""
    from shapetrace.exercises import sandbox

    ex = CURRICULUM.exercise("test-round-trip")
    started = []
    real = sandbox.run_child

    def counting(*args, **kwargs):
        started.append(json.loads(args[5])["code"])   # the secret: which implementation
        return real(*args, **kwargs)

    monkeypatch.setattr(sandbox, "run_child", counting)
    path = tmp_path / "rejects.py"
    path.write_text(_source(ex, FAILS_REFERENCE[ex.id][0]))
    [v] = check_files([Job(ex.id, str(path))], CURRICULUM.root, time_limit=20, seed=5)
    want = verdicts[(ex.id, "fails-reference")]
    assert (v["verdict"], v["summary"], v["line"]) == (want["verdict"], want["summary"], want["line"])
    assert sorted(started) == sorted([ex.reference_code, *(m.code for m in ex.mutants)])


def test_the_start_order_is_drawn_at_random_with_no_place_for_the_reference():
    """Each of 6 implementations starts first about as often as any other (1,200 draws: 200 expected
    each; a fair draw stays within 130..270 with probability above 1 - 1e-6), whatever the seed."""
    from collections import Counter

    from shapetrace.exercises.checker import start_order

    firsts = Counter(start_order(6)[0] for _ in range(1200))
    assert sorted(firsts) == list(range(6))
    assert all(130 <= n <= 270 for n in firsts.values()), firsts
    assert all(sorted(start_order(6)) == list(range(6)) for _ in range(20))


def test_the_verdict_renders_every_surviving_mutant():
    from conftest import render

    from shapetrace.render.exercise import verdict_view

    v = {"exercise": "test-round-trip", "verdict": "misses-mutants", "summary": CHECKS_NOTHING.format(n=5),
         "explanation": ["skip-transpose: your test passes the split that forgets the transpose"]}
    text = render(verdict_view(v, "test-round-trip.py"), width=80)
    assert "✗ misses-mutants  test-round-trip" in text and "skip-transpose: your test passes" in text
    assert "sizes" not in text


def test_content_refuses_a_test_exercise_without_mutants(tmp_path):
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "exercise.toml").write_text('id = "t"\ntitle = "T"\nkind = "test"\nfunction = "check"\n'
                                          'subjects = ["f"]\ntask = "x"\nstarter_verdict = "misses-mutants"\n'
                                          'hints = ["a?", "b("]\nreference = "def f(): pass"\n')
    with pytest.raises(ContentError, match="'mutants' must be a non-empty list"):
        load_exercise(folder, 1)


def test_every_mutant_comes_from_the_bug_catalogue():
    """One home: a mutant is a catalogue id; its code is the catalogue's broken functions, with the
    reference's version of each subject the entry leaves alone, each function at its fixed line."""
    from shapetrace.attention.catalogue import CATALOGUE
    from shapetrace.exercises.content import LINES_PER_FUNCTION

    for ex in TESTS:
        for m in ex.mutants:
            entry = CATALOGUE[m.id]
            broken = [entry.function(s) for s in ex.subjects if entry.function(s) is not None]
            assert broken, (ex.id, m.id)
            assert all(f.code in m.code for f in broken) and m.does.startswith(broken[0].does)
            namespace: dict = {}
            exec(compile(m.code, "<m>", "exec"), namespace)
            for k, subject in enumerate(ex.subjects):
                assert namespace[subject].__code__.co_firstlineno == 1 + (k + 1) * LINES_PER_FUNCTION
        namespace = {}
        exec(compile(ex.reference_code, "<r>", "exec"), namespace)
        assert [namespace[s].__code__.co_firstlineno for s in ex.subjects] == [
            1 + (k + 1) * LINES_PER_FUNCTION for k in range(len(ex.subjects))]
    rt = {m.id: m.does for m in CURRICULUM.exercise("test-round-trip").mutants}
    assert rt["merge-without-transpose"] == ("the merge that reshapes [B, H, T, d_k] straight to [B, T, D], "
                                             "with the correct split_heads")


@pytest.mark.parametrize("mutant,message", [
    ('id = "wrong-transpose"\nmissed = "m"\ncode = "def f(): pass"',
     "mutant 'wrong-transpose' may only have 'id' and 'missed': what it does and its code come from the bug "
     "catalogue"),
    ('id = "no-such-bug"\nmissed = "m"', "mutant 'no-such-bug' is not in the bug catalogue"),
    ('id = "tril-for-triu"\nmissed = "m"', "mutant 'tril-for-triu' breaks none of split_heads"),
])
def test_content_refuses_a_mutant_that_is_not_a_catalogue_entry(tmp_path, mutant, message):
    import re

    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "exercise.toml").write_text(
        'id = "t"\ntitle = "T"\nkind = "test"\nfunction = "check"\nsubjects = ["split_heads"]\ntask = "x"\n'
        'starter_verdict = "misses-mutants"\nhints = ["a?"]\n'
        'reference = "def split_heads(x, heads):\\n    return x"\n[[mutants]]\n' + mutant + "\n")
    with pytest.raises(ContentError, match=re.escape(message)):
        load_exercise(folder, 1)


def test_a_test_that_times_out_runs_once_per_implementation_and_is_a_timeout(tmp_path):
    """A learner's test that spins: each implementation's child stops at its first timed-out run (its
    result is that timeout, checker._settled), so it sends one run, not TEST_RUNS; the verdict is the
    timeout at the spinning line. Before, each child ran all 3 runs to their limits (the hostile corpus's
    watch_frames_from_a_thread.py: 32 s and 39 CPU-s of one check)."""
    from shapetrace.exercises import checker
    from shapetrace.exercises.testjudge import TestJudge

    ex = CURRICULUM.exercise("test-split-square")
    source = "def check(split_heads):\n    while True: pass\n"
    path = tmp_path / "spins.py"
    path.write_text(source)
    judge = TestJudge(ex, str(path), 5, source)
    runs = checker.run_implementations(judge, ex, Job(ex.id, str(path)), source, 1.0, 1024, 80)
    assert sorted(runs) == list(range(len(ex.mutants) + 1))
    for run in runs.values():
        cases = [f for f in run.frames if f.header.get("kind") == "case"]
        assert [f.header["case"] for f in cases] == [0], [f.header for f in run.frames]
        assert (run.killed_for, run.returncode) == ("", 0), run  # the child ended itself, not the deadline
        _, got = checker._test_results(run)
        assert [g.timed_out for g in got] == [True]
    verdict = checker._decide_test(judge, runs, 1.0).to_dict()
    assert verdict["verdict"] == "timeout", verdict
    assert (verdict["line"], verdict["code"]) == (2, "while True: pass"), verdict
