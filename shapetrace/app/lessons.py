"""A lesson as plain data: its prose, and each live example with the trace of running it.

The examples are run here (through :func:`shapetrace.exercises.live.run_example`), never in the
rendering layer, which only formats the blocks this module returns.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.exercises.content import Lesson


@dataclass(frozen=True)
class LessonBlock:
    """One block of a lesson: Markdown ``text``, or a live ``example`` and its trace (None: not run)."""

    kind: str
    body: str
    trace: Any | None = None


def traced_blocks(items: Iterable[tuple[str, str, str]], name: str, run: bool = True) -> list[LessonBlock]:
    """``(kind, body, dims)`` items as blocks; each example is traced when ``run``."""
    from shapetrace.exercises.live import run_example

    blocks = []
    for n, (kind, body, dims) in enumerate(items):
        trace = run_example(body, f"{name} example {n}", dims) if kind != "text" and run else None
        blocks.append(LessonBlock("text" if kind == "text" else "example", body, trace))
    return blocks


def lesson_blocks(lesson: Lesson, run: bool = True) -> list[LessonBlock]:
    """The whole lesson, examples traced (``lesson N``)."""
    from shapetrace.exercises.live import split_live

    return traced_blocks(split_live(lesson.text()), f"lesson {lesson.number}", run)


def lesson_screens(lesson: Lesson) -> list[list[tuple[str, str, str]]]:
    """The lesson cut into screens for ``lesson N --present`` (traced one screen at a time)."""
    from shapetrace.exercises.live import split_screens

    return split_screens(lesson.text())


def quiz_trace(question: Any) -> Any:
    """The trace of a quiz question's code, shown with the answer when it was wrong."""
    from shapetrace.exercises.live import run_example

    return run_example(question.code, f"quiz {question.id}", question.dims)
