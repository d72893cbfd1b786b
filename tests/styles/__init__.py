"""Correct attention modules written in the styles of public code, and the checks the tests share
(tests/engine/test_styles.py, tests/engine/test_bug_classes.py, tests/engine/test_op_corpus.py).

Each style module exposes:

- ``SIZES``: a list of dims dicts (``{"B": 2, "T": 6, "D": 32, "H": 4}``), including equal sizes;
  they are passed as they are to ``shapetrace.trace(dims=...)``.
- ``build(dims) -> (module, inputs)``: a module in eval mode and the tuple of its inputs.
- optionally ``NAMES``: one ``shapetrace.name`` string (or None) per input, for inputs whose
  layout the dims cannot tell (seq-first ``[T, B, D]``).

A line whose comment ends in ``[tag]`` is a key tensor: the output of the *last* event recorded
on that line must carry exactly the names in the comment's parentheses (``# (B, H, T, d_k) [q]``).
Several parenthesised groups compare with the event's first outputs in order. In a group,
``_`` is an axis with no name, ``?`` any name (not checked) and ``B*?`` a product label
that contains ``B`` (Swin's window batch).
"""

from __future__ import annotations

import importlib
import inspect
import re
from fractions import Fraction
from types import ModuleType

import torch
from torch.overrides import TorchFunctionMode

from shapetrace.engine.ops import spec_of_callable
from shapetrace.engine.tracer import run_opened

STYLE_NAMES = [
    "nanogpt", "mingpt", "annotated", "lucidrains", "mqa", "linear_attention", "rope", "alibi", "swin",
    "bloom", "neox", "cross_attention", "seq_first", "t5", "sdpa_gqa", "mha_batch_first", "mha_seq_first",
]


def load(name: str) -> ModuleType:
    return importlib.import_module(f"tests.styles.{name}")


# -- tags: the expected names of key tensors -----------------------------------------------------

_TAG = re.compile(r"#(?P<comment>.*)\[(?P<tag>\w+)\]\s*$")
_GROUP = re.compile(r"\(([^()]*)\)")


def tags(module: ModuleType) -> list[tuple[str, int, list[tuple[str, ...]]]]:
    """(tag, line number, expected name groups) for every tagged line of ``module``'s source."""
    lines = inspect.getsource(module).splitlines()
    found = []
    for number, line in enumerate(lines, start=1):
        m = _TAG.search(line)
        if m:
            groups = [tuple(p.strip() for p in g.split(",")) for g in _GROUP.findall(m.group("comment"))]
            assert groups, f"tag [{m.group('tag')}] on line {number} has no (names)"
            found.append((m.group("tag"), number, groups))
    return found


def events_on_line(trace, module: ModuleType, line: int) -> list:
    path = inspect.getsourcefile(module).replace("\\", "/")
    tail = "/".join(path.split("/")[-2:])  # styles/nanogpt.py
    out = []
    for e in trace.events:
        where, _, number = e.source.rpartition(":")
        if number.isdigit() and int(number) == line and where.replace("\\", "/").endswith(tail):
            out.append(e)
    return out


def names_match(expected: tuple[str, ...], actual: tuple | None) -> bool:
    if actual is None or len(expected) != len(actual):
        return False
    for want, got in zip(expected, actual):
        if want == "?":
            continue
        if want == "_":
            if got is not None:
                return False
        elif want.endswith("*?"):
            factors = got.split("*") if isinstance(got, str) else []
            if want[:-2] not in factors or len(factors) < 2:
                return False
        elif want != got:
            return False
    return True


# -- the property: no name contradicts its size ------------------------------------------------

_LABEL = re.compile(r"[A-Za-z_]\w*|\d+")


def declared_sizes(dims: dict[str, int], trace=None) -> dict[str, int]:
    """The sizes names stand for: the dims given, ``d_k`` = D / H when not given, and the trace's own."""
    sizes = dict(dims)
    if "d_k" not in sizes and "D" in sizes and "H" in sizes and sizes["D"] % sizes["H"] == 0:
        sizes["d_k"] = sizes["D"] // sizes["H"]
    for key, value in dict(getattr(trace, "dims", None) or {}).items():
        sizes.setdefault(key, value)
    return sizes


