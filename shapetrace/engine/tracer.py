"""Record the tensor operations of a forward pass as plain data.

``trace()`` installs a :class:`torch.overrides.TorchFunctionMode` that sees each
Python-level call a user writes (``x.view(...)``, ``q @ k``, ``F.linear``),
runs it unchanged, and appends an :class:`Event` with the shapes, strides,
storage offsets, axis names and whether the result shares storage with an input.
No Rich here: rendering lives in ``shapetrace.render``.
"""

from __future__ import annotations

import functools
import linecache
import math
import os
import sys
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch.overrides import TorchFunctionMode

from shapetrace.engine import axes as ax
from shapetrace.engine import meta as _meta
from shapetrace.engine.axes import Axis, Namer
from shapetrace.engine.ops import (
    ADDITIVE,
    CHEAP,
    GETTERS,
    REGISTRY,
    SCORE_ADD,
    UNKNOWN,
    Call,
    OpSpec,
    operands_of,
    record_params,
)
from shapetrace.engine.propagate import fits
from shapetrace.engine.vocabulary import FUSED_PARTS, canonical, canonical_dims, projection_kind
from shapetrace.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.report import Report

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # shapetrace/
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
#: Files inside the package whose lines are model code a user should see.
MODEL_FILES = {os.path.join(_PKG_DIR, "attention", name) for name in ("reference.py", "variants.py", "broken.py")}
_STDLIB_DIR = os.path.dirname(os.path.abspath(os.__file__))
_SITE_DIRS = tuple(os.path.abspath(p) + os.sep for p in sys.path if p.endswith(("site-packages", "dist-packages")))
#: Code objects where the user's stack ends (the script runner's exec frame).
STACK_ROOTS: set = set()


