"""The plain data a trace is made of: :class:`TensorInfo` (one tensor) and :class:`Event` (one call).

Both are dataclasses, and the tracer fills them cheaply while the traced code runs: what torch
says (shapes, strides, offsets, storage) is read at call time, since it can change afterwards;
what is only *derived* from it is resolved on first read and then kept:

* a tensor's axis labels (``dims``) from its axes and the trace's :class:`~.namer.Namer`;
* an event's ``source``, ``code``, ``function`` and ``stack`` from the code objects and line
  number of the call site (:mod:`.sites`);
* an event's ``args`` text from the arguments, frozen at call time (tensors as their shapes).

Nothing here imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from shapetrace.engine.axes import Axis
from shapetrace.engine.ops import OpSpec, spec_for


class _Lazy:
    """A dataclass field whose value, when not given (or given as None), is computed by
    ``self.<resolve>()`` on first read. The resolver sets the field on the instance, and the instance's
    own value wins over this (non-data) descriptor from then on: a later read is a plain attribute read."""

    def __init__(self, name: str, resolve: str):
        self.name, self.resolve = name, resolve

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        getattr(obj, self.resolve)()
        return obj.__dict__[self.name]


def _unset_lazy(obj, names: tuple[str, ...]) -> None:
    """Fields given as None are left to their resolver."""
    values = obj.__dict__
    for name in names:
        if name in values and values[name] is None:
            del values[name]


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
    namer: Any = field(default=None, repr=False, compare=False)   # labels ``dims`` when they are left None

    def to_dict(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "stride": list(self.stride), "dims": list(self.dims),
                "contiguous": self.contiguous, "storage_offset": self.storage_offset,
                "dtype": self.dtype}

    def __post_init__(self) -> None:
        _unset_lazy(self, _INFO_LAZY)

    def _resolve_dims(self) -> None:
        namer = self.namer
        labels = namer.dims_of(self.axes) if namer is not None and self.axes else ()
        self.dims = self.__dict__["_dims"] = labels if len(labels) == len(self.shape) else (None,) * len(self.shape)


_INFO_LAZY = ("dims",)
TensorInfo.dims = _Lazy("dims", "_resolve_dims")   # type: ignore[assignment]
_new_object = object.__new__


def new_info(shape, stride, offset, dtype, contiguous, device, nbytes, axes, namer) -> TensorInfo:
    """``TensorInfo(...)`` with ``dims`` left to resolve, made without the dataclass ``__init__`` (the
    inference makes two or three per event)."""
    info = _new_object(TensorInfo)
    info.__dict__.update({"shape": shape, "stride": stride, "storage_offset": offset, "dtype": dtype,
                          "contiguous": contiguous, "device": device, "nbytes": nbytes, "axes": axes,
                          "namer": namer})   # (a dict display: no keyword arguments to gather)
    return info


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
    #: for each input, ``(event index, output position)`` of the row that made it (None: it entered, or
    #: was made by a call without a row that changed its shape)
    sources: tuple[tuple[int, int] | None, ...] = field(default=(), repr=False, compare=False)
    site: Any = field(default=None, repr=False, compare=False)        # a :class:`.sites.Site`, resolved lazily
    raw_args: Any = field(default=None, repr=False, compare=False)    # (op, frozen args, frozen kwargs)
    #: the copies torch makes inside this ``matmul`` without being asked (:class:`.hidden.HiddenCopy`),
    #: worked out once the trace's inference is final (:func:`.hidden.note_hidden_copies`)
    hidden_copies: tuple = field(default=(), repr=False, compare=False)
    #: what the registry knows of the op (:class:`~.opspec.OpSpec`): the recorded call's own; for an
    #: event made from a name (JSON, a test), the spec of that name
    spec: OpSpec = field(default=None, repr=False, compare=False)   # type: ignore[assignment]
    #: for each input, the rows of reductions (``sum``, ``mean``...) whose results entered it through calls
    #: without a row (``s - s.logsumexp(1, keepdim=True)``), which ``sources`` does not follow
    joined: tuple[frozenset[int], ...] = field(default=(), repr=False, compare=False)
    #: for each input, whether it reached this row through calls without a row (``hiddens * weights``: its
    #: ``sources`` names the row before them); () where none did
    carried: tuple[bool, ...] = field(default=(), repr=False, compare=False)
    #: every operand is a module's ``nn.Parameter`` or computed from parameters only (no input's data)
    from_parameters: bool = field(default=False, repr=False, compare=False)
    #: its layout is checked by a contract read on the values where no name could check it (the ops that
    #: build a rotary table or a causal mask whose values were read and found right: :mod:`.value_checked`)
    checked_on_values: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _unset_lazy(self, _EVENT_LAZY)

    @property
    def output(self) -> TensorInfo | None:
        return self.outputs[0] if self.outputs else None

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

    def _resolve_spec(self) -> None:
        self.spec = spec_for(self.op)

    def _resolve_site(self) -> None:
        self.source, self.code, self.function, self.stack = _site_resolver()(self.site)

    def _resolve_args(self) -> None:
        raw = self.raw_args if self.raw_args is not None else ("", (), None)
        if not _plain_call(raw):
            self.args = format_args(*raw)
            return
        text = _ARGS_TEXT.get(raw)   # the same call in the next layer: the same text
        if text is None:
            text = format_args(*raw)
            if len(_ARGS_TEXT) < 8192:
                _ARGS_TEXT[raw] = text
        self.args = text


_SITE_RESOLVER: list = []


def _site_resolver():
    """:func:`.sites.resolve`, imported on first use (``sites`` imports torch; this module does not).
    Kept here because an import statement in the resolver would cost more than the lookup, per event."""
    if not _SITE_RESOLVER:
        from shapetrace.engine.sites import resolve

        _SITE_RESOLVER.append(resolve)
    return _SITE_RESOLVER[0]


_EVENT_LAZY = ("source", "code", "function", "stack", "args", "spec")
for _name in _EVENT_LAZY[:4]:
    setattr(Event, _name, _Lazy(_name, "_resolve_site"))
Event.args = _Lazy("args", "_resolve_args")   # type: ignore[assignment]
Event.spec = _Lazy("spec", "_resolve_spec")   # type: ignore[assignment]


def new_event(index, spec, inputs, outputs, view, noop, alloc_bytes, copy_bytes, params, error, module, projections,
              site, raw_args) -> Event:
    """``Event(...)`` of the op ``spec`` with its site and argument text left to resolve, made without the
    dataclass ``__init__`` (one per recorded call)."""
    event = _new_object(Event)
    event.__dict__.update({"index": index, "op": spec.name, "spec": spec, "inputs": inputs, "outputs": outputs,
                           "view": view, "noop": noop, "alloc_bytes": alloc_bytes, "copy_bytes": copy_bytes,
                           "params": params, "error": error, "module": module, "projections": projections, "site": site,
                           "raw_args": raw_args, "sources": ()})
    return event


#: (op, frozen args, frozen kwargs) -> their text, for calls whose arguments are all of types whose equal
#: values print alike (:func:`_plain_call`: ``1 == 1.0 == True`` and ``[1] == (1,)`` as frozen, not as text)
_ARGS_TEXT: dict[tuple, str] = {}


def _plain_call(raw: tuple) -> bool:
    """Are the arguments ints (not bools), strings, None or tensors (shown by their shapes) only?"""
    _, args, kwargs = raw
    for a in args:
        kind = type(a)
        if kind is not int and kind is not ShapeOf and kind is not str and a is not None:
            return False
    if kwargs:
        for _, v in kwargs:
            kind = type(v)
            if kind is not int and kind is not ShapeOf and kind is not str and v is not None:
                return False
    return True


# ---------------------------------------------------------------------------
# argument text: ``view(2, 6, 8, 64)`` -> ``2, 6, 8, 64``
# ---------------------------------------------------------------------------

class ShapeOf(tuple):
    """A tensor argument, frozen at call time as ``(shape, dtype, requires_grad, type)``: what a name
    rule may read of it (a parameter is structure), never its values; the tensor itself is not kept."""

    __slots__ = ()


class ListOf(tuple):
    """A list argument, frozen (hashable) and shown with brackets."""

    __slots__ = ()


class DictOf(tuple):
    """A dict argument, frozen as its ``(key, value)`` pairs."""

    __slots__ = ()


class SliceOf(tuple):
    """A slice, frozen as ``(start, stop, step)`` (slices are hashable only from Python 3.12)."""

    __slots__ = ()


def format_args(op: OpSpec | str, args, kwargs) -> str:
    """The arguments as the table shows them (the first tensor is the row's input, so it is left out)."""
    parts = []
    skip_first = not spec_for(op).shows_first
    for a in (args[1:] if skip_first else args):
        parts.append(_short(a))
    parts += [f"{k}={_short(v)}" for k, v in dict(kwargs or ()).items()]
    return ", ".join(p for p in parts if p)


def _short(a) -> str:
    if isinstance(a, ShapeOf):
        return "tensor[" + ", ".join(map(str, a[0])) + "]"
    if isinstance(a, SliceOf):
        a = slice(*a)
    if isinstance(a, (list, ListOf)):
        return "[" + ", ".join(_short(x) for x in a) + "]"
    if isinstance(a, tuple) and not isinstance(a, DictOf):
        return "(" + ", ".join(_short(x) for x in a) + ")"
    if isinstance(a, DictOf):
        a = dict(a)
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
    if isinstance(a, str):
        return repr(a)
    return str(a) if isinstance(a, (int, float, bool)) else repr(a)


def readers_of(events: Sequence[Event]) -> dict[tuple[int, int], list[tuple[Event, int]]]:
    """``(event index, result position)`` -> each later event that reads that result, with the operand
    position it reads it as (in the events' order)."""
    out: dict[tuple[int, int], list[tuple[Event, int]]] = {}
    for e in events:
        for j, source in enumerate(e.sources):
            if source is not None:
                out.setdefault(source, []).append((e, j))
    return out
