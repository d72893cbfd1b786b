"""The steps of a decode run, found so the table can show the first one and fold the rest (plain data).

A decode step repeats the step before it op for op, except that the key/value cache it reads is
one token longer: step 1 joins ``T`` cached tokens and one new token into ``T+1``, step 2 joins
``T+1`` into ``T+2``. Two steps are the same here when every op, source line, view/copy verdict,
axis name and size matches once the cache's two names (before and after the join) and their sizes
are set aside; strides are compared on every tensor without a cache axis (the strides of size-1 axes
left out). A step holding a diagnosed op is always shown.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import Event, TensorInfo


@dataclass(frozen=True)
class Step:
    """The ops of decode step ``number`` (1 for the first), in order."""

    number: int
    events: tuple[Event, ...]


@dataclass(frozen=True)
class StepFold:
    """Consecutive steps that repeat step ``original`` with a longer cache, shown as one line."""

    steps: tuple[Step, ...]
    original: Step

    @property
    def events(self) -> tuple[Event, ...]:
        return tuple(e for step in self.steps for e in step.events)

    @property
    def caches(self) -> tuple[str, ...]:
        """The cache's name after each folded step: ``("T+2", "T+3")``."""
        return tuple(cache_after(step.number) for step in self.steps)

    @property
    def sentence(self) -> str:
        first, last = self.steps[0].number, self.steps[-1].number
        which = f"step {first}" if first == last else f"steps {first}-{last}"
        n = len(self.original.events)
        each = " each step" if first != last else ""
        return (f"{which}: the same {n} ops as step {self.original.number}, the cache one token longer{each}: "
                f"{', '.join(self.caches)}")


def cache_before(number: int) -> str:
    """The cache's token axis as step ``number`` finds it: ``T`` before step 1, ``T+1`` before step 2."""
    return "T" if number == 1 else f"T+{number - 1}"


def cache_after(number: int) -> str:
    return f"T+{number}"


def split_steps(events: Sequence[Event], starts: Sequence[int]) -> tuple[list[Event], list[Step]]:
    """The prefill's ops and each step's, from the op index where each step begins."""
    bounds = list(starts) + [None]
    prefill = [e for e in events if not starts or e.index < starts[0]]
    steps = [Step(i + 1, tuple(e for e in events if e.index >= lo and (hi is None or e.index < hi)))
             for i, (lo, hi) in enumerate(zip(bounds, bounds[1:]))]
    return prefill, steps


def _tensor_facts(t: TensorInfo, names: dict[str, str]) -> tuple:
    """Names, sizes and strides, with the cache's names and sizes set aside. The stride of a size-1 axis
    is left out (it never moves to another element: the new token's input is a view of the prompt's
    output at step 1, a fresh tensor later), and so is the storage offset (where that view starts)."""
    dims = tuple(names.get(d, d) if d else d for d in t.dims)
    grows = any(d in names for d in t.dims if d)
    sizes = tuple("·" if d in names else s for d, s in zip(t.dims, t.shape))
    strides = None if grows else tuple(st for st, size in zip(t.stride, t.shape) if size != 1)
    return dims, sizes, t.dtype, strides


def step_signature(step: Step) -> tuple:
    """What two steps must share to fold: every op's facts with the cache's names and sizes set aside."""
    names = {cache_before(step.number): "cache", cache_after(step.number): "cache+1"}
    return tuple((e.op, e.source, e.code, e.view, e.noop, e.error, e.module,
                  tuple(_tensor_facts(t, names) for t in (*e.inputs, *e.outputs))) for e in step.events)


def fold_steps(events: Sequence[Event], starts: Sequence[int], keep: Collection[int] = ()) -> list[StepFold]:
    """Runs of steps after the first that repeat it with a longer cache; steps holding an op in
    ``keep`` (a diagnosed one) are never folded."""
    _, steps = split_steps(events, starts)
    if len(steps) < 2 or not steps[0].events:
        return []
    first = step_signature(steps[0])
    folds: list[StepFold] = []
    run: list[Step] = []
    for step in steps[1:]:
        same = step.events and step_signature(step) == first and not any(e.index in keep for e in step.events)
        if same:
            run.append(step)
            continue
        if run:
            folds.append(StepFold(tuple(run), steps[0]))
        run = []
    if run:
        folds.append(StepFold(tuple(run), steps[0]))
    return folds


def step_titles(starts: Sequence[int]) -> dict[int, str]:
    """Op index -> the title of the part of a decode run that begins there."""
    return {0: "prefill", **{start: f"step {i + 1}" for i, start in enumerate(starts)}}


def cache_names(events: Sequence[Event], starts: Sequence[int]) -> list[str | None]:
    """The token axis of the first join of each step (the key cache after it), as the engine named it."""
    from shapetrace.engine.ops import Family

    _, steps = split_steps(events, starts)
    out: list[str | None] = []
    for step in steps:
        join = next((e for e in step.events if e.spec.family is Family.JOIN and e.output is not None
                     and not e.error), None)
        out.append(join.output.dims[-2] if join is not None and len(join.output.dims) >= 2 else None)
    return out