@dataclass
class TensorInfo:
    """What torch says about one tensor, plus its axis names."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    storage_offset: int
    dtype: str
    contiguous: bool
    dims: tuple[str | None, ...]
    device: str = "cpu"
    nbytes: int = 0
    axes: tuple[Axis, ...] = field(default=(), repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "stride": list(self.stride), "dims": list(self.dims),
                "contiguous": self.contiguous, "storage_offset": self.storage_offset,
                "dtype": self.dtype}


@dataclass
class Event:
    """One recorded call: the op, where the user wrote it, and its operands and results."""

    index: int
    op: str
    source: str
    code: str
    function: str
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    args: str = ""
    view: bool = False
    noop: bool = False
    alloc_bytes: int = 0
    copy_bytes: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    stack: tuple[str, ...] = field(default=(), repr=False)
    error: str | None = None
    module: str = ""            # the module path it ran in (``h.3.attn``), "" outside any module
    projections: tuple[str | None, ...] = ()   # q, k or v: which projection each operand came from

    @property
    def output(self) -> TensorInfo | None:
        return self.outputs[0] if self.outputs else None

    @property
    def hidden_copies(self) -> list:
        """The copies torch makes inside this ``matmul`` without being asked (:mod:`.hidden`)."""
        if self.op != "matmul" or self.error:
            return []
        from shapetrace.engine.hidden import matmul_hidden_copies

        return matmul_hidden_copies(self)

    def to_dict(self) -> dict[str, Any]:
        out = self.output
        d: dict[str, Any] = {
            "index": self.index, "op": self.op, "source": self.source, "code": self.code,
            "function": self.function, "args": self.args,
            "inputs": [t.to_dict() for t in self.inputs],
            "output": out.to_dict() if out else None,
            "view": self.view, "noop": self.noop,
            "copy_bytes": self.copy_bytes, "alloc_bytes": self.alloc_bytes, "module": self.module,
        }
        if len(self.outputs) > 1:
            d["outputs"] = [t.to_dict() for t in self.outputs]
        if self.params:
            d["params"] = self.params
        hidden = self.hidden_copies
        if hidden:
            d["hidden_copies"] = [{"operand": c.operand, "before": c.before.to_dict(), "after": c.after.to_dict(),
                                   "bytes": c.nbytes, "reason": c.reason} for c in hidden]
        if self.error:
            d["error"] = self.error
        return d


class _Recorder(TorchFunctionMode):
    """The TorchFunctionMode that feeds a :class:`Trace`: every call goes through the op registry."""

    def __init__(self, trace: Trace):
        super().__init__()
        self.trace = trace

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        op = _op_name(func)
        if op is None:
            return func(*args, **kwargs)
        spec = REGISTRY.get(op, UNKNOWN)
        if spec.opens:
            return self._open(func, args, kwargs)
        if spec.name in ADDITIVE and self.trace._onto_scores(args):
            return self.trace._record(SCORE_ADD, func, args, kwargs)
        if spec.row:
            return self.trace._record(spec, func, args, kwargs)
        try:
            result = _call(op, func, args, kwargs)
        except Exception as exc:
            self.trace._note_failure(op, args, kwargs, exc)
            raise
        self.trace._carry_names(spec, args, kwargs, result)
        if spec.name in SCALING_OPS:
            self.trace._note_scaling(spec.name, args)
        return result

    def _open(self, func, args, kwargs):
        return run_opened(self, func, args, kwargs)


def run_opened(mode: TorchFunctionMode, func, args, kwargs):
    """Run a composite (``F.multi_head_attention_forward``) with ``mode`` active inside it, so each of
    its inner ops dispatches to the mode like any other code.

    The composite's own first line asks torch whether a mode wants the call (``has_torch_function``);
    that one question is answered "no", so the body runs instead of coming back to the mode.
    """
    module = sys.modules[func.__module__]
    original = module.has_torch_function
    asked = []

    def first_no(values):
        if not asked:
            asked.append(True)
            return False
        return original(values)

    module.has_torch_function = first_no
    try:
        with mode:
            return func(*args, **kwargs)
    finally:
        module.has_torch_function = original


def _call(op: str, func: Callable, args, kwargs):
    """Run ``func``; on meta tensors, compute ops get their result from :mod:`shapetrace.engine.meta`.

    (torch's own Python meta kernels would import ``torch._dynamo`` on first use.)
    """
    result = _meta.compute(op, func, args, kwargs)
    return func(*args, **kwargs) if result is _meta.NOT_HANDLED else result


def _op_name(func: Callable) -> str | None:
    name = getattr(func, "__name__", None)
    if name == "__get__":
        prop = getattr(getattr(func, "__self__", None), "__name__", None)
        return prop if prop in GETTERS else None
    if name is None or name in CHEAP:
        return None
    return name


def _module_hooks(trace: Trace) -> list:
    """Global module hooks that keep ``trace._modules`` (the path of the running module) current.

    Paths are relative to the outermost module the traced code calls (``h.3.attn``)."""
    from torch.nn.modules import module as nn_module

    def enter(module, _args):
        key = id(module)
        if key not in trace._module_names:
            prefix = trace._modules[-1] + "." if trace._modules else ""
            for name, sub in module.named_modules():
                trace._module_names.setdefault(id(sub), (prefix + name).strip("."))
        trace._modules.append(trace._module_names.get(key, type(module).__name__))
        trace._module_types.append(type(module).__name__)

    def leave(_module, _args, _result):
        if trace._modules:
            trace._modules.pop()
            trace._module_types.pop()

    return [nn_module.register_module_forward_pre_hook(enter),
            nn_module.register_module_forward_hook(leave, always_call=True)]


def _fused_index(call: Call, parts: tuple[str, ...], namer) -> str | None:
    """``proj[0]``/``select(0, 1)`` on a fused axis (``qkv``, size 3): which of q, k, v it picks."""
    if call.op == "select":
        dim, index = call.arg(1, "dim"), call.arg(2, "index")
    else:
        index = call.args[1]
        if isinstance(index, tuple):
            items = index
            ints = [(d, i) for d, i in enumerate(items) if isinstance(i, int)]
            plain = all(i is Ellipsis or i == slice(None) or isinstance(i, int) for i in items)
            if len(ints) != 1 or not plain or sum(i is Ellipsis for i in items) > 1:
                return None
            dim, index = ints[0]
            if any(i is Ellipsis for i in items[:dim]):   # counted from the end: x[..., 0, :]
                dim = len(call.in_axes[0]) - (len(items) - dim)
        elif isinstance(index, int):
            dim = 0
        else:
            return None
    axes = call.in_axes[0]
    if not isinstance(dim, int) or not isinstance(index, int) or not axes:
        return None
    size = axes[dim % len(axes)].size
    return parts[index % size] if size == len(parts) else None


def _einops_pattern() -> tuple[int, list[list[str]] | None] | None:
    """(call id, output groups) of the einops call running the current op (``'b h n d'`` ->
    ``[[b], [h], [n], [d]]``), read from einops' own ``reduce`` frame; None outside einops."""
    frame = sys._getframe(3)
    while frame is not None and _is_internal(frame.f_code.co_filename):
        if frame.f_code.co_name == "reduce" and f"{os.sep}einops{os.sep}" in frame.f_code.co_filename:
            pattern = frame.f_locals.get("pattern")
            return id(frame), (_einops_groups(pattern) if isinstance(pattern, str) else None)
        frame = frame.f_back
    return None


def _einops_groups(pattern: str) -> list[list[str]] | None:
    right = pattern.partition("->")[2]
    if "..." in right:
        return None
    groups, current = [], None
    for token in right.replace("(", " ( ").replace(")", " ) ").split():
        if token == "(":
            current = []
        elif token == ")":
            groups.append(current or [])
            current = None
        elif current is not None:
            current.append(token)
        else:
            groups.append([token])
    return groups


def _remove_mode(mode: TorchFunctionMode) -> None:
    """Take exactly ``mode`` off torch's mode stack, wherever it sits; the modes above it (the traced
    code's own, left entered) stay, in their order."""
    above = []
    while torch._C._len_torch_function_stack() > 0:
        top = torch._C._pop_torch_function_stack()
        if top is mode:
            break
        above.append(top)
    for other in reversed(above):
        torch._C._push_on_torch_function_stack(other)


class Trace:
    """The record of one traced run: events, axis names and diagnostics.

    Use :func:`shapetrace.trace` to make one. ``events`` is a list of
    :class:`Event`; ``diagnostics`` is computed from them on first access.
    In Jupyter a trace displays itself as the table (``_repr_mimebundle_``).

    >>> import torch, shapetrace
    >>> x = torch.zeros(2, 6, 512)
    >>> with shapetrace.trace(dims="B=2 T=6 D=512 H=8") as t:
    ...     heads = x.view(2, 6, 8, 64).transpose(1, 2)
    ...     merged = heads.contiguous().view(2, 6, 512)
    >>> t
    <Trace: 4 ops, 1 error, 0 warnings>
    >>> e = t.events[3]
    >>> e.op, e.output.dims, e.view
    ('view', ('B', '!H*T', '!H*T*d_k'), True)
    >>> t.diagnostics[0].kind
    'mixed-axis'
    """

    def __init__(self, dims: dict[str, int] | None = None, seed_order: Sequence[str] | None = None):
        sizes, declared = canonical_dims(dims or {})
        self.namer = Namer(sizes, declared_roles=declared)
        self.dims = self.namer.dims
        order = [canonical_dims({n: 1})[0].popitem()[0] for n in seed_order] if seed_order else list(sizes)
        self.seed_order = order
        self.name_mismatches = 0   # name functions whose axes disagreed with torch's shape (a bug: tested to be 0)
        self._sequences: dict[int, str] = {}   # id of each entering token tensor -> T or S
        self._attention_outputs: list[tuple[int, torch.Tensor]] = []   # checked for NaN rows at exit
        self.nan_rows: list[tuple[int, int | None, int]] | None = None
        self.nan_event: int | None = None
        self.scalings: list[dict[str, Any]] = []
        self.pattern_conflicts: list[tuple[int, str]] = []   # (event, pattern name) an einops name contradicts
        self._einops_pending: tuple | None = None   # numbers the scores (or q, k) were multiplied by
        self._tags: dict[int, tuple[weakref.ref, str]] = {}   # q / k / v / qkv / kv: which projection made it
        self._modules: list[str] = []          # the module path stack while the traced code runs
        self._module_types: list[str] = []
        self._module_names: dict[int, str] = {}
        self._hooks: list = []
        self.events: list[Event] = []
        self.exception: BaseException | None = None
        self.meta_note: str | None = None
        self.title: str = "traced forward pass"
        self.header: dict[str, Any] = {}
        self.result: Any = None
        self._names: dict[int, tuple[weakref.ref, tuple[Axis, ...]]] = {}
        self._mode: _Recorder | None = None
        self._diagnostics = None
        self.seeded_by_size = False
        self._unrecorded_failure: tuple[BaseException, Event] | None = None

    # -- context manager ---------------------------------------------------
    def __enter__(self) -> Trace:
        if self._mode is not None:
            raise UsageError("this trace is already recording: a trace can be entered once at a time "
                             "(start another with shapetrace.trace())")
        self._mode = _Recorder(self)
        self._mode.__enter__()
        _ACTIVE.append(self)
        self._hooks = _module_hooks(self)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        for hook in self._hooks:
            hook.remove()
        self._hooks, self._modules = [], []
        if self._mode is not None:
            _remove_mode(self._mode)   # exactly this recorder, even if the traced code left its own mode on top
        self._mode = None
        if self._einops_pending is not None:
            self._finish_pattern()
        self._check_values()
        self.exception = exc
        failed = self._unrecorded_failure
        if exc is not None and failed is not None and failed[0] is exc:
            failed[1].index = len(self.events)
            self.events.append(failed[1])
            self._diagnostics = None
        self._unrecorded_failure = None

    # -- names ---------------------------------------------------------------
    def set_names(self, tensor: torch.Tensor, names: Sequence[str | None]) -> None:
        """Name the axes of ``tensor`` explicitly (what :func:`shapetrace.name` calls)."""
        if len(names) != tensor.dim():
            from shapetrace.errors import UsageError
            raise UsageError(f"{len(names)} names given for a tensor with {tensor.dim()} axes "
                             f"(shape {list(tensor.shape)}); give one name per axis")
        axes = tuple(ax.root_axis(n, s) if n else ax.unknown_axis(s) for n, s in zip(names, tensor.shape))
        self._store(tensor, axes)

    def axes_of(self, tensor: torch.Tensor) -> tuple[Axis, ...]:
        entry = self._names.get(id(tensor))
        if entry is not None and entry[0]() is tensor:
            return entry[1]
        seeded = self._seed(tensor)
        if seeded is not None:
            return seeded
        return ax.unknown_axes(tuple(tensor.shape))

    def _seed(self, tensor: torch.Tensor) -> tuple[Axis, ...] | None:
        """Names for a tensor that enters the traced code (an input, not a parameter, not made here).

        Its shape is matched against the declared sizes: ``[B, T, D]``, ``[B, T]`` (token ids),
        ``[B, H, T, d_k]``... The first token tensor to enter is ``T``; with ``S`` declared, a
        second, different one is ``S`` (cross-attention), even when the two lengths are equal.
        """
        shape = tuple(tensor.shape)
        if len(shape) < 2 or isinstance(tensor, torch.nn.Parameter) or not self.dims:
            return None
        names = self._seed_names(shape, self._sequence_name(tensor, shape))
        if names is None:
            return None
        axes = tuple(ax.root_axis(n, s) for n, s in zip(names, shape))
        self._store(tensor, axes)
        if "T" in names or "S" in names:
            self._sequences.setdefault(id(tensor), "S" if "S" in names else "T")
        self.seeded_by_size = True
        return axes

    def _sequence_name(self, tensor: torch.Tensor, shape: tuple[int, ...]) -> str:
        """``T`` for the first sequence to enter; ``S`` for a second one when ``S`` is declared."""
        if id(tensor) in self._sequences:
            return self._sequences[id(tensor)]
        if "S" in self.dims and "T" in self._sequences.values():
            return "S" if self.dims["S"] in shape else "T"
        if "T" not in self.dims or (self.dims["T"] not in shape and "S" in self.dims):
            return "S"
        return "T"

    def _seed_names(self, shape: tuple[int, ...], seq: str) -> list[str] | None:
        patterns = [self.seed_order[:len(shape)]]
        leads = (["B", seq], ["B", "H", seq], ["B", "H_kv", seq], ["B", seq, "H"], ["B", seq, "H_kv"], [seq, "B"])
        patterns += [["B", seq, seq], ["B", "H", seq, seq]]   # masks and scores: a token axis twice
        for lead in leads:   # batch-first before seq-first: [T, B, D] is named only where [B, T, D] does not fit
            for tail in ([], ["D"], ["d_k"], ["D_kv"], ["3*D"], ["2*D"], ["H*d_k"]):
                patterns.append(lead + tail)
        for names in patterns:
            if len(names) == len(shape) and all(self.namer.size_of(n) == s for n, s in zip(names, shape)):
                if len(set(names)) == len(names) or names.count(seq) == 2 and len(set(names)) == len(names) - 1:
                    return names
        return None

    def _store(self, tensor: torch.Tensor, axes: tuple[Axis, ...]) -> None:
        key = id(tensor)
        self._names[key] = (weakref.ref(tensor, lambda _r, k=key: self._names.pop(k, None)), axes)

    # -- provenance: which projection a tensor came from ----------------------
    def tag_of(self, tensor: torch.Tensor) -> str | None:
        entry = self._tags.get(id(tensor))
        return entry[1] if entry is not None and entry[0]() is tensor else None

    def _tag(self, tensor: torch.Tensor, tag: str | None) -> None:
        if tag is not None:
            key = id(tensor)
            self._tags[key] = (weakref.ref(tensor, lambda _r, k=key: self._tags.pop(k, None)), tag)

    def _tag_outputs(self, call: Call, outs: Sequence[torch.Tensor], out_axes) -> None:
        """q, k and v from the projection modules that made them (``q_proj``, ``c_attn`` then a split
        into three, ``proj[0]`` of a packed in-projection), carried through views and elementwise ops."""
        if not outs:
            return
        if call.op in ("linear", "addmm"):
            self._tag(outs[0], self._projection_here(call))
            return
        tags = {t for t in (self.tag_of(i) for i in call.inputs) if t}
        if len(tags) != 1 or call.op in ("matmul", "bmm", "mm", "baddbmm", "einsum", "scaled_dot_product_attention"):
            return
        tag = tags.pop()
        parts = FUSED_PARTS.get(tag)
        if parts and len(outs) == len(parts) and call.op in ("split", "chunk", "unbind", "tensor_split"):
            for out, part in zip(outs, parts):
                self._tag(out, part)
            return
        if parts and call.op in ("__getitem__", "select"):
            self._tag(outs[0], _fused_index(call, parts, self.namer))
            return
        for out in outs:
            self._tag(out, tag)

    def _projection_here(self, call: Call) -> str | None:
        """The kind of projection a linear is, from the module it runs in (or torch's packed MHA weight)."""
        where = self._modules[-1] if self._modules else ""
        kind = projection_kind(where) if where else None
        if kind is None and self._module_types and self._module_types[-1] == "MultiheadAttention":
            weight = call.arg(1, "weight")
            if getattr(weight, "dim", lambda: 0)() == 2 and weight.shape[0] == 3 * weight.shape[1]:
                kind = "qkv"
        return kind

    def _onto_scores(self, args) -> bool:
        """Is one operand a tensor of attention scores (query and key axes) and the other a tensor?"""
        tensors = [a for a in args[:2] if isinstance(a, torch.Tensor)]
        return len(tensors) == 2 and any({"query", "key"} <= {a.role for a in self.axes_of(t)} for t in tensors)

    def _note_scaling(self, op: str, args) -> None:
        """``scores / s`` or ``q * s`` by a plain number: kept (as the factor applied) for the scale check."""
        if len(args) != 2:
            return
        tensor, number = (args[0], args[1]) if isinstance(args[0], torch.Tensor) else (args[1], args[0])
        if not isinstance(tensor, torch.Tensor) or isinstance(number, torch.Tensor) or \
                not isinstance(number, (int, float)) or number == 0:
            return
        roles = {a.role for a in self.axes_of(tensor)}
        on = "scores" if {"query", "key"} <= roles else self.tag_of(tensor)
        if on in ("scores", "q", "k"):
            factor = 1 / number if "div" in op else float(number)
            self.scalings.append({"event": max(len(self.events) - 1, 0), "factor": factor, "on": on})

    def _carry_names(self, spec: OpSpec, args, kwargs, result) -> None:
        """Ops without a row: elementwise ones pass names on by broadcasting; unknown ones name nothing.

        Either way a result computed from other tensors is marked as made inside the trace, so it is
        never seeded by size; a fresh tensor (``torch.randn(B, T, D)``, no tensor in) is an input."""
        if not any(True for _ in _tensors_in(args, kwargs)):
            return
        for out in _tensor_outputs(result):
            if any(out is t for t in _tensors_in(args, kwargs)):
                continue   # an in-place op returns its own input: its names stay
            if spec.names is None:
                self._store(out, ax.unknown_axes(tuple(out.shape)))
                continue
            inputs = operands_of(spec, args, kwargs)
            call = Call(spec.name, args, kwargs, inputs, [self.axes_of(t) for t in inputs], [tuple(out.shape)],
                        self.namer)
            self._store(out, self._checked(spec, call, [out])[0])

    # -- recording -----------------------------------------------------------
    def _record(self, spec: OpSpec, func, args, kwargs):
        inputs = operands_of(spec, args, kwargs)
        einops_call = self._einops_step(inputs)
        in_axes = [self.axes_of(t) for t in inputs]
        frame_info = _user_frame()
        params = record_params(spec, args, kwargs)
        try:
            result = _call(spec.name, func, args, kwargs)
        except Exception as exc:
            self._append(spec, frame_info, inputs, in_axes, [], [], args, kwargs, params, error=exc)
            raise
        outs = _tensor_outputs(result)
        call = Call(spec.name, args, kwargs, inputs, in_axes, [tuple(o.shape) for o in outs], self.namer, params)
        out_axes = self._checked(spec, call, outs)
        for o, a in zip(outs, out_axes):
            if not (spec.inplace and any(o is t for t in inputs)):
                self._store(o, a)
        self._tag_outputs(call, outs, out_axes)
        if spec.name in VALUE_CHECKED and outs and outs[0].device.type != "meta":
            self._attention_outputs.append((len(self.events), outs[0]))   # read once, after the run
        self._append(spec, frame_info, inputs, in_axes, outs, out_axes, args, kwargs, params, result=result)
        self._einops_after(einops_call, outs)
        return result

    def _checked(self, spec: OpSpec, call: Call, outs: Sequence[torch.Tensor]) -> list[tuple[Axis, ...]]:
        """The registry's names for each output, kept only where they fit torch's own shape."""
        unnamed = [ax.unknown_axes(tuple(o.shape)) for o in outs]
        if spec.names is None or not outs:
            return unnamed
        try:
            found = spec.names(call)
        except (IndexError, KeyError, TypeError, ValueError, ZeroDivisionError):
            found = None   # arguments in a form the name rule does not read: unnamed, never guessed
        found = found if isinstance(found, list) else [found]
        checked = []
        for axes, out, fallback in zip(found + [None] * len(outs), outs, unnamed):
            if axes is not None and fits(axes, tuple(out.shape)):
                checked.append(tuple(axes))
            else:
                self.name_mismatches += axes is not None
                checked.append(fallback)
        return checked

    def _note_failure(self, op: str, args, kwargs, exc: Exception) -> None:
        """An op without a row of its own (``+``, ``/``, ``where``...) raised: keep it as a failed
        event, added to the table only if this exception ends the traced block."""
        inputs = list(_tensors_in(args, kwargs))
        in_axes = [self.axes_of(t) for t in inputs]
        source, code, function, stack = _user_frame()
        event = Event(index=-1, op=op.strip("_") or op, source=source, code=code, function=function,
                      stack=stack, inputs=[self._info(t, a) for t, a in zip(inputs, in_axes)], outputs=[],
                      args=_format_args(op, args, kwargs), error=f"{type(exc).__name__}: {exc}")
        self._unrecorded_failure = (exc, event)

    def _append(self, spec: OpSpec, frame_info, inputs, in_axes, outs, out_axes, args, kwargs, params,
                result=None, error: BaseException | None = None) -> None:
        source, code, function, stack = frame_info
        event = Event(
            index=len(self.events), op=spec.name, source=source, code=code, function=function,
            stack=stack, inputs=[self._info(t, a) for t, a in zip(inputs, in_axes)],
            outputs=[self._info(t, a) for t, a in zip(outs, out_axes)],
            args=_format_args(spec.name, args, kwargs), params=params,
            module=self._modules[-1] if self._modules else "",
            projections=tuple(self.tag_of(t) for t in inputs),
        )
        if error is not None:
            event.error = f"{type(error).__name__}: {error}"
        else:
            _memory_verdict(event, spec, inputs, outs)
        self.events.append(event)
        self._diagnostics = None

    def _info(self, t: torch.Tensor, axes: tuple[Axis, ...]) -> TensorInfo:
        if len(axes) != t.dim() or ax.sizes_of(axes) != tuple(t.shape):
            axes = ax.unknown_axes(tuple(t.shape))
        return TensorInfo(
            shape=tuple(t.shape), stride=tuple(t.stride()), storage_offset=t.storage_offset(),
            dtype=str(t.dtype).replace("torch.", ""), contiguous=t.is_contiguous(),
            dims=tuple(self.namer.label(a) for a in axes), device=t.device.type,
            nbytes=t.numel() * t.element_size(), axes=axes,
        )

    def _einops_step(self, inputs) -> tuple | None:
        """Before an op: the einops call it belongs to. The ops of one call form a chain (each reads
        the last one's output); when a chain ends, its last output is the pattern's output, and the
        pattern's names are applied to it before anything reads it."""
        call = _einops_pattern() if "einops" in sys.modules else None
        pending = self._einops_pending
        chained = pending is not None and call is not None and call[0] == pending[0] and inputs and \
            inputs[0] is pending[1]()
        if pending is not None and not chained:
            self._finish_pattern()
        return call

    def _einops_after(self, call: tuple | None, outs) -> None:
        if call is not None and len(outs) == 1:
            self._einops_pending = (call[0], weakref.ref(outs[0]), len(self.events) - 1, call[1])

    def _finish_pattern(self) -> None:
        """The pattern's output: an axis it calls heads that holds tokens is a contradiction
        (``'b (h n) d -> b h n d'``); an axis provenance left unnamed takes the pattern's name where
        that name is a declared one of the same size (``h`` -> ``H``)."""
        _, tensor_ref, index, groups = self._einops_pending
        self._einops_pending = None
        event = self.events[index] if index < len(self.events) else None
        if groups is None or event is None or not event.outputs or len(groups) != len(event.outputs[0].axes):
            return
        info = event.outputs[0]
        for group, axis in zip(groups, info.axes):
            if len(group) == 1 and canonical(group[0]) == "H" and any(
                    self.namer.is_token_root(a.root) for a in axis.atoms):
                self.pattern_conflicts.append((index, group[0]))
        axes = tuple(self._pattern_axis(group, axis) for group, axis in zip(groups, info.axes))
        if axes != info.axes:
            event.outputs[0] = self._info_like(info, axes)
            tensor = tensor_ref()
            if tensor is not None:
                self._store(tensor, axes)

    def _pattern_axis(self, group: list[str], axis: Axis) -> Axis:
        if not axis.atoms or any(a.root != ax.UNKNOWN for a in axis.atoms):
            return axis
        names = [canonical(w) for w in group if not w.isdigit()]
        sizes = [self.namer.size_of(n) for n in names]
        if not names or None in sizes or math.prod(sizes) != axis.size:
            return axis
        return ax.Axis(tuple(ax.Atom(n, s, 1, s) for n, s in zip(names, sizes) if s != 1))

    def _info_like(self, info: TensorInfo, axes: tuple[Axis, ...]) -> TensorInfo:
        from dataclasses import replace

        return replace(info, dims=tuple(self.namer.label(a) for a in axes), axes=axes)

    def _check_values(self) -> None:
        """NaN rows of every traced softmax or SDPA output, computed once after the run (never per op,
        so a GPU run is not synchronised while it records)."""
        checked, self._attention_outputs = self._attention_outputs, []
        for index, out in checked:
            rows = _nan_rows(out)
            if rows:
                self.nan_rows, self.nan_event = rows, index
                return
        if checked:
            self.nan_rows = []

    # -- results -------------------------------------------------------------
    @property
    def diagnostics(self):
        """Structured findings (:class:`shapetrace.engine.diagnostic.Diagnostic`), errors first.

        >>> import torch, shapetrace
        >>> with shapetrace.trace(dims="B=2 T=6 D=512 H=8") as t:
        ...     s = torch.zeros(2, 8, 6, 6).softmax(dim=-1)
        >>> t.diagnostics
        []
        """
        if self._diagnostics is None:
            from shapetrace.engine.diagnose import diagnose
            self._diagnostics = diagnose(self)
        return self._diagnostics

    def report(self) -> Report:
        """Everything this run found, as one plain :class:`~shapetrace.engine.report.Report`."""
        from shapetrace.engine.report import Report

        return Report(
            dims=dict(self.dims), events=list(self.events), diagnostics=list(self.diagnostics),
            nan_rows=getattr(self, "nan_rows", None), header=dict(self.header),
            notes=[n for n in (self.meta_note, getattr(self, "value_note", None)) if n],
            exception=self.exception, title=self.title,
        )

    def to_dict(self) -> dict[str, Any]:
        return self.report().to_dict()

    def to_json(self, indent: int | None = 2) -> str:
        """The trace as JSON (schema version 1), as ``shapetrace run --json`` prints it.

        >>> import json, torch, shapetrace
        >>> with shapetrace.trace(dims="B=2 T=6 D=512 H=8") as t:
        ...     q = torch.zeros(2, 6, 512).view(2, 6, 8, 64)
        >>> data = json.loads(t.to_json())
        >>> sorted(data), data["events"][0]["output"]["dims"]
        (['diagnostics', 'dims', 'events', 'version'], ['B', 'T', 'H', 'd_k'])
        """
        import json
        return json.dumps(self.to_dict(), indent=indent)

    def __repr__(self) -> str:
        errors = sum(d.severity == "error" for d in self.diagnostics)
        warnings = sum(d.severity == "warning" for d in self.diagnostics)
        return (f"<Trace: {len(self.events)} op{'s' * (len(self.events) != 1)}, "
                f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}>")

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)


