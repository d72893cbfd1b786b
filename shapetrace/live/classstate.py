"""The state of one live class, as plain data (no server, no network): the students, their answers, which
question is open, the reveal, the histogram, the summary and the CSV.

Every answer is read and checked by the predict mode's own functions (:func:`~shapetrace.app.predict.parse_answer`,
:func:`~shapetrace.app.predict.check_shape`): the forgiving formats (``2x8x6x64``, ``[B, H, T, d_k]``,
``(2, 8, 6, 64)``, ``B H T d_k``, ``H*d_k``) are theirs. What a student may see is built here too:
:meth:`LiveClass.public_state` holds torch's answer only for a revealed question.
"""

from __future__ import annotations

import csv
import io
import secrets
import time
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shapetrace.app.predict import Answer, check_shape, parse_answer
from shapetrace.engine.formatting import fmt_named
from shapetrace.errors import UsageError
from shapetrace.exercises.answers import PARSERS, check_answer, show_answer
from shapetrace.live.mistakes import meaning_of
from shapetrace.live.moments import MEMORY_CHOICES

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.live.moments import Moment

MAX_NAME = 40            #: characters in a display name
MAX_ANSWER = 200         #: characters in a typed answer
MAX_STUDENTS = 1000      #: students in one class (each costs a few hundred bytes)
JOIN_CODE_LETTERS = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L: read off a projector


class Refused(Exception):
    """A request the class turns down, with the one line the client shows."""


@dataclass
class Response:
    """One student's answer to one question."""

    text: str
    sizes: tuple[int, ...]
    shown: str          #: the answer as the histogram labels it: ``[2, 8, 6, 64]``
    right: bool
    reason: str         #: why it is wrong, from check_shape ("" when right)
    meaning: str        #: what the mistake means, from mistakes.meaning_of ("" when nothing fits)
    memory: str | None  #: "view" / "new", or None when not answered
    memory_right: bool | None
    seconds: float      #: after the question opened


@dataclass
class Student:
    id: int
    token: str
    name: str
    answers: dict[int, Response] = field(default_factory=dict)


def clean_name(name: Any, student_id: int) -> str:
    """A display name: text of at most MAX_NAME characters, control characters dropped; empty means
    anonymous. The name is stored as typed; every page shows it as text, never as markup."""
    if name is None:
        name = ""
    if not isinstance(name, str):
        raise Refused("a name is text")
    if len(name) > MAX_NAME:
        raise Refused(f"a name has at most {MAX_NAME} characters")
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C").strip()
    return name or f"anonymous {student_id}"


def shown_sizes(sizes: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, sizes)) + "]"


