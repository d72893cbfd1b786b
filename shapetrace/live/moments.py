"""The questions of a live class: one per predict moment of a trace, split into what may be shown before
the reveal (the op, its code line, its inputs) and what only the reveal shows (torch's output, the sentence,
the memory diagram). The moments are the predict mode's (:class:`~shapetrace.app.predict.Quiz`), the
shown data the classroom page's (:func:`~shapetrace.render.page.page_data`): nothing is recomputed here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shapetrace.app.classroom import ViewOptions
from shapetrace.app.predict import Quiz

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import Event, TensorInfo
    from shapetrace.engine.report import Report

#: The memory question's two choices: the output shares the input's memory, or lives in new memory.
MEMORY_CHOICES = {"view": "a view (same memory, nothing copied)", "new": "new memory (a copy or a new result)"}


#: What a student is asked at an op of a trace, and the formats the answer may take.
SHAPE_PROMPT = "What is the output's shape?"
SHAPE_HOW = "Sizes or axis names: 2x8x6x64, (2, 8, 6, 64), [B, H, T, d_k], H*d_k"


@dataclass(frozen=True)
class Moment:
    """One question: ``ask`` is public from the start, ``reveal`` only after the teacher reveals it.

    A moment of a trace asks for the output shape of ``event`` (and view or new memory); a moment of the
    quiz (``quiz``, a solved :class:`~shapetrace.exercises.quiz.Question`) asks what its question asks.
    """

    number: int  #: 0-based, in the order the class meets them
    event: Event | None
    dims: dict[str, int]
    ask: dict[str, Any]
    reveal: dict[str, Any]
    quiz: Any = None

    @property
    def output(self) -> TensorInfo:
        return self.event.output

    @property
    def memory(self) -> str | None:
        """Torch's answer to the memory question: ``view`` or ``new`` (None: a quiz question has none)."""
        if self.event is None:
            return None
        return "view" if self.event.view else "new"

    @property
    def torch_answer(self) -> str:
        """torch's answer, written as the histogram writes answers (``[2, 8, 6, 64]``, ``yes``)."""
        if self.quiz is not None:
            from shapetrace.exercises.answers import show_answer

            return show_answer(self.quiz.ask, self.quiz.answer)
        return "[" + ", ".join(map(str, self.output.shape)) + "]"


def _sizes(dims: dict[str, Any]) -> dict[str, int]:
    return {k: v for k, v in (dims or {}).items() if isinstance(v, int) and k not in ("qkv", "kv")}


def build_moments(trace: Report, options: ViewOptions = ViewOptions(), theme: str = "light", first: int = 0,
                  example: str = "") -> list[Moment]:
    """A moment for each op predict mode asks about, in trace order, numbered from ``first``; ``example``:
    the code the trace ran (a lesson's example), whose lines up to each op's are shown above it."""
    from shapetrace.render.page import page_data

    ops = {op["index"]: op for op in page_data(trace, options)["ops"]}
    events = {e.index: e for e in trace.events}
    dims = _sizes(trace.dims)
    moments = []
    for number, index in enumerate(Quiz.of(trace).asked, first):
        op, event = ops[index], events[index]
        ask = {"number": number, "index": index, "op": op["op"], "code": op["code"], "where": op["where"],
               "inputs": op["inputs"], "context": _lines_before(example, op["line"]), "sizes": _sizes_line(dims),
               "prompt": SHAPE_PROMPT, "how": SHAPE_HOW, "memory_question": True}
        reveal = {"shape": op["shape"], "strides": op["strides"], "memory": "view" if event.view else "new",
                  "memory_word": op["memory"], "sentence": op["sentence"], "equation": op["equation"],
                  "diagram": op["diagram"].get(theme, ""), "notes": op["notes"]}
        moments.append(Moment(number, event, dims, ask, reveal))
    return moments


def _lines_before(example: str, line: Any) -> str:
    """The example's lines before line ``line`` (1-based), what a student reads to predict it."""
    if not example or not isinstance(line, int):
        return ""
    return "\n".join(example.splitlines()[: max(0, line - 1)])


def _sizes_line(dims: dict[str, int]) -> str:
    return " ".join(f"{name}={size}" for name, size in dims.items())


def lesson_moments(number: int, options: ViewOptions = ViewOptions(), theme: str = "light") -> tuple[str, list[Moment]]:
    """A lesson's predict moments: those of each live example it traces, in the lesson's order (examples
    that are there to raise have none); and the lesson's title."""
    from shapetrace.app.lessons import lesson_blocks
    from shapetrace.exercises.content import load

    lesson = load().lesson(number)
    moments: list[Moment] = []
    for block in lesson_blocks(lesson):
        if block.kind == "example" and block.trace is not None:
            moments += build_moments(block.trace, options, theme, len(moments), block.body)
    return f"lesson {lesson.number}: {lesson.title}", moments


def quiz_moments(topic: str | None, count: int, seed: int | None = None) -> list[Moment]:
    """Questions of the quiz bank (``shapetrace quiz``), each solved by torch now, as moments: the code and
    what is asked are public, torch's answer is the reveal."""
    from shapetrace.exercises import quiz
    from shapetrace.exercises.answers import show_answer
    from shapetrace.exercises.content import load

    chosen = [quiz.solve(q) for q in quiz.select(quiz.bank(load().root), topic, count, seed)]
    moments = []
    for number, q in enumerate(chosen):
        ask = {"number": number, "index": None, "op": q.prompt, "code": q.code.splitlines()[-1],
               "where": f"quiz {q.id}", "inputs": [], "context": "\n".join(q.code.splitlines()[:-1]),
               "sizes": q.dims, "prompt": q.prompt, "how": q.how, "memory_question": False}
        reveal = {"shape": show_answer(q.ask, q.answer), "strides": "", "memory": None, "memory_word": "",
                  "sentence": " ".join(filter(None, [q.note, q.detail.get("error", "")])), "equation": "",
                  "diagram": "", "notes": []}
        moments.append(Moment(number, None, {}, ask, reveal, quiz=q))
    return moments