def label_problem(label: str, size: int, sizes: dict[str, int]) -> str | None:
    """Why ``label`` on an axis of ``size`` is a name that may be wrong, or None.

    A bare declared name must equal the size; a product/quotient of declared names and integers
    must evaluate to it; a product with undeclared factors (``B*nW``) must be divisible by its
    declared factors. Labels with other characters (``!T*H``, marked mixed) are not names.
    """
    if label in sizes:
        return None if sizes[label] == size else f"{label!r} is {sizes[label]}, the axis is {size}"
    parts = re.split(r"([*/])", label)
    tokens, ops = parts[0::2], parts[1::2]
    if not all(_LABEL.fullmatch(tok) for tok in tokens):
        return None
    known = [tok.isdigit() or tok in sizes for tok in tokens]

    def value(tok: str) -> int:
        return int(tok) if tok.isdigit() else sizes[tok]

    if all(known):
        total = Fraction(value(tokens[0]))
        for op, tok in zip(ops, tokens[1:]):
            total = total * value(tok) if op == "*" else total / value(tok)
        return None if total == size else f"{label!r} is {total}, the axis is {size}"
    if "/" in ops:
        return None
    factor = 1
    for tok, ok in zip(tokens, known):
        factor *= value(tok) if ok else 1
    return None if size % factor == 0 else f"{label!r} has a factor {factor}, the axis is {size}"


def contradictions(trace, dims: dict[str, int]) -> list[str]:
    """Every axis of every recorded tensor whose name contradicts its declared size."""
    sizes = declared_sizes(dims, trace)
    bad = []
    for e in trace.events:
        for side, infos in (("input", e.inputs), ("output", e.outputs)):
            for k, info in enumerate(infos):
                if info.dims is None:
                    continue
                for axis, (label, size) in enumerate(zip(info.dims, info.shape)):
                    if label is None:
                        continue
                    problem = label_problem(label, size, sizes)
                    if problem:
                        bad.append(f"event {e.index} {e.op} {side} {k} axis {axis} of {info.shape}: {problem}"
                                   f" (names {info.dims}, {e.code!r})")
    return bad


# -- records against torch -------------------------------------------------------------------------

class Capture(TorchFunctionMode):
    """Entered inside the trace: the real operands and results of every call the trace is shown.

    It assumes one event per call the user makes; a tracer that also records calls made inside a
    composite function (by entering its mode again) records calls this mode never sees.
    """

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[str, list, list]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        spec = spec_of_callable(func)   # by the function: F.unfold is not Tensor.unfold
        if spec is not None and spec.opens:   # the tracer records its inner ops: see them too
            return run_opened(self, func, args, kwargs)
        out = func(*args, **kwargs)
        operands = tensors_in((args, kwargs))
        if spec is not None and spec.reversed:   # a.__rmatmul__(b) is b @ a
            operands = operands[::-1]
        self.calls.append((spec.name if spec is not None else op_name(func), operands, tensors_in(out)))
        return out


def op_name(func) -> str:
    name = getattr(func, "__name__", "?")
    if name == "__get__":
        name = getattr(getattr(func, "__self__", None), "__name__", name)
    return name


def tensors_in(obj) -> list:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, (list, tuple)):
        return [t for item in obj for t in tensors_in(item)]
    return []


def layout(t: torch.Tensor) -> tuple:
    try:
        return tuple(t.shape), tuple(t.stride()), t.storage_offset()
    except (RuntimeError, NotImplementedError):   # a layout without strides
        return tuple(t.shape), None, None


def storage(t: torch.Tensor) -> tuple[int, int] | None:
    try:
        s = t.untyped_storage()
        return s.data_ptr(), s.nbytes()
    except (RuntimeError, NotImplementedError):
        return None


def event_problems(t, calls) -> list[str]:
    """Each event against the torch call it records (matched in order by op name)."""
    bad, at = [], 0
    for e in t.events:
        match = next((j for j in range(at, len(calls)) if calls[j][0].strip("_") == e.op.strip("_")), None)
        if match is None:
            bad.append(f"event {e.index} {e.op}: no torch call of that name to match")
            continue
        at = match + 1
        _, inputs, outs = calls[match]
        if e.error:
            continue
        if len(e.outputs) != len(outs):
            bad.append(f"event {e.index} {e.op}: {len(e.outputs)} outputs recorded, torch returned {len(outs)}")
            continue
        for k, (info, real) in enumerate(zip(e.outputs, outs)):
            shape, stride, offset = layout(real)
            recorded = (tuple(info.shape), tuple(info.stride) if stride is not None else None,
                        info.storage_offset if offset is not None else None)
            if recorded != (shape, stride, offset):
                bad.append(f"event {e.index} {e.op} output {k}: recorded {recorded}, torch {(shape, stride, offset)}")
            elif stride is not None and info.contiguous != real.is_contiguous():
                bad.append(f"event {e.index} {e.op} output {k}: contiguous {info.contiguous}, torch says otherwise")
        if e.view:
            ptrs = {p[0] for p in map(storage, inputs) if p}
            for k, out in enumerate(outs):
                s = storage(out)
                if s and s[1] and s[0] not in ptrs:
                    bad.append(f"event {e.index} {e.op} output {k}: marked a view, but shares no input's storage")
    return bad