_ACTIVE: list[Trace] = []


def active_trace() -> Trace | None:
    return _ACTIVE[-1] if _ACTIVE else None


def name_axes(tensor: Any, names: str | Sequence[str | None]) -> Any:
    """Name ``tensor``'s axes in the active trace (nothing happens outside one); return ``tensor``.

    ``names`` is ``"B T D"`` or a list; ``_``, ``?`` or ``None`` leave an axis unnamed.
    This is what :func:`shapetrace.name` calls.
    """
    active = active_trace()
    if active is not None:
        parts = names.split() if isinstance(names, str) else list(names)
        active.set_names(tensor, [None if p in (None, "_", "?") else p for p in parts])
    return tensor


# ---------------------------------------------------------------------------
# helpers: operands, frames, memory
# ---------------------------------------------------------------------------

def _tensors_in(args, kwargs) -> Iterator[torch.Tensor]:
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (x for x in a if isinstance(x, torch.Tensor))


#: elementwise ops that scale scores by a number (the 1/√d_k of attention)
SCALING_OPS = frozenset({"div", "true_divide", "__truediv__", "__itruediv__", "div_", "mul", "__mul__",
                         "__rmul__", "__imul__", "mul_"})
#: ops whose outputs are attention weights or outputs: an all-NaN row there is a query with no key left
VALUE_CHECKED = frozenset({"softmax", "scaled_dot_product_attention"})


