"""Run a chain of tensor methods step by step under the tracer (engine for ``shapetrace strides``).

The start tensor is a fresh contiguous ``arange`` of SHAPE (so every value is
its own address), or an empty ``meta`` tensor above :data:`~shapetrace.app.chain.META_LIMIT`
elements. Each step runs under :class:`shapetrace.engine.tracer.Trace`, so names,
view/copy verdicts and diagnostics come from the same engine as ``shapetrace run``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shapetrace.app.chain import META_LIMIT, ChainStep, parse_chain, parse_shape
from shapetrace.engine.namer import Namer
from shapetrace.engine.ops import Family, spec_for
from shapetrace.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.diagnostic import Diagnostic
    from shapetrace.engine.events import Event, TensorInfo
    from shapetrace.engine.tracer import Trace

#: Names given to a fresh tensor when --dims is not given, by number of axes.
DEFAULT_NAMES = {1: ("D",), 2: ("T", "D"), 3: ("B", "T", "D"), 4: ("B", "T", "H", "d_k")}


@dataclass
class StepResult:
    """One step: the code, the tensor after it (None if it failed), and what happened."""

    number: int
    code: str
    info: TensorInfo | None
    event: Event | None = None
    error: str | None = None
    explanation: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def view(self) -> bool:
        return bool(self.event and self.event.view)

    @property
    def copy_bytes(self) -> int:
        return self.event.copy_bytes if self.event else 0

    def to_dict(self) -> dict[str, Any]:
        i = self.info
        return {
            "step": self.number, "code": self.code,
            "shape": list(i.shape) if i else None, "stride": list(i.stride) if i else None,
            "storage_offset": i.storage_offset if i else None, "contiguous": i.contiguous if i else None,
            "view": self.view if self.number else None, "copy_bytes": self.copy_bytes,
            "dims": list(i.dims) if i else None, "error": self.error,
            "explanation": self.explanation or None, "notes": self.notes,
        }


@dataclass
class ChainRun:
    """The whole run: the start tensor (step 0), each step, the device and the trace."""

    shape: tuple[int, ...]
    names: tuple[str | None, ...]
    device: str
    steps: list[StepResult]
    trace: Trace
    heads: int | None = None
    names_given: bool = False
    largest: int = 0  # the most elements any step holds (or copies), sized on meta before running
    heads_from: str | None = None  # the step H was read from when --heads was not given

    @property
    def head_count(self) -> int | None:
        """H from --heads or from an axis named H (colours D per head)."""
        return self.heads or self.trace.dims.get("H")

    @property
    def failed(self) -> bool:
        return any(s.error for s in self.steps)

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return self.trace.diagnostics

    @property
    def general_diagnostics(self) -> list[Diagnostic]:
        """Diagnostics not tied to one step (shown after the steps)."""
        return [d for d in self.diagnostics if d.event is None]

    def to_dict(self) -> dict[str, Any]:
        return {"version": 1, "shape": list(self.shape), "dims": list(self.names), "device": self.device,
                "ok": not self.failed, "steps": [s.to_dict() for s in self.steps],
                "diagnostics": [d.to_dict() for d in self.diagnostics]}


def parse_names(text: str | None, shape: Sequence[int]) -> tuple[str | None, ...]:
    """``"B,T,D"`` -> names for each axis (``_`` leaves one unnamed); defaults by number of axes."""
    if text is None:
        return DEFAULT_NAMES.get(len(shape), (None,) * len(shape))
    parts = [p for p in text.replace(",", " ").split() if p]
    if len(parts) != len(shape):
        raise UsageError(f"--dims {text!r} gives {len(parts)} names for a shape with {len(shape)} axes "
                         f"({'x'.join(map(str, shape))}); give one name per axis, e.g. B,T,D")
    names: list[str | None] = []
    for p in parts:
        if p in ("_", "?"):
            names.append(None)
        elif not p.replace("*", "").isidentifier():
            raise UsageError(f"--dims: {p!r} is not a valid axis name (letters, digits and _)")
        else:
            names.append(p)
    if len({n for n in names if n}) != len([n for n in names if n]):
        raise UsageError(f"--dims {text!r} repeats a name; each axis needs its own")
    return tuple(names)


def named_sizes(shape: Sequence[int], names: Sequence[str | None], heads: int | None) -> dict[str, int]:
    """The trace's dims: each named axis's size, plus H from --heads (checked against D)."""
    dims = {n: s for n, s in zip(names, shape) if n}
    if heads is not None:
        if heads < 1:
            raise UsageError(f"--heads must be at least 1, got {heads}")
        if "H" in dims and dims["H"] != heads:
            raise UsageError(f"--heads {heads} disagrees with the H axis of size {dims['H']}")
        if "D" in dims and dims["D"] % heads:
            raise UsageError(f"--heads {heads} does not divide D={dims['D']}: d_k = D / heads must be whole")
        dims["H"] = heads
    return dims


@dataclass(frozen=True)
class ChainPlan:
    """SHAPE, names, sizes and steps, parsed and checked without torch (every usage error found here)."""

    shape: tuple[int, ...]
    names: tuple[str | None, ...]
    sizes: dict[str, int]
    steps: list[ChainStep]
    heads: int | None
    names_given: bool
    heads_from: str | None = None  #: the chain step H was read from (no --heads), or None


def plan_chain(shape_text: str, chain_text: str, dims: str | None = None, heads: int | None = None) -> ChainPlan:
    """Parse and check SHAPE, --dims, --heads and CHAIN; imports no torch, so it answers fast."""
    shape = parse_shape(shape_text)
    names = parse_names(dims, shape)
    sizes = named_sizes(shape, names, heads)
    steps = parse_chain(chain_text, {k: v for k, v in _arg_names(sizes).items()})
    heads_from = None
    if heads is None and "H" not in sizes:
        guess = infer_heads(steps, shape, names)
        if guess is not None:
            sizes = named_sizes(shape, names, guess)
            heads, heads_from = guess, steps[0].text
    return ChainPlan(shape, names, sizes, steps, heads, dims is not None, heads_from)


def largest_step(shape: Sequence[int], steps: Sequence[ChainStep]) -> int:
    """The most elements any step's result holds, found on the meta device (no memory), up to the
    first step that fails. ``expand(2**30)`` is a free view, but ``.contiguous()`` after it would
    allocate every element: sizing each result catches both before anything real runs."""
    import torch

    current = torch.empty(tuple(shape), device="meta")
    largest = current.numel()
    for step in steps:
        try:
            current = _call(step, current)
        except Exception:  # the real run reports the failure with torch's own message
            break
        if isinstance(current, torch.Tensor):
            largest = max(largest, current.numel())
    return largest


def run_chain(shape_text: str, chain_text: str, dims: str | None = None, heads: int | None = None,
              plan: ChainPlan | None = None) -> ChainRun:
    """Parse SHAPE and CHAIN, then apply the chain step by step under the tracer.

    Every step is sized on the meta device first; when any result would exceed ``META_LIMIT``
    elements the whole chain runs on meta (real shapes and strides, no data). A failing step is
    recorded with torch's message (and, for ``view``, an explanation) and stops the chain; earlier
    steps are kept.
    """
    import torch

    from shapetrace.engine.tracer import Trace

    plan = plan or plan_chain(shape_text, chain_text, dims, heads)
    shape, names, steps = plan.shape, plan.names, plan.steps
    numel = math.prod(shape)
    largest = largest_step(shape, steps)
    device = "meta" if largest > META_LIMIT else "cpu"
    x = (torch.arange(numel, dtype=torch.float32).view(shape) if device == "cpu"
         else torch.empty(shape, device="meta"))
    trace = Trace(plan.sizes)
    results: list[StepResult] = []
    with torch.no_grad(), trace:
        trace.set_names(x, list(names))
        results.append(StepResult(0, "start", trace.info(x)))
        current = x
        for n, step in enumerate(steps, 1):
            result, current = _apply(trace, step, current, n)
            results.append(result)
            if result.error:
                break
    _add_notes(trace, results)
    return ChainRun(shape, names, device, results, trace, plan.heads, names_given=plan.names_given,
                    largest=largest, heads_from=plan.heads_from)


def _call(step: ChainStep, tensor):
    spec = spec_for(step.method)   # (a chain's text names its methods)
    if spec.chain == "attribute":
        return getattr(tensor, step.method)
    if spec.indexes:
        return tensor[step.args[0]]
    return getattr(tensor, step.method)(*step.args, **step.kwargs)


def infer_heads(steps: Sequence[ChainStep], shape: Sequence[int], names: Sequence[str | None]) -> int | None:
    """H from the chain's first view/reshape that splits the last axis D in two: ``view(B, T, H, d_k)``."""
    if not names or names[-1] != "D" or not steps:
        return None
    first = steps[0]
    if spec_for(first.method).family is not Family.RESHAPE or not first.args:
        return None
    target = list(first.args[0]) if len(first.args) == 1 and isinstance(first.args[0], (tuple, list)) \
        else list(first.args)
    if len(target) == len(shape) + 1 and all(isinstance(v, int) for v in target) \
            and list(target[:-2]) == list(shape[:-1]) and target[-2] > 0 and target[-2] * target[-1] == shape[-1]:
        return target[-2]
    return None


