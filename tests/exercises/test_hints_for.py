"""Every exercise says, per hint, which verdicts or known mistakes the hint is about (``hints_for``), so
``exercise hint`` shows the hint about the fault the learner's file has now (issue 23, item 8).

Plain data only: no sandbox, no checker run. The verdict names come from the checker's code."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import tomllib

import shapetrace.exercises as exercises_pkg
from shapetrace.app.hints import choose, hints_for
from shapetrace.cli.lessons import load_curriculum
from shapetrace.exercises.content import VERDICTS, hints_for_of

EXERCISES = load_curriculum().exercises
ABOUT_NOW = "about what your file gives now"


def _verdicts_in_the_checker_code() -> set[str]:
    """Every verdict name the checker's modules pass to ``verdict(...)`` or ``_mismatch(...)``."""
    names = set()
    for source in Path(exercises_pkg.__file__).parent.glob("*.py"):
        text = source.read_text()
        names |= set(re.findall(r'(?:\.verdict|_mismatch)\(\s*"([a-z-]+)"', text))
        names |= set(re.findall(r'\bverdict="([a-z-]+)"', text))   # a verdict rewritten: dict(v, verdict=...)
    return names


#: what the checker can say about a learner's file that is not a pass (not "gave-up": that is a progress state)
FAILING = _verdicts_in_the_checker_code() - {"pass"}


def _raw_hints_for(ex) -> list:
    with (ex.folder / "exercise.toml").open("rb") as fh:
        return tomllib.load(fh).get("hints_for")


def test_the_verdict_list_holds_every_verdict_the_checker_code_gives():
    given = _verdicts_in_the_checker_code()
    assert {"crash", "wrong-shape", "wrong-values", "layout", "misses-mutants", "rejects-reference"} <= given
    assert given <= set(VERDICTS), given - set(VERDICTS)
    assert "unverified" in given and "gave-up" not in given


def test_every_exercise_is_covered():
    assert len(EXERCISES) == 37


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_hints_for_has_one_list_per_hint(ex):
    listed = _raw_hints_for(ex)
    assert listed is not None, f"{ex.id}: no hints_for"
    assert len(listed) == len(ex.hints), ex.id
    assert all(isinstance(entry, list) and all(isinstance(f, str) for f in entry) for entry in listed), listed
    assert all(len(set(entry)) == len(entry) for entry in listed), listed


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_hints_for_names_only_failing_verdicts_or_mistakes_of_the_exercise(ex):
    known = FAILING | {m.id for m in ex.mistakes}
    unknown = {f for entry in _raw_hints_for(ex) for f in entry} - known
    assert not unknown, f"{ex.id}: {sorted(unknown)} is neither a verdict nor a mistake of this exercise"


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_every_known_mistake_has_a_hint(ex):
    named = {f for entry in hints_for(ex) for f in entry}
    assert {m.id for m in ex.mistakes} <= named, {m.id for m in ex.mistakes} - named


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_the_starter_fault_gets_a_hint_about_it(ex):
    starter = {"verdict": ex.starter_verdict, "mistake": ex.starter_mistake}
    choice = choose(ex, 1, starter)
    assert choice.why.startswith(f"hint {choice.number} of {len(ex.hints)}, {ABOUT_NOW} ({ex.starter_verdict})"), \
        choice.why


@pytest.mark.parametrize("ex_id, verdict, mistake, numbers", [
    # the starter transposes and then views: the hint about putting the transpose back is skipped
    ("merge-contiguous", "crash", "view-after-transpose", [1, 3, 3]),
    ("merge-contiguous", "wrong-values", "no-transpose", [2, 3, 3]),
    ("heads-to-batch", "layout", None, [1, 2, 3]),
    ("heads-to-batch", "wrong-values", "transpose-first", [2, 3, 3]),
    ("heads-for-kernel", "layout", "not-contiguous", [1, 2, 3]),
    ("causal-mask", "mutated-input", None, [1, 2, 3]),
    ("causal-mask", "wrong-values", "past-masked", [3, 3, 3]),
    ("einops-merge", "wrong-shape", "heads-before-tokens", [1, 3, 3]),
    ("head-dim", "wrong-values", "assert", [3, 3, 3]),
    ("rope-complex-pairs", "crash", "odd-strides", [2, 3, 3]),
    ("sdpa-layout", "wrong-shape", "no-transpose-back", [3, 3, 3]),
    ("sdpa-bool-mask", "wrong-values", "float-mask", [2, 3, 3]),
    ("test-split-square", "misses-mutants", None, [1, 2, 3]),
    ("test-split-square", "rejects-reference", None, [2, 3, 3]),
    ("test-fused-attention", "crash", None, [3, 3, 3]),
])
def test_the_hints_shown_follow_the_fault(ex_id, verdict, mistake, numbers):
    ex = load_curriculum().exercise(ex_id)
    shown = [choose(ex, level, {"verdict": verdict, "mistake": mistake}) for level in (1, 2, 3)]
    assert [c.number for c in shown] == numbers
    assert all(ABOUT_NOW in c.why for c in shown)


def test_the_reason_names_the_hints_skipped():
    ex = load_curriculum().exercise("merge-contiguous")
    assert choose(ex, 1, {"verdict": "crash", "mistake": "view-after-transpose"}).why == (
        "hint 1 of 3, about what your file gives now (crash); hint 2 is skipped: about a fault your file does "
        "not have")


def test_a_fault_no_hint_is_about_falls_back_to_order():
    ex = load_curriculum().exercise("causal-mask")
    assert choose(ex, 2, {"verdict": "timeout"}).why == (
        "hint 2 of 3, in order: no hint is about what your file gives now (timeout)")


def test_a_later_hint_does_not_repeat_what_the_starter_already_does():
    """merge-contiguous's starter already transposes: the hint it is shown after hint 1 says what to add."""
    ex = load_curriculum().exercise("merge-contiguous")
    second = choose(ex, 2, {"verdict": "crash", "mistake": "view-after-transpose"})
    assert ex.hints[second.number - 1].startswith("Copy into [B, T, H, d_k] order between the transpose and the view")
    assert "transpose" in ex.starter.read_text() and ".contiguous()" not in ex.starter.read_text()


def test_an_exercise_without_hints_for_makes_no_claim(tmp_path):
    toml = 'hints = ["a?", "b", "c()"]\n'
    plain = SimpleNamespace(folder=tmp_path, hints=("a?", "b", "c()"),
                            hints_for=hints_for_of(tomllib.loads(toml), 3))   # as the loader reads it
    assert hints_for(plain) == ((), (), ())
    assert choose(plain, 2, {"verdict": "mutated-input"}).why == (
        "hint 2 of 3, in order; your file gives mutated-input now")