def _nan_rows(out: torch.Tensor) -> list[tuple[int, int | None, int]]:
    """(batch, head, query) of each row that is NaN all along the last axis (head None for 3-d)."""
    if out.dim() < 3 or not out.is_floating_point():
        return []
    with torch.no_grad():
        dead = torch.isnan(out).all(dim=-1)
        rows = dead.reshape(dead.shape[0], -1, dead.shape[-1]).nonzero().tolist()
    if out.dim() == 3:
        return [(b, None, q) for b, _h, q in rows]
    return [(b, h, q) for b, h, q in rows]


def _tensor_outputs(result) -> list[torch.Tensor]:
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)):
        return [r for r in result if isinstance(r, torch.Tensor)]
    return []


_INTERNAL_CACHE: dict[str, bool] = {}


def _is_internal(filename: str) -> bool:
    hit = _INTERNAL_CACHE.get(filename)
    if hit is None:
        path = os.path.abspath(filename) if not filename.startswith("<") else filename
        hit = (path.startswith(_TORCH_DIR + os.sep) or f"{os.sep}einops{os.sep}" in path
               or (path.startswith(_PKG_DIR + os.sep) and path not in MODEL_FILES
                   and f"{os.sep}lessons{os.sep}" not in path)
               or path.startswith("<frozen") or _is_stdlib(path))
        _INTERNAL_CACHE[filename] = hit
    return hit