def _arg_names(sizes: dict[str, int]) -> dict[str, int]:
    namer = Namer(dict(sizes))
    return {k: v for k, v in namer.dims.items() if k.isidentifier()}


def _apply(trace: Trace, step: ChainStep, tensor, number: int):
    before = len(trace.events)
    try:
        out = _call(step, tensor)
    except Exception as exc:  # torch's own error, kept word for word
        event = trace.events[-1] if len(trace.events) > before else None
        error = f"{type(exc).__name__}: {exc}"
        result = StepResult(number, step.text, None, event, error=error)
        if spec_for(step.method).views_to_a_shape and event is not None and event.inputs:
            from shapetrace.engine.viewfail import explain_view_error

            result.explanation = explain_view_error(event.inputs[0], _target(step), trace.namer)
        return result, tensor
    event = trace.events[-1] if len(trace.events) > before else None
    info = event.outputs[0] if event and event.outputs else trace.info(out)
    return StepResult(number, step.text, info, event), out


def _target(step: ChainStep) -> tuple[int, ...]:
    args = step.args or tuple(step.kwargs.values())
    if len(args) == 1 and isinstance(args[0], tuple):
        return args[0]
    return tuple(a for a in args if isinstance(a, int))


def _add_notes(trace: Trace, results: list[StepResult]) -> None:
    """The reshape trap: a copying reshape, and any diagnostic found at a step."""
    from shapetrace.engine.formatting import fmt_bytes

    by_event: dict[int, list] = {}
    for d in trace.diagnostics:
        if d.event is not None:
            by_event.setdefault(d.event, []).append(d)
    for r in results:
        e = r.event
        if e is None or r.error:
            continue
        if e.spec.family is Family.RESHAPE and e.copy_bytes:   # view never copies: reshape, flatten...
            r.notes.append(f"{e.op} copied {fmt_bytes(e.copy_bytes)} without saying so: a view is impossible "
                           "here (the strides do not chain), so view() would have raised instead")
        for d in by_event.get(e.index, []):  # events count from 0, steps from 1
            message = d.text.replace(f"{e.op} #{e.index}", f"step {r.number} ({e.op})")
            r.notes.append(f"{d.severity} {d.kind}: {message}")
