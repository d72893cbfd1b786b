"""Predict mode's engine: which ops to ask about, reading an answer, checking it (no Rich, no torch).

Answers may be written the usual ways; names are resolved with the trace's sizes:

>>> parse_answer("2x8x6x64", {}).sizes
(2, 8, 6, 64)
>>> parse_answer("(B, H, T, d_k)", {"B": 2, "H": 8, "T": 6, "d_k": 64}).sizes
(2, 8, 6, 64)
>>> parse_answer("[B, T, H*d_k]", {"B": 2, "H": 8, "T": 6, "d_k": 64}).sizes
(2, 6, 512)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from shapetrace.app.classroom import LONG_NAMES, changes_layout
from shapetrace.engine.sentences import why_not_contiguous
from shapetrace.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.backward.rows import BackwardReport, BackwardRow, GradInfo
    from shapetrace.engine.events import Event, TensorInfo
    from shapetrace.engine.tracer import Trace

_ALIASES = {long: short for short, long in LONG_NAMES.items()}
_FACTOR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$|^\d+$")


@dataclass(frozen=True)
class Answer:
    """A parsed prediction: one size per axis, and the name written for it when it was a single name."""

    sizes: tuple[int, ...]
    names: tuple[str | None, ...]


@dataclass(frozen=True)
class Verdict:
    """Right or wrong, and why (empty when right)."""

    right: bool
    reason: str = ""


def _strip(text: str) -> str:
    text = text.strip()
    if text.startswith("torch.Size"):
        text = text[len("torch.Size"):].strip()
    while len(text) >= 2 and text[0] + text[-1] in ("[]", "()"):
        text = text[1:-1].strip()
    return text


def split_axes(text: str) -> list[str]:
    """``"2x8x6x64"``, ``"2, 8, 6, 64"``, ``"B H T d_k"`` -> one string per axis."""
    text = _strip(text)
    if not text:
        return []
    if "," in text:
        parts = text.split(",")
        if parts[-1].strip() == "":  # a trailing comma, as in (6,)
            parts = parts[:-1]
        return [p.strip() for p in parts]
    if "×" in text or re.search(r"(?<=\d)\s*x\s*(?=\d)|\s+x\s+", text):
        return [p.strip() for p in re.split(r"\s*×\s*|(?<=\d)\s*x\s*(?=\d)|\s+x\s+", text)]
    return text.split()


def _factor(token: str, dims: Mapping[str, int]) -> int:
    if token.isdigit():
        return int(token)
    name = _ALIASES.get(token, token)
    if name in dims:
        return dims[name]
    known = ", ".join(f"{k}={v}" for k, v in dims.items() if k not in ("qkv", "kv"))
    raise UsageError(f"unknown axis name {token!r}; known names: {known}")


def parse_axis(text: str, dims: Mapping[str, int]) -> tuple[int, str | None]:
    """One axis: a number, a name, or a product (``H*d_k``, ``T·d_k``); returns (size, single name or None)."""
    factors = [f.strip() for f in re.split(r"[*·]", text)]
    if not text or not all(_FACTOR.match(f) for f in factors):
        raise UsageError(f"cannot read {text!r} as an axis: write a number, a name or a product like H*d_k")
    size = math.prod(_factor(f, dims) for f in factors)
    name = _ALIASES.get(factors[0], factors[0]) if len(factors) == 1 and not factors[0].isdigit() else None
    return size, name


def parse_answer(text: str, dims: Mapping[str, int]) -> Answer:
    """Read a predicted shape or stride tuple.

    Raises:
        UsageError: the text is not a list of numbers, names or products.
    """
    axes = split_axes(text)
    if not axes:
        raise UsageError("empty answer")
    parsed = [parse_axis(a, dims) for a in axes]
    return Answer(tuple(s for s, _ in parsed), tuple(n for _, n in parsed))


def _plain(label: str | None) -> str | None:
    return label if label and "*" not in label and not label.startswith("!") else None


def check_shape(answer: Answer, t: TensorInfo | GradInfo, noun: str = "output") -> Verdict:
    """Sizes must match torch's; an axis written as a single name must also be the right axis (``noun``:
    what the shape is of, in the reason: ``the grad has 4 axes``)."""
    if len(answer.sizes) != len(t.shape):
        return Verdict(False, f"the {noun} has {len(t.shape)} axes, the prediction {len(answer.sizes)}")
    for i, (got, want) in enumerate(zip(answer.sizes, t.shape)):
        if got != want:
            return Verdict(False, f"axis {i} has size {want}{_called(t.dims[i])}, not {got}")
    for i, (name, label) in enumerate(zip(answer.names, t.dims)):
        if name and _plain(label) and name != label:
            return Verdict(False, f"the sizes match, but axis {i} is {label}, not {name}: "
                                  f"equal sizes can hide swapped axes")
    return Verdict(True)


def _called(label: str | None) -> str:
    return f" ({label.lstrip('!').replace('*', '·')})" if label else ""


def check_strides(answer: Answer, t: TensorInfo) -> Verdict:
    """The predicted strides must equal torch's, element for element."""
    if len(answer.sizes) != len(t.stride):
        return Verdict(False, f"the output has {len(t.stride)} strides, the prediction {len(answer.sizes)}")
    wrong = [i for i, (g, w) in enumerate(zip(answer.sizes, t.stride)) if g != w]
    if wrong:
        i = wrong[0]
        return Verdict(False, f"the stride of axis {i}{_called(t.dims[i])} is {t.stride[i]}, not {answer.sizes[i]}")
    return Verdict(True)