def _is_stdlib(path: str) -> bool:
    """Python's own library (runpy, functools...) is plumbing; site-packages is user code."""
    return path.startswith(_STDLIB_DIR + os.sep) and not path.startswith(_SITE_DIRS) \
        and f"{os.sep}site-packages{os.sep}" not in path


def _user_frame() -> tuple[str, str, str, tuple[str, ...]]:
    frame = sys._getframe(3)
    while frame is not None and _is_internal(frame.f_code.co_filename):
        frame = None if frame.f_code in STACK_ROOTS else frame.f_back
    if frame is None:
        return "?", "", "", ()
    filename, lineno = frame.f_code.co_filename, frame.f_lineno
    code = linecache.getline(filename, lineno).strip()
    stack = []
    f = frame
    while f is not None and f.f_code not in STACK_ROOTS:
        if not _is_internal(f.f_code.co_filename):
            stack.append(getattr(f.f_code, "co_qualname", f.f_code.co_name))
        f = f.f_back
    return f"{display_path(filename)}:{lineno}", code, stack[0] if stack else "", tuple(stack)


def display_path(filename: str) -> str:
    """``shapetrace/attention/reference.py`` for our model code, a path relative to the cwd when under it."""
    return _display_path(filename, os.getcwd())


@functools.lru_cache(maxsize=1024)
def _display_path(filename: str, cwd: str) -> str:
    path = os.path.abspath(filename) if not filename.startswith("<") else filename
    if path.startswith(_PKG_DIR + os.sep):
        return "shapetrace/" + os.path.relpath(path, _PKG_DIR).replace(os.sep, "/")
    if path.startswith(cwd + os.sep):
        return os.path.relpath(path, cwd)
    return path


