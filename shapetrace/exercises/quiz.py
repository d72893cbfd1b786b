"""Quiz questions generated from templates by running them with torch.

Templates live in ``lessons/quiz.toml``; each expands over its list of sizes.
Every answer is what torch returns at generation time, so it is right by
construction; the tests recompute each one independently.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

from shapetrace.errors import UsageError
from shapetrace.exercises.answers import HOW
from shapetrace.exercises.content import ContentError

ASKS = {
    "shape": "What is y.shape?",
    "strides": "What is y.stride()?",
    "contiguous": "Is y contiguous?",
    "raises": "Does the last line raise an error?",
    "is-view": "Is y a view of x (same memory, nothing copied)?",
    "copy-bytes": "How many bytes does y.contiguous() copy? (0 if it copies nothing)",
    "value": "What is y?",
}


@dataclass(frozen=True)
class Template:
    id: str
    topic: str
    ask: str
    code: str
    sizes: tuple[dict, ...]
    note: str = ""
    grad: bool = False   # its code runs a backward: solved with autograd on, traced with its backward


@dataclass
class Question:
    """One question: the code, what is asked, and (after ``solve``) the answer torch gives."""

    id: str
    topic: str
    ask: str
    code: str
    dims: str
    note: str = ""
    answer: object = None
    detail: dict = field(default_factory=dict)
    grad: bool = False   # its code runs a backward (``grad = true`` in its template)

    @property
    def prompt(self) -> str:
        return ASKS[self.ask]

    @property
    def how(self) -> str:
        return HOW[self.ask]


def load_templates(path: Path) -> list[Template]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ContentError(f"cannot read {path}: {exc}") from None
    out = []
    for t in data.get("templates", []):
        if t.get("ask") not in ASKS:
            raise ContentError(f"{path}: template {t.get('id')!r} asks {t.get('ask')!r}; "
                               f"known: {', '.join(ASKS)}")
        out.append(Template(t["id"], t["topic"], t["ask"], t["code"].strip("\n"),
                            tuple(t.get("sizes", [{}])), t.get("note", ""), bool(t.get("grad", False))))
    return out


def _derived(sizes: dict) -> dict:
    s = dict(sizes)
    if "D" in s and "H" in s:
        s.setdefault("d_k", s["D"] // s["H"])
    return s


def expand(templates: list[Template]) -> list[Question]:
    """Every (template, sizes) pair as an unsolved question, in file order."""
    questions = []
    for t in templates:
        for n, sizes in enumerate(t.sizes):
            s = _derived(sizes)
            dims = " ".join(f"{k}={v}" for k, v in s.items() if k in ("B", "T", "D", "H", "d_k", "T_k"))
            questions.append(Question(f"{t.id}/{n + 1}", t.topic, t.ask, align_comments(t.code.format(**s)), dims,
                                      t.note.format(**s) if t.note else "", grad=t.grad))
    return questions


def align_comments(code: str) -> str:
    """Line up the ``# (B, T, D)`` comments after sizes were filled in."""
    parts = [line.split("  # ", 1) for line in code.splitlines()]
    width = max((len(p[0].rstrip()) for p in parts if len(p) == 2), default=0)
    return "\n".join(f"{p[0].rstrip():<{width}}  # {p[1]}" if len(p) == 2 else p[0] for p in parts)


def topics(questions: list[Question]) -> list[str]:
    return list(dict.fromkeys(q.topic for q in questions))


def select(questions: list[Question], topic: str | None, count: int, seed: int | None) -> list[Question]:
    """Filter by topic, shuffle when ``seed`` is given, keep ``count``."""
    if topic is not None:
        known = topics(questions)
        if not topic.strip():
            raise UsageError(f"--topic {topic!r} is empty: give one of the topics: {', '.join(known)}")
        if topic not in known:
            raise UsageError(f"no quiz topic {topic!r}; topics: {', '.join(known)}")
        questions = [q for q in questions if q.topic == topic]
    questions = list(questions)
    if seed is not None:
        random.Random(seed).shuffle(questions)
    return questions[:count]


def solve(q: Question) -> Question:
    """Run the question's code with torch and store the answer it gives."""
    import torch

    namespace = _namespace()
    lines = q.code.splitlines()
    body, last = "\n".join(lines[:-1]), lines[-1]
    with torch.enable_grad() if q.grad else torch.no_grad():
        exec(compile(body, f"<quiz {q.id}>", "exec"), namespace)
        if q.ask == "raises":
            try:
                exec(compile(last, f"<quiz {q.id}>", "exec"), namespace)
                q.answer = False
            except RuntimeError as exc:
                q.answer, q.detail["error"] = True, str(exc).splitlines()[0]
            return q
        exec(compile(last, f"<quiz {q.id}>", "exec"), namespace)
        y, x = namespace["y"], namespace.get("x")
    if q.ask == "shape":
        q.answer = tuple(y.shape)
    elif q.ask == "strides":
        q.answer = tuple(y.stride())
    elif q.ask == "contiguous":
        q.answer = bool(y.is_contiguous())
    elif q.ask == "is-view":
        q.answer = x is not None and y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    elif q.ask == "copy-bytes":
        c = y.contiguous()
        q.answer = 0 if c is y else c.numel() * c.element_size()
    else:
        q.answer = int(y)
    return q


def _namespace() -> dict:
    import einops
    import torch
    import torch.nn.functional as F

    return {"torch": torch, "F": F, "math": math, "rearrange": einops.rearrange}


def bank(root: Path) -> list[Question]:
    """The whole question bank (unsolved)."""
    return expand(load_templates(Path(root) / "quiz.toml"))