class LiveClass:
    """One class: questions opened, answered, revealed and closed in order, by the teacher only."""

    def __init__(self, moments: list[Moment], title: str = "shapetrace", clock=time.monotonic):
        if not moments:
            raise UsageError("this run has no op that changes shape or layout: nothing to predict")
        self.moments = moments
        self.title = title
        self.clock = clock
        self.join_code = "".join(secrets.choice(JOIN_CODE_LETTERS) for _ in range(6))
        self.teacher_key = secrets.token_urlsafe(24)
        self.students: dict[str, Student] = {}
        self.current = 0
        self.revealed: set[int] = set()
        self.ended = False
        self.opened_at = {0: clock()}
        self.version = 0  #: bumped on every change the pages must see

    # -- students -------------------------------------------------------------------------------------

    def join(self, name: Any, code: Any) -> Student:
        if not isinstance(code, str) or code.strip().upper() != self.join_code:
            raise Refused("wrong join code: it is on the projector")
        if len(self.students) >= MAX_STUDENTS:
            raise Refused(f"the class is full ({MAX_STUDENTS} students)")
        student_id = len(self.students) + 1
        student = Student(student_id, secrets.token_urlsafe(24), clean_name(name, student_id))
        self.students[student.token] = student
        return student

    def student(self, token: Any) -> Student:
        if not isinstance(token, str) or token not in self.students:
            raise Refused("unknown student: join again")
        return self.students[token]

    # -- answers --------------------------------------------------------------------------------------

    def answer(self, token: Any, number: Any, text: Any, memory: Any = None) -> Response:
        """Check and record one answer; Refused says why it is not taken (nothing is recorded then)."""
        student = self.student(token)
        if self.ended:
            raise Refused("the class has ended")
        if not isinstance(number, int) or isinstance(number, bool) or number != self.current:
            raise Refused("that question is not open: answer the one on the projector")
        if number in self.revealed:
            raise Refused("this question is closed: the answer was revealed")
        if number in student.answers:
            raise Refused("you already answered this question")
        if not isinstance(text, str) or not text.strip():
            raise Refused("write the output shape, e.g. [B, H, T, d_k] or 2x8x6x64")
        if len(text) > MAX_ANSWER:
            raise Refused(f"an answer has at most {MAX_ANSWER} characters")
        if memory is not None and memory not in MEMORY_CHOICES:
            raise Refused(f"the memory answer is one of: {', '.join(MEMORY_CHOICES)}")
        moment = self.moments[number]
        if moment.quiz is not None:
            response = self._judged_quiz(moment, text)
        else:
            try:
                parsed = parse_answer(text, moment.dims)
            except UsageError as exc:
                raise Refused(f"cannot read that shape: {exc}") from None
            response = self._judged(moment, text, parsed, memory)
        student.answers[number] = response
        self.version += 1
        return response

    def _judged(self, moment: Moment, text: str, parsed: Answer, memory: str | None) -> Response:
        out = moment.output
        verdict = check_shape(parsed, out)
        meaning = ""
        if not verdict.right:
            e = moment.event
            meaning = meaning_of(parsed.sizes, e.spec, [t.shape for t in e.inputs], [t.dims for t in e.inputs],
                                 out.shape, out.dims)
            if not meaning and parsed.sizes == tuple(out.shape):
                meaning = verdict.reason  # the sizes match, but axis 1 is H, not T: equal sizes can hide ...
        shown = shown_sizes(parsed.sizes)
        if parsed.sizes == tuple(out.shape) and not verdict.right:
            shown = fmt_named(parsed.names, parsed.sizes)  # the names are what is wrong: show them
        return Response(text[:MAX_ANSWER], parsed.sizes, shown, verdict.right, verdict.reason, meaning, memory,
                        None if memory is None else memory == moment.memory,
                        round(self.clock() - self.opened_at.get(moment.number, self.clock()), 2))

    def _judged_quiz(self, moment: Moment, text: str) -> Response:
        """A quiz question's answer, read and checked as ``shapetrace quiz`` reads and checks it."""
        q = moment.quiz
        understood, right = check_answer(q.ask, text, q.answer)
        if not understood:
            raise Refused(f"cannot read that answer: the answer is {q.how}")
        shown = show_answer(q.ask, PARSERS[q.ask](text))
        reason = "" if right else f"torch gives {moment.torch_answer}"
        return Response(text, (), shown, right, reason, "", None, None,
                        round(self.clock() - self.opened_at.get(moment.number, self.clock()), 2))

    def answered(self, number: int) -> int:
        return sum(number in s.answers for s in self.students.values())

    # -- the teacher ----------------------------------------------------------------------------------

    def is_teacher(self, key: Any) -> bool:
        return isinstance(key, str) and secrets.compare_digest(key.encode(), self.teacher_key.encode())

    def go(self, action: Any) -> None:
        """``next``, ``prev``, ``reveal`` or ``end`` (the caller checked the teacher's key)."""
        if action == "reveal":
            self.revealed.add(self.current)
        elif action == "next" and self.current + 1 < len(self.moments):
            self.current += 1
            self.opened_at.setdefault(self.current, self.clock())
        elif action == "prev" and self.current > 0:
            self.current -= 1
        elif action == "end":
            self.revealed.add(self.current)
            self.ended = True
        elif action not in ("next", "prev"):
            raise Refused(f"unknown action {str(action)[:20]!r}: next, prev, reveal or end")
        self.version += 1

    # -- what the pages see ---------------------------------------------------------------------------

    def histogram(self, number: int) -> list[dict[str, Any]]:
        """One bar per distinct answer (by sizes, or by names where equal sizes hide a swap), most given
        first; each with whether it is torch's answer and what the mistake means."""
        bars: Counter[str] = Counter()
        first: dict[str, Response] = {}
        for s in self.students.values():
            r = s.answers.get(number)
            if r is not None:
                bars[r.shown] += 1
                first.setdefault(r.shown, r)
        return [{"answer": shown, "count": n, "right": first[shown].right,
                 "meaning": first[shown].meaning or ("" if first[shown].right else first[shown].reason)}
                for shown, n in sorted(bars.items(), key=lambda kv: (-kv[1], kv[0]))]

    def memory_counts(self, number: int) -> dict[str, int]:
        counts = dict.fromkeys(MEMORY_CHOICES, 0)
        for s in self.students.values():
            r = s.answers.get(number)
            if r is not None and r.memory:
                counts[r.memory] += 1
        return counts

    def public_state(self) -> dict[str, Any]:
        """What every page may hold now: the open question, and torch's answer only once revealed."""
        moment = self.moments[self.current]
        state: dict[str, Any] = {"t": "state", "title": self.title, "total": len(self.moments),
                                 "moment": dict(moment.ask), "revealed": self.current in self.revealed,
                                 "ended": self.ended, "count": self.answered(self.current),
                                 "students": len(self.students), "choices": MEMORY_CHOICES}
        if state["revealed"]:
            state["reveal"] = dict(moment.reveal, histogram=self.histogram(self.current),
                                   memory_counts=self.memory_counts(self.current))
        if self.ended:
            state["summary"] = self.summary()
        return state

    def own_state(self, student: Student) -> dict[str, Any]:
        """What one student sees of their own answer to the open question (their result once revealed)."""
        r = student.answers.get(self.current)
        you: dict[str, Any] = {"name": student.name, "answered": r is not None,
                               "score": sum(a.right for a in student.answers.values()),
                               "asked": len(self.revealed)}
        if r is not None:
            you.update(text=r.text, shown=r.shown, memory=r.memory)
            if self.current in self.revealed:
                you.update(right=r.right, reason=r.reason, meaning=r.meaning, memory_right=r.memory_right)
        return you

    def summary(self) -> list[dict[str, Any]]:
        """Each question with how many answered and how many were right, hardest first."""
        rows = []
        for m in self.moments:
            answered = [s.answers[m.number] for s in self.students.values() if m.number in s.answers]
            right = sum(r.right for r in answered)
            wrong = Counter(r.shown for r in answered if not r.right).most_common(1)
            rows.append({"number": m.number, "op": m.ask["op"], "code": m.ask["code"], "answered": len(answered),
                         "right": right, "share": round(right / len(answered), 3) if answered else None,
                         "common_wrong": wrong[0][0] if wrong else ""})
        return sorted(rows, key=lambda r: (r["share"] if r["share"] is not None else 2, r["number"]))

    def csv_text(self) -> str:
        """Every answer of every student, one row each (a cell a spreadsheet would run as a formula is
        quoted with a leading apostrophe)."""
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["student", "name", "question", "op", "code", "answer", "read_as", "right", "torch",
                         "mistake", "memory", "memory_right", "seconds"])
        for s in self.students.values():
            for number, r in sorted(s.answers.items()):
                m = self.moments[number]
                writer.writerow([s.id, _cell(s.name), number + 1, m.ask["op"], _cell(m.ask["code"]), _cell(r.text),
                                 r.shown, int(r.right), m.torch_answer,
                                 r.meaning or r.reason, r.memory or "",
                                 "" if r.memory_right is None else int(r.memory_right), r.seconds])
        return out.getvalue()


def _cell(text: str) -> str:
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
