"""Which hint to show: one that is about the fault the learner's file has now.

Each exercise's ``exercise.toml`` may say, per hint, which verdicts or mistakes it is about::

    hints_for = [["view-straight"], ["view-straight", "dk-major-split"], ["wrong-shape"]]

(one list per hint, in order; an empty list, or no ``hints_for`` at all: the hint is about any fault).
A mistake id names a known mistake of that exercise (``view-straight``), a verdict names what the checker
said (``wrong-shape``, ``crash``). The hints about the file's current fault are shown in their order, one
more on each request; the others are skipped, and the learner is told which and why.

No torch here, no Rich: plain data for ``exercise hint`` and the h key of ``exercise watch``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HintChoice:
    """The hint to show (1-based ``number``) and one line that says why it is the one shown."""

    number: int
    why: str


def hints_for(ex) -> tuple[tuple[str, ...], ...]:
    """Per hint of ``ex``, the verdicts and mistakes it is about (``()``: any fault), as the loader read them."""
    return ex.hints_for


def about(faults: tuple[str, ...], verdict: dict) -> bool:
    """Is a hint with these faults about this verdict (its name or its matched mistake)?"""
    return not faults or verdict["verdict"] in faults or verdict.get("mistake") in faults


def choose(ex, level: int, verdict: dict | None, problem: str = "") -> HintChoice:
    """The hint for request number ``level`` (1-based, as progress counts them) given the file's verdict
    (None: no verdict; ``problem`` then says why, e.g. ``you have no file yet``)."""
    total = len(ex.hints)
    if verdict is None:
        number = min(level, total)
        return HintChoice(number, f"hint {number} of {total}, in order: {problem}")
    faults = hints_for(ex)
    if not any(faults):  # the exercise does not say which hint is about what: no claim that one is
        number = min(level, total)
        return HintChoice(number, f"hint {number} of {total}, in order; your file gives {verdict['verdict']} now")
    relevant = [n for n in range(1, total + 1) if about(faults[n - 1], verdict)]
    if not relevant:
        number = min(level, total)
        return HintChoice(number, f"hint {number} of {total}, in order: no hint is about what your file gives now "
                                  f"({verdict['verdict']})")
    number = relevant[min(level, len(relevant)) - 1]
    return HintChoice(number, _why(number, total, relevant, verdict))


def _why(number: int, total: int, relevant: list[int], verdict: dict) -> str:
    """``hint 3 of 3, about what your file gives now (wrong-shape); hints 1 and 2 are skipped: about a
    fault your file does not have``."""
    why = f"hint {number} of {total}, about what your file gives now ({verdict['verdict']})"
    skipped = [n for n in range(1, total + 1) if n not in relevant]
    if skipped:
        which = ("hint " if len(skipped) == 1 else "hints ") + _words([str(n) for n in skipped])
        why += f"; {which} {'is' if len(skipped) == 1 else 'are'} skipped: about a fault your file does not have"
    return why


def _words(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