def stride_reason(e: Event) -> str:
    """Why the output has its strides, in one sentence from the event's numbers."""
    i, o = e.inputs[0], e.output
    if e.view and o.shape != i.shape and sorted(o.shape) == sorted(i.shape) and not o.contiguous:
        return (f"a {e.op} only reorders the input's strides ({_tuple(i.stride)} → {_tuple(o.stride)}); "
                f"{why_not_contiguous(o)}")
    if o.contiguous:
        products = ", ".join("·".join(map(str, o.shape[k + 1:])) or "1" for k in range(len(o.shape)))
        if tuple(math.prod(o.shape[k + 1:]) for k in range(len(o.shape))) != tuple(o.stride):
            return f"contiguous (size-1 axes may have any stride): {_tuple(o.stride)}"
        return (f"row-major ({'a view' if e.view else 'a new buffer'}): each stride is the product of "
                f"the sizes after its axis: ({products}) = {_tuple(o.stride)}")
    return why_not_contiguous(o)


def _tuple(values: Sequence[int]) -> str:
    return "(" + ", ".join(map(str, values)) + ")"


def _key(e: Event) -> tuple:
    return (e.source, e.op, e.args, tuple((t.shape, t.stride) for t in e.inputs))


@dataclass
class Quiz:
    """The ops to ask about: each op that changes shape or layout, repeats of the same line skipped."""

    asked: list[int]
    repeats: dict[int, int] = field(default_factory=dict)

    @classmethod
    def of(cls, trace: Trace, dedupe: bool = True) -> Quiz:
        asked: list[int] = []
        repeats: dict[int, int] = {}
        seen: dict[tuple, int] = {}
        for e in trace.events:
            if not changes_layout(e):
                continue
            key = _key(e)
            if dedupe and key in seen:
                repeats[e.index] = seen[key]
            else:
                seen[key] = e.index
                asked.append(e.index)
        return cls(asked, repeats)


@dataclass
class GradQuiz:
    """The backward's questions: in each row, the grads it sends back whose named shape differs from the grad
    that arrived (a linear's dW and db, an expand's sum), and every grad of a row whose forward op changed
    shape or layout (a view, a transpose, a matmul: asked even where equal sizes hide the change, T = H);
    not an elementwise op's. Rows that repeat an earlier one's forward line are skipped, as the forward's
    quiz skips repeats."""

    asked: dict[int, tuple[int, ...]]   # a row's order -> the positions in its ``made`` that are asked
    repeats: dict[int, int] = field(default_factory=dict)   # a row's order -> the row it repeats

    @classmethod
    def of(cls, backward: BackwardReport | None, events: Sequence[Event] = (), dedupe: bool = True) -> GradQuiz:
        by_index = {e.index: e for e in events}
        asked: dict[int, tuple[int, ...]] = {}
        repeats: dict[int, int] = {}
        seen: dict[tuple, int] = {}
        for row in backward.rows if backward is not None else ():
            event = by_index.get(row.event)
            moved = event is not None and changes_layout(event)
            changed = tuple(i for i, g in enumerate(row.made) if row.arrived and (moved or _named(g) != _named(
                row.arrived[0])))
            if not changed:
                continue
            key = _grad_key(row, event)
            if dedupe and key in seen:
                repeats[row.order] = seen[key]
            else:
                seen[key] = row.order
                asked[row.order] = changed
        return cls(asked, repeats)

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.asked.values())


def _named(g: GradInfo) -> tuple:
    return g.shape, g.dims


def _grad_key(row: BackwardRow, event: Event | None) -> tuple:
    """What makes two rows the same question: the forward line and op, and every grad's shape (not its
    strides: the question is the shape; k's grads arrive transposed where q's do not)."""
    grads = tuple((g.of, g.shape) for g in (*row.arrived, *row.made))
    return (event.source if event is not None else None, row.op, grads)


@dataclass
class Score:
    """Points per kind of prediction: right, asked and skipped."""

    shape_right: int = 0
    shape_asked: int = 0
    stride_right: int = 0
    stride_asked: int = 0
    grad_right: int = 0
    grad_asked: int = 0
    skipped: int = 0
    unanswered: int = 0

    def record(self, kind: str, verdict: Verdict | None) -> None:
        """``verdict`` None means the question was skipped (an empty answer)."""
        setattr(self, f"{kind}_asked", getattr(self, f"{kind}_asked") + 1)
        if verdict is None:
            self.skipped += 1
        elif verdict.right:
            setattr(self, f"{kind}_right", getattr(self, f"{kind}_right") + 1)

    @property
    def right(self) -> int:
        return self.shape_right + self.stride_right + self.grad_right

    @property
    def asked(self) -> int:
        return self.shape_asked + self.stride_asked + self.grad_asked

    def summary(self) -> str:
        parts = [f"shapes {self.shape_right}/{self.shape_asked}"]
        if self.stride_asked:
            parts.append(f"strides {self.stride_right}/{self.stride_asked}")
        if self.grad_asked:
            parts.append(f"grads {self.grad_right}/{self.grad_asked}")
        text = f"score {self.right}/{self.asked} ({' · '.join(parts)})"
        if self.skipped:
            text += f", {self.skipped} skipped"
        if self.unanswered:
            text += f", {self.unanswered} not asked (answers ran out)"
        return text
