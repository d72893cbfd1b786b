"""A lesson as plain data: its prose, and each live example with the trace of running it.

The examples are run here (through :func:`shapetrace.exercises.live.run_live`), never in the
rendering layer, which only formats the blocks this module returns.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.exercises.content import Lesson


@dataclass(frozen=True)
class LessonBlock:
    """One block of a lesson.

    ``kind`` is ``text`` (Markdown ``body``), ``example`` (a live example and its ``trace``; None: not
    run) or ``question`` (an example whose ``predict`` variable the reader names before the trace is
    shown: its code only). ``diagram`` is the op whose memory layout is drawn under it; ``expect`` the
    diagnostic kind (or ``raises``) a bug example is there to show, and ``expect_met`` whether the
    trace showed it; ``answer`` the shape torch gave the ``predict`` variable, ``answer_named`` the
    same shape with the axis names the trace gave it ("" when no op of the trace produced it);
    ``answer_first``: show the answer above the code (``--present``, on the screen after the question).
    ``number``: the example's number in its lesson (1-based, examples only, a question and its answer
    one example), the number its traced rows cite (``<lesson 1 example 2>:3``) and its label shows.
    """

    kind: str
    body: str
    trace: Any | None = None
    diagram: int | None = None
    predict: str | None = None
    answer: tuple[int, ...] | None = None
    answer_named: str = ""
    expect: str | None = None
    expect_met: bool | None = None
    answer_first: bool = False
    number: int | None = None
    show_all: str = ""   # how to show the ops its table leaves out (``shapetrace lesson 11 --all shows them``)


def example_block(kind: str, body: str, fence: str, name: str, run: bool, number: int | None = None) -> LessonBlock:
    """A live example (traced when ``run``) or its ``question`` (never traced); ``name`` is the lesson's
    (``lesson 1``), ``number`` the example's in it."""
    from shapetrace.exercises.live import fence_options, run_live

    options = fence_options(fence)
    fields = {"diagram": options.diagram, "predict": options.predict, "expect": options.expect, "number": number,
              "show_all": show_all_of(name)}
    if kind == "question" or not run:
        return LessonBlock(kind if kind == "question" else "example", body, None, **fields)
    result = run_live(body, f"{name} example {number}" if number else name, fence)
    return LessonBlock("example", body, result.trace, answer=result.answer,
                       answer_named=named_answer(result.trace, options.predict, result.answer),
                       expect_met=expectation_met(result.trace, options.expect),
                       answer_first=kind == "answer", **fields)


def show_all_of(name: str) -> str:
    """How a lesson's tables show the ops they leave out: ``shapetrace lesson 11 --all shows them``."""
    return f"shapetrace {name} --all shows them"


def named_answer(trace: Any, variable: str | None, shape: tuple[int, ...] | None) -> str:
    """The shape of ``variable`` with its axis names: the last op assigned to it that gave that shape."""
    if not variable or shape is None:
        return ""
    from shapetrace.engine.formatting import fmt_shape

    assigned = re.compile(rf"^\s*(?:\w+\s*,\s*)*{re.escape(variable)}\s*(?:,\s*\w+\s*)*=[^=]")
    for event in reversed(trace.events):
        if event.output is not None and tuple(event.output.shape) == shape and assigned.match(event.code or ""):
            return fmt_shape(event.output)
    return ""


def expectation_met(trace: Any, expect: str | None) -> bool | None:
    """Whether a bug example showed what it is there for (None: it expects nothing)."""
    if not expect:
        return None
    if expect == "raises":
        return trace.exception is not None
    return any(d.kind == expect and d.severity != "note" for d in trace.diagnostics)


def traced_blocks(items: Iterable[tuple[str, str, str]], name: str, run: bool = True,
                  first: int = 1) -> list[LessonBlock]:
    """``(kind, body, fence)`` items as blocks; each example is traced when ``run`` and numbered from
    ``first`` (an ``answer`` repeats the question just before it: its number is the one before)."""
    blocks = []
    number = first
    for kind, body, fence in items:
        if kind == "text":
            blocks.append(LessonBlock("text", body))
            continue
        if kind == "answer":
            blocks.append(example_block(kind, body, fence, name, run, number - 1))
            continue
        blocks.append(example_block(kind, body, fence, name, run, number))
        number += 1
    return blocks


def examples_in(items: Iterable[tuple[str, str, str]]) -> int:
    """How many examples ``items`` hold (a question and its answer count once)."""
    return sum(kind not in ("text", "answer") for kind, _, _ in items)


def lesson_blocks(lesson: Lesson, run: bool = True) -> list[LessonBlock]:
    """The whole lesson, examples traced (``lesson N``)."""
    from shapetrace.exercises.live import split_live

    return traced_blocks(split_live(lesson.text()), f"lesson {lesson.number}", run)


def lesson_screens(lesson: Lesson) -> list[list[tuple[str, str, str]]]:
    """The lesson cut into screens for ``lesson N --present`` (traced one screen at a time)."""
    from shapetrace.exercises.live import split_screens

    return split_screens(lesson.text())


def screen_blocks(lesson: Lesson, screens: list[list[tuple[str, str, str]]], index: int) -> list[LessonBlock]:
    """Screen ``index`` (0-based) of ``screens``, traced, its examples numbered as ``lesson N`` numbers
    them: the same example cites the same ``<lesson 1 example 2>`` on a screen and in the whole lesson."""
    first = 1 + sum(examples_in(screen) for screen in screens[:index])
    return traced_blocks(screens[index], f"lesson {lesson.number}", first=first)


def quiz_trace(question: Any, every_call: bool = False) -> Any:
    """The trace of a quiz question's code, shown with the answer when it was wrong (``every_call``:
    ``quiz --all``, the calls without a row of their own kept as rows too)."""
    import contextlib

    from shapetrace.engine.unrowed import recording_every_call
    from shapetrace.exercises.live import run_example

    dims = f"{question.dims} backward" if getattr(question, "grad", False) else question.dims
    with recording_every_call() if every_call else contextlib.nullcontext():
        return run_example(question.code, f"quiz {question.id}", dims)