def _storage_ptr(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except Exception:
        return -1


def _shares_storage(out: torch.Tensor, inputs: Sequence[torch.Tensor]) -> bool:
    """Real tensors: same storage pointer. Meta tensors (pointers all 0): the view base."""
    if out.device.type == "meta":
        base = out._base if out._is_view() else None
        if base is None:
            return any(out is i for i in inputs)
        return any(base is i or base is i._base or out is i for i in inputs)
    ptr = _storage_ptr(out)
    return ptr not in (0, -1) and any(_storage_ptr(i) == ptr for i in inputs)


def _memory_verdict(event: Event, spec: OpSpec, inputs, outs) -> None:
    """View, copy, new buffer or no-op, from the registry's kind and torch's storage."""
    if not outs:
        return
    if all(any(o is i for i in inputs) for o in outs):
        event.view, event.noop = True, True   # contiguous() on a contiguous tensor, eval dropout, in-place fill
        return
    if spec.memory in ("view", "maybe") and all(_shares_storage(o, inputs) for o in outs):
        event.view = True
        return
    event.alloc_bytes = sum(o.numel() * o.element_size() for o in outs)
    if spec.memory in ("view", "maybe", "copy"):
        event.copy_bytes = event.alloc_bytes


# ---------------------------------------------------------------------------
# argument formatting
# ---------------------------------------------------------------------------

def _format_args(op: str, args, kwargs) -> str:
    parts = []
    skip_first = op not in ("cat", "stack", "einsum", "linear")
    for a in (args[1:] if skip_first else args):
        parts.append(_short(a))
    parts += [f"{k}={_short(v)}" for k, v in kwargs.items()]
    return ", ".join(p for p in parts if p)


def _short(a) -> str:
    if isinstance(a, torch.Tensor):
        return "tensor[" + ", ".join(map(str, a.shape)) + "]"
    if isinstance(a, (list, tuple)):
        inner = ", ".join(_short(x) for x in a)
        return f"({inner})" if isinstance(a, tuple) else f"[{inner}]"
    if isinstance(a, slice):
        s = "" if a.start is None else str(a.start)
        e = "" if a.stop is None else str(a.stop)
        return f"{s}:{e}" + ("" if a.step is None else f":{a.step}")
    if a is None:
        return "None"
    if a is Ellipsis:
        return "..."
    if isinstance(a, float) and math.isinf(a):
        return "-inf" if a < 0 else "inf"
    return repr(a) if not isinstance(a, (int, float, str, bool)) else str(a) if not isinstance(a, str) else repr(a)
