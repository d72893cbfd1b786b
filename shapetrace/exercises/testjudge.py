"""Judge a learner's *test*: it must pass the reference and fail every broken version (mutant).

Runs in the parent. The child calls the learner's test once per implementation (the code it receives
carries no name; the children start in an order drawn at random, :func:`.checker.start_order`), and sends
back only whether the test raised, and what. The verdict names each broken version the test let
through, what that version does, and why a test like this one misses it, without writing the test.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from shapetrace.exercises.content import Exercise
from shapetrace.exercises.judge import Judge, Learned, Verdict

REFERENCE = "reference"
#: Exceptions that say the test itself is broken (a typo, a wrong call), not that it caught something.
UNRELATED = ("NameError", "AttributeError", "ImportError", "TypeError", "SyntaxError", "RecursionError")
MESSAGE_LIMIT = 300


@dataclass(frozen=True)
class Implementation:
    """One implementation the learner's test runs against: the reference or a mutant."""

    id: str
    code: str

    case = ""  # a verdict about a test names no input sizes: the test builds its own inputs

    def describe(self) -> str:
        return "the reference implementation" if self.id == REFERENCE else f"the broken version {self.id}"


def head(got: Learned) -> str:
    """``Type: message`` of what the test raised, on one line and capped."""
    text = got.head.splitlines()[0] if got.head else ""
    return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT - 3] + "..."


def unrelated(got: Learned) -> bool:
    return any(got.is_a(name) for name in UNRELATED)


class TestJudge(Judge):
    """Decides the verdict of one learner test from what it did on each implementation."""

    __test__ = False  # not a pytest class

    def __init__(self, exercise: Exercise, path: str, seed: int, source: str = ""):
        self.ex, self.path, self.source, self.printed = exercise, path, source, None
        impls = [Implementation(REFERENCE, exercise.reference_code)]
        impls += [Implementation(m.id, m.code) for m in exercise.mutants]
        random.Random(seed).shuffle(impls)
        self.cases = impls

    def decide(self, results: dict[int, Learned], limit: float) -> Verdict:
        """The verdict from each implementation's result. The reference's comes first: a test that times
        out on it, or raises on it, has that verdict whatever it did elsewhere (and the broken versions
        need not have run); then a timeout on any broken version; then what the test caught."""
        by_id = {impl.id: results[i] for i, impl in enumerate(self.cases) if i in results}
        ref = by_id[REFERENCE]
        if ref.timed_out:
            return self._timed_out(ref, limit)
        if ref.raised:
            return self._rejects(ref)
        for got in by_id.values():
            if got.timed_out:
                return self._timed_out(got, limit)
        caught = [m for m in self.ex.mutants if by_id[m.id].raised and not unrelated(by_id[m.id])]
        missed = [m for m in self.ex.mutants if m not in caught]
        if not missed:
            return self.verdict("pass", f"{self.ex.id}: your test passes the reference and catches all "
                                f"{len(caught)} broken versions ({', '.join(m.id for m in caught)})",
                                **ref.common())
        return self._misses(caught, missed, by_id, ref)

    def _timed_out(self, got: Learned, limit: float) -> Verdict:
        line, code = got.frame
        return self.timeout(line, code, got.common(), limit)

    def _rejects(self, ref: Learned) -> Verdict:
        line, code = ref.frame
        ctx = dict(line=line, code=code, **ref.common())
        if unrelated(ref):
            return self.verdict("crash", f"your test crashed on the reference implementation with {head(ref)}: "
                                "that is a bug in the test itself, not a check that failed", **ctx)
        return self.verdict("rejects-reference", "your test fails the reference implementation, which is correct: "
                            f"on the inputs your test builds, it raised {head(ref)}",
                            explanation=["a test must pass every correct implementation; compare what your "
                                         "test expects with what the lesson says the output holds"], **ctx)

    def _misses(self, caught, missed, by_id: dict[str, Learned], ref: Learned) -> Verdict:
        total = len(self.ex.mutants)
        if not caught:
            summary = (f"your test catches none of the {total} broken versions: it passes every one of them, "
                       "so it checks nothing that tells a broken implementation from the reference")
        else:
            summary = (f"your test misses {len(missed)} of the {total} broken versions: "
                       f"{', '.join(m.id for m in missed)}")
        lines = []
        for m in missed:
            lines.append(f"{m.id}: your test passes {m.does}: {m.missed}")
            if by_id[m.id].raised:
                lines.append(f"  (your test did raise on it, but {head(by_id[m.id])} is a bug in the test, "
                             "not a check)")
        if caught:
            lines.append(f"caught: {', '.join(m.id for m in caught)}")
        returned = next((str(by_id[m.id].facts.get("returned")) for m in missed if by_id[m.id].facts.get("returned")),
                        "")
        if returned:
            lines.append(f"your test returned a value ({returned[:40]}) instead of raising: the checker counts a "
                         "check as failed only when your test raises, and ignores what it returns")
        return self.verdict("misses-mutants", summary, explanation=lines, **ref.common())
