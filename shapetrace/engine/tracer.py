"""Record the tensor operations of a forward pass as plain data.

``trace()`` installs a :class:`torch.overrides.TorchFunctionMode` that sees each
Python-level call a user writes (``x.view(...)``, ``q @ k``, ``F.linear``),
runs it unchanged, and appends an :class:`Event` with the shapes, strides,
storage offsets, axis names and whether the result shares storage with an input.
No Rich here: rendering lives in ``shapetrace.render``.
"""

from __future__ import annotations

import gc
import math
import os
import sys
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch.overrides import TorchFunctionMode

from shapetrace.engine import axes as ax
from shapetrace.engine import meta as _meta
from shapetrace.engine.axes import Axis, Namer
from shapetrace.engine.events import DictOf, Event, ListOf, ShapeOf, SliceOf, TensorInfo
from shapetrace.engine.ops import (
    ADDITIVE,
    CHEAP,
    GETTERS,
    REGISTRY,
    SCORE_ADD,
    UNKNOWN,
    Call,
    OpSpec,
    all_operands,
    arg,
    operands_of,
    record_params,
)
from shapetrace.engine.propagate import fits
from shapetrace.engine.sites import OUTER, forget_cwd, module_wrapper, plumbing, remember_cwd, site, user_stack
from shapetrace.engine.vocabulary import FUSED_PARTS, canonical, canonical_dims, projection_kind
from shapetrace.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.report import Report



class _Recorder(TorchFunctionMode):
    """The TorchFunctionMode that feeds a :class:`Trace`: every call goes through the op registry."""

    def __init__(self, trace: Trace):
        super().__init__()
        self.trace = trace

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            op, spec = _SPECS[func]
        except (KeyError, TypeError):
            op, spec = _spec_of(func)
        if spec is None:
            return func(*args, **kwargs)
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


def _call(op: str, func: Callable, args, kwargs, inputs: Sequence = ()):
    """Run ``func``; on meta tensors, compute ops get their result from :mod:`shapetrace.engine.meta`.

    (torch's own Python meta kernels would import ``torch._dynamo`` on first use.)
    """
    if inputs and not inputs[0].is_meta:   # a real tensor in: torch computes it (no meta rule can apply)
        return func(*args, **kwargs)
    result = _meta.compute(op, func, args, kwargs)
    return func(*args, **kwargs) if result is _meta.NOT_HANDLED else result


#: func -> (op name, spec), or (None, None) for calls that are not recorded (metadata reads)
_SPECS: dict = {}


def _spec_of(func: Callable) -> tuple[str | None, OpSpec | None]:
    """What the registry says of ``func``, remembered per function object (up to a few thousand)."""
    op = _op_name(func)
    found = (None, None) if op is None else (op, REGISTRY.get(op, UNKNOWN))
    try:
        if len(_SPECS) < 4096:
            _SPECS[func] = found
    except TypeError:   # a callable that cannot be hashed: looked up each time
        pass
    return found


def _op_name(func: Callable) -> str | None:
    name = getattr(func, "__name__", None)
    if name == "__get__":
        prop = getattr(getattr(func, "__self__", None), "__name__", None)
        return prop if prop in GETTERS else None
    if name is None or name in CHEAP:
        return None
    return name


class _ModulePaths:
    """Keeps ``trace._modules`` (the path of the running module) current while the traced code runs.

    It wraps ``nn.Module.__call__`` for the length of the trace rather than registering global module
    hooks: any global hook sends every module call down torch's slow path (measured on the whole-model
    benchmark: about 25 µs per module call), while this wrapper costs a few. Paths are relative to the
    outermost module the traced code calls (``h.3.attn``)."""

    def __init__(self, trace: Trace):
        self.trace = trace
        self.original = None

    def install(self) -> None:
        from torch.nn import Module

        trace, original = self.trace, Module.__call__
        paths, types, names, outer = trace._modules, trace._module_types, trace._module_names, OUTER

        def call_in_path(module, *args, **kwargs):
            path = names.get(id(module))
            if path is None:
                path = _name_submodules(module, paths[-1] + "." if paths else "", names)
            paths.append(path)
            types.append(type(module).__name__)
            outer.append(user_stack(sys._getframe(1)))   # the user code above this call, walked once
            try:
                return original(module, *args, **kwargs)
            finally:
                if paths:   # (empty if the trace was left while this module ran)
                    del paths[-1], types[-1]
                del outer[-1]

        module_wrapper(call_in_path.__code__)
        self.original, self.wrapper = original, call_in_path
        Module.__call__ = call_in_path

    def remove(self) -> None:
        from torch.nn import Module

        if self.original is not None and Module.__call__ is self.wrapper:
            Module.__call__ = self.original   # not if the traced code put its own wrapper on top since
        self.original = None


def _name_submodules(module, prefix: str, names: dict[int, str]) -> str:
    """Name ``module`` and every module under it (``prefix`` + its path inside ``module``) the first
    time it runs; the names of modules already named stay. Returns ``module``'s path."""
    for name, sub in module.named_modules():
        names.setdefault(id(sub), (prefix + name).strip("."))
    return names.get(id(module), type(module).__name__)


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
    while frame is not None and plumbing(frame.f_code):
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


def _hold_collector() -> tuple[bool, tuple[int, int, int] | None]:
    """Keep Python's cyclic garbage collector off what recording keeps, until the trace ends. Returns
    ``(froze, thresholds)``: what :func:`_release_collector` undoes.

    Recording keeps a few objects per op, and the collector walks surviving objects again and again:
    each full collection walks every object in the process (with torch imported, about 170,000), and
    each middle-generation one every survivor of the young one. So while a trace records, the objects
    alive at its start are set aside (``gc.freeze``: only where nothing else froze any, so a process
    that froze its own keeps them frozen), and the middle and old generations wait (their thresholds
    raised). The young generation is collected as usual, so cycles the traced code drops soon are
    freed during the run; the rest wait for the collector after the trace. Measured (bench_per_op.py):
    the two older generations were about a tenth of recording's cost per op (1.1 of 13.5 µs).
    """
    if not gc.isenabled():
        return False, None
    froze = not gc.get_freeze_count()
    if froze:
        gc.freeze()
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], _WAIT, _WAIT)
    return froze, thresholds


def _release_collector(held: tuple[bool, tuple[int, int, int] | None]) -> None:
    froze, thresholds = held
    if froze:
        gc.unfreeze()
    if thresholds is not None and gc.get_threshold()[1:] == (_WAIT, _WAIT):   # unless the traced code set its own
        gc.set_threshold(*thresholds)


_WAIT = 1 << 30   # a generation threshold never reached while a trace records


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
        self._name_memo: dict[tuple, tuple] = {}
        self._interned: dict[tuple, tuple] = {}   # each distinct axes tuple, once (the memo keys axes by id)
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
        self._paths: _ModulePaths | None = None
        self._held = (False, None)   # what this trace changed in the garbage collector (_hold_collector)
        self._records: list = []   # an Event, or the raw tuple it is made from on first read (:meth:`_event`)
        self._made = 0               # records before this index are Events
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
        self._held = _hold_collector()
        remember_cwd()
        self._mode.__enter__()
        _ACTIVE.append(self)
        self._paths = _ModulePaths(self)
        self._paths.install()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self in _ACTIVE:
            _ACTIVE.remove(self)
            forget_cwd()
        _release_collector(self._held)
        self._held = (False, None)
        if self._paths is not None:
            self._paths.remove()
        self._paths = None
        self._modules.clear()
        self._module_types.clear()
        if self._mode is not None:
            _remove_mode(self._mode)   # exactly this recorder, even if the traced code left its own mode on top
        self._mode = None
        if self._einops_pending is not None:
            self._finish_pattern()
        self._check_values()
        self._orient_sequences()
        self.exception = exc
        failed = self._unrecorded_failure
        if exc is not None and failed is not None and failed[0] is exc:
            self._records.append(failed[1])
            self._diagnostics = None
        self._unrecorded_failure = None

    def _orient_sequences(self) -> None:
        """With ``S`` and ``T`` of one length, the first token tensor to enter is called ``T``. Where the
        run shows the other one queries it (scores of q and k whose rows are ``S`` and columns ``T``: an
        encoder that ran before its decoder), the two labels are swapped for display, so the queries'
        tokens read ``T`` and the source's ``S``, as in torch's ``nn.Transformer``."""
        if self.dims.get("S") is None or self.dims.get("S") != self.dims.get("T"):
            return
        for record in self._records:
            if type(record) is tuple:
                op, outs, tags = record[0], [raw[6] for raw in record[4]], record[7]
            else:
                op, outs, tags = record.op, [o.axes for o in record.outputs], record.projections
            if op in _COMBINES and tags and tuple(tags[:2]) == ("q", "k") and outs and len(outs[0]) >= 2:
                rows, cols = (axis.atoms[0].root if len(axis.atoms) == 1 and axis.atoms[0].whole else None
                              for axis in outs[0][-2:])
                if (rows, cols) == ("S", "T"):
                    self.namer.swap_sequences()
                if {rows, cols} == {"S", "T"}:
                    return

    # -- events ------------------------------------------------------------
    @property
    def events(self) -> list[Event]:
        """Every recorded call, in order. The tracer keeps what torch said at call time; the events
        are made from it on first read (labels, source text and argument text later still)."""
        records = self._records
        for i in range(self._made, len(records)):
            if type(records[i]) is tuple:
                records[i] = self._event(i, records[i])
        self._made = len(records)
        return records

    @events.setter
    def events(self, value: list[Event]) -> None:
        self._records = list(value)
        self._made = len(self._records)

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
        axes = self._interned.setdefault(axes, axes)
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
        declared = self.seed_order[:len(shape)]   # the declared order, with this tensor's sequence name
        other = "S" if seq == "T" else "T"
        patterns = [[seq if n == other and seq not in declared else n for n in declared]]
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
        """Remember ``tensor``'s axes. The entry outlives the tensor (its weak reference then answers
        None, and a new tensor with the same id is not mistaken for it); a weak reference without a
        callback is the one Python already keeps for the tensor, so storing costs no new object."""
        self._names[id(tensor)] = (weakref.ref(tensor), axes)

    # -- provenance: which projection a tensor came from ----------------------
    def tag_of(self, tensor: torch.Tensor) -> str | None:
        entry = self._tags.get(id(tensor))
        return entry[1] if entry is not None and entry[0]() is tensor else None

    def _tag(self, tensor: torch.Tensor, tag: str | None) -> None:
        if tag is not None:
            self._tags[id(tensor)] = (weakref.ref(tensor), tag)

    def _tags_of(self, inputs) -> tuple | None:
        """The projection tag of each operand (None when no operand has one)."""
        if not self._tags:
            return None
        tags = self._tags
        found, any_tag = [], False
        for t in inputs:
            entry = tags.get(id(t))
            tag = entry[1] if entry is not None and entry[0]() is t else None
            found.append(tag)
            any_tag = any_tag or tag is not None
        return tuple(found) if any_tag else None

    def _tag_outputs(self, op: str, args, kwargs, inputs, in_axes, shapes, params, outs: Sequence[torch.Tensor],
                     input_tags) -> None:
        """q, k and v from the projection modules that made them (``q_proj``, ``c_attn`` then a split
        into three, ``proj[0]`` of a packed in-projection), carried through views and elementwise ops."""
        if op in PROJECTIONS:
            self._tag(outs[0], self._projection_here(args, kwargs))
            return
        tag = None
        for t in input_tags or ():
            if t is not None and t != tag:
                if tag is not None:
                    return   # operands of two projections: the result is neither
                tag = t
        if tag is None or op in _COMBINES:
            return
        parts = FUSED_PARTS.get(tag)
        if parts and len(outs) == len(parts) and op in ("split", "chunk", "unbind", "tensor_split"):
            for out, part in zip(outs, parts):
                self._tag(out, part)
            return
        if parts and op in ("__getitem__", "select"):
            call = Call(op, args, kwargs, inputs, in_axes, shapes, self.namer, params)
            self._tag(outs[0], _fused_index(call, parts, self.namer))
            return
        for out in outs:
            self._tag(out, tag)

    def _projection_here(self, args, kwargs) -> str | None:
        """The kind of projection a linear is, from the module it runs in (or torch's packed MHA weight)."""
        where = self._modules[-1] if self._modules else ""
        kind = projection_kind(where) if where else None
        if kind is None and self._module_types and self._module_types[-1] == "MultiheadAttention":
            weight = arg(args, kwargs, 1, "weight")
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
            self.scalings.append({"event": max(len(self._records) - 1, 0), "factor": factor, "on": on})

    def _carry_names(self, spec: OpSpec, args, kwargs, result) -> None:
        """Ops without a row: elementwise ones pass names on by broadcasting; unknown ones name nothing.

        Either way a result computed from other tensors is marked as made inside the trace, so it is
        never seeded by size; a fresh tensor (``torch.randn(B, T, D)``, no tensor in) is an input."""
        tensors = all_operands(args, kwargs)
        if not tensors:
            return
        outs = [result] if type(result) is _TENSOR else _tensor_outputs(result)
        for out in outs:
            if _is_one_of(out, tensors):
                continue   # an in-place op returns its own input: its names stay
            if spec.names is None:
                self._store(out, ax.unknown_axes(tuple(out.shape)))
                continue
            inputs = operands_of(spec, args, kwargs)
            in_axes = [self.axes_of(t) for t in inputs]
            self._store(out, self._names_of(spec, args, kwargs, inputs, in_axes, [out.shape])[0][0])

    # -- recording -----------------------------------------------------------
    def _record(self, spec: OpSpec, func, args, kwargs):
        """Run one call and keep what torch says about it. This runs on every recorded call, so it is
        one function of plain loops (no comprehension, no generator): the rare cases are in helpers."""
        inputs = operands_of(spec, args, kwargs)
        einops_call = self._einops_step(inputs) if self._einops_pending or "einops" in sys.modules else None
        names = self._names
        in_axes, in_raw = [], []
        for t in inputs:
            entry = names.get(id(t))
            axes = entry[1] if entry is not None and entry[0]() is t else self.axes_of(t)
            in_axes.append(axes)
            in_raw.append(_raw_info(t, axes))
        where = site(2)
        frozen = freeze_args(args, kwargs)
        params = record_params(spec, args, kwargs) if spec.params is not None and \
            _params_read_values(spec, frozen) else None
        try:
            result = _call(spec.name, func, args, kwargs, inputs)
        except Exception as exc:
            params = record_params(spec, args, kwargs) if params is None else params
            self._append(spec.name, where, in_raw, [], params, frozen, self._tags_of(inputs), _NOTHING, exc)
            raise
        if type(result) is _TENSOR:
            outs, shapes = [result], [result.shape]
        else:
            outs = _tensor_outputs(result)
            shapes = [o.shape for o in outs]
        out_axes, params = self._names_of(spec, args, kwargs, inputs, in_axes, shapes, frozen, params)
        out_raw = []
        for o, axes in zip(outs, out_axes):
            if not spec.inplace or not _is_one_of(o, inputs):
                names[id(o)] = (weakref.ref(o), axes)
            out_raw.append(_raw_info(o, axes))
        tags = self._tags_of(inputs) if self._tags else None
        if outs and (tags or spec.name in PROJECTIONS):
            self._tag_outputs(spec.name, args, kwargs, inputs, in_axes, shapes, params, outs, tags)
        if spec.name in VALUE_CHECKED and outs and not outs[0].is_meta:
            self._attention_outputs.append((len(self._records), outs[0]))   # read once, after the run
        self._append(spec.name, where, in_raw, out_raw, params, frozen, tags, _memory_verdict(spec, inputs, outs))
        if einops_call is not None:
            self._einops_after(einops_call, outs)
        return result

    def _names_of(self, spec: OpSpec, args, kwargs, inputs, in_axes, shapes, frozen=None, params=None):
        """``(names of each output, params)``, remembered for the rest of the run.

        A name rule is a function of the op, its operands' axes, its arguments (tensors by shape,
        dtype and kind: ``frozen``) and torch's output shapes, so the same call in the next layer is
        answered without running it again. Axes are keyed by identity (names flow from earlier
        answers, so the next layer's operands carry the same axis objects; equal axes that are not
        the same object only cost a fresh answer). The structured parameters are a function of the arguments
        too, and come from the same memo, except where they read tensor values (``params`` given:
        then they are part of the key)."""
        if frozen is None:
            frozen = freeze_args(args, kwargs)
            if _params_read_values(spec, frozen):
                params = record_params(spec, args, kwargs)
        try:   # the operands' axes by identity: each entry keeps its axes alive, so no id is reused
            key = (spec.name, tuple(map(id, in_axes)), frozen, tuple(shapes),
                   None if params is None else freeze(params))
            hit = self._name_memo.get(key)
        except TypeError:   # an argument that cannot be hashed: computed afresh
            key = hit = None
        if hit is not None:
            self.name_mismatches += hit[1]
            return hit[0], (hit[2] if params is None else params)
        if params is None:
            params = record_params(spec, args, kwargs)
        shapes = [tuple(s) for s in shapes]
        if spec.names is None or not shapes:
            found, mismatched = [ax.unknown_axes(s) for s in shapes], 0
        else:
            before = self.name_mismatches
            found = self._checked(spec, Call(spec.name, args, kwargs, inputs, in_axes, shapes, self.namer, params))
            mismatched = self.name_mismatches - before
        found = [self._interned.setdefault(axes, axes) for axes in found]   # equal axes: one object
        if key is not None:
            self._name_memo[key] = (found, mismatched, params, tuple(in_axes))
        return found, params

    def _checked(self, spec: OpSpec, call: Call) -> list[tuple[Axis, ...]]:
        """The registry's names for each output, kept only where they fit torch's own shape."""
        try:
            found = spec.names(call)
        except (IndexError, KeyError, TypeError, ValueError, ZeroDivisionError):
            found = None   # arguments in a form the name rule does not read: unnamed, never guessed
        found = found if isinstance(found, list) else [found]
        checked = []
        for axes, shape in zip(found + [None] * len(call.shapes), call.shapes):
            if axes is not None and fits(axes, shape):
                checked.append(tuple(axes))
            else:
                self.name_mismatches += axes is not None
                checked.append(ax.unknown_axes(shape))
        return checked

    def _note_failure(self, op: str, args, kwargs, exc: Exception) -> None:
        """An op without a row of its own (``+``, ``/``, ``where``...) raised: keep it as a failed
        event, added to the table only if this exception ends the traced block."""
        in_raw = [_raw_info(t, self.axes_of(t)) for t in all_operands(args, kwargs)]
        raw = self._raw_record(op.strip("_") or op, site(2), in_raw, [], {}, freeze_args(args, kwargs), None,
                               _NOTHING, exc)
        self._unrecorded_failure = (exc, raw)

    def _append(self, op: str, where, in_raw, out_raw, params, frozen, tags, memory, error=None) -> None:
        self._records.append(self._raw_record(op, where, in_raw, out_raw, params, frozen, tags, memory, error))
        self._diagnostics = None

    def _raw_record(self, op: str, where, in_raw, out_raw, params, frozen, tags, memory,
                    error: BaseException | None = None) -> tuple:
        """What torch said about one call, read at call time (the operands' and outputs' layouts:
        :func:`_raw_info`; the storage verdict: :func:`_memory_verdict`); :meth:`_event` makes the
        :class:`Event` from it on first read."""
        return (op, where, self._modules[-1] if self._modules else "", in_raw, out_raw, params, frozen,
                tags, memory, None if error is None else f"{type(error).__name__}: {error}")

    def _event(self, index: int, raw: tuple) -> Event:
        op, where, module, ins, outs, params, frozen, projections, memory, error = raw
        view, noop, allocates, copies = memory
        out_infos = [self._tensor_info(r) for r in outs]
        alloc = sum(o.nbytes for o in out_infos) if allocates else 0   # bytes from the shapes read at call time
        return Event(index, op, None, None, None, [self._tensor_info(r) for r in ins],
                     out_infos, None, view, noop, alloc, alloc if copies else 0, params, None, error,
                     module, projections or (None,) * len(ins), where, (op, *frozen))

    def info(self, tensor: torch.Tensor) -> TensorInfo:
        """What torch says about ``tensor`` now, with the names this trace gives its axes."""
        return self._tensor_info(_raw_info(tensor, self.axes_of(tensor)))

    def _tensor_info(self, raw: tuple) -> TensorInfo:
        shape, stride, offset, dtype, contiguous, device, axes = raw
        shape = tuple(shape)
        if len(axes) != len(shape) or ax.sizes_of(axes) != shape:
            axes = ax.unknown_axes(shape)
        return TensorInfo(shape, stride, offset, _DTYPE_NAMES.get(dtype) or _dtype_name(dtype), contiguous, None,
                          device.type, math.prod(shape) * dtype.itemsize, axes, self.namer)

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
            self._einops_pending = (call[0], weakref.ref(outs[0]), len(self._records) - 1, call[1])

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

        return replace(info, dims=None, axes=axes, namer=self.namer)

    def _check_values(self) -> None:
        """NaN rows of every traced softmax or SDPA output, computed once after the run (never per op,
        so a GPU run is not synchronised while it records). One sum per output screens them all with
        a single read (a NaN anywhere makes its sum NaN); only a flagged output is searched row by row."""
        checked, self._attention_outputs = self._attention_outputs, []
        checked = [(i, out) for i, out in checked if out.dim() >= 3 and out.is_floating_point()]
        for index, out in _screened(checked):
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
        n = len(self._records)
        return (f"<Trace: {n} op{'s' * (n != 1)}, "
                f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}>")

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self._records)


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

#: elementwise ops that scale scores by a number (the 1/√d_k of attention)
SCALING_OPS = frozenset({"div", "true_divide", "__truediv__", "__itruediv__", "div_", "mul", "__mul__",
                         "__rmul__", "__imul__", "mul_"})
#: ops whose result mixes two operands' roles: no projection tag passes through them
_COMBINES = frozenset({"matmul", "bmm", "mm", "baddbmm", "einsum", "scaled_dot_product_attention"})
#: ops that project features (their output is tagged q, k or v from the module they run in)
PROJECTIONS = frozenset({"linear", "addmm"})
#: ops whose outputs are attention weights or outputs: an all-NaN row there is a query with no key left
VALUE_CHECKED = frozenset({"softmax", "scaled_dot_product_attention"})


def _screened(outputs: list[tuple[int, torch.Tensor]]) -> list[tuple[int, torch.Tensor]]:
    """The outputs whose sum is NaN (all of them if their sums cannot be stacked in one tensor)."""
    if not outputs:
        return []
    with torch.no_grad():
        try:
            sums = torch.stack([out.sum(dtype=torch.float32) for _, out in outputs])
        except RuntimeError:   # outputs on different devices
            return outputs
        flagged = torch.isnan(sums).tolist()
    return [pair for pair, nan in zip(outputs, flagged) if nan]


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


def _storage_ptr(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except Exception:
        return -1


def _shares_storage(out: torch.Tensor, inputs: Sequence[torch.Tensor]) -> bool:
    """A view of an input (or of that input's base) shares its storage, on any device; otherwise real
    tensors are compared by storage pointer (meta tensors have none: there the view base decides)."""
    base = out._base
    if base is not None:
        for i in inputs:
            if base is i or base is i._base:
                return True
    if out.is_meta:
        return any(out is i for i in inputs)
    ptr = _storage_ptr(out)
    return ptr not in (0, -1) and any(_storage_ptr(i) == ptr for i in inputs)


def _memory_verdict(spec: OpSpec, inputs, outs) -> tuple[bool, bool, bool, bool]:
    """(view, no-op, allocates its outputs, copies values into them), from the registry's kind and
    torch's storage; the bytes are counted from the outputs' shapes when the event is made."""
    if not outs:
        return _NOTHING
    for o in outs:
        if not _is_one_of(o, inputs):
            break
    else:
        return _NO_OP   # contiguous() on a contiguous tensor, eval dropout, in-place fill
    if spec.memory in _MAY_ALIAS:
        for o in outs:
            if not _shares_storage(o, inputs):
                break
        else:
            return _VIEW
    return _COPIES if spec.memory in _MOVES_VALUES else _ALLOCATES


_NOTHING = (False, False, False, False)
_NO_OP = (True, True, False, False)
_VIEW = (True, False, False, False)
_ALLOCATES = (False, False, True, False)
_COPIES = (False, False, True, True)
_MAY_ALIAS = frozenset({"view", "maybe"})
_MOVES_VALUES = frozenset({"view", "maybe", "copy"})


def _is_one_of(tensor, tensors) -> bool:
    for t in tensors:
        if tensor is t:
            return True
    return False


def _raw_info(t: torch.Tensor, axes: tuple[Axis, ...]) -> tuple:
    """What torch says about ``t`` now (its layout can change later); a :class:`TensorInfo` is made
    from it when the event is first read."""
    return t.shape, t.stride(), t.storage_offset(), t.dtype, t.is_contiguous(), t.device, axes


# ---------------------------------------------------------------------------
# arguments, frozen at call time for the table's text
# ---------------------------------------------------------------------------

def _params_read_values(spec: OpSpec, frozen: tuple) -> bool:
    """Do this call's structured parameters depend on tensor values, not only on the frozen arguments?
    (an additive mask's values; a number given as a 0-d tensor)."""
    if spec.params is None:
        return False
    if spec.params_read_values:
        return True
    for a in frozen[0]:
        if type(a) is ShapeOf and not a[0]:
            return True
    return frozen[1] is not None and any(type(v) is ShapeOf and not v[0] for _, v in frozen[1])


def freeze_args(args, kwargs) -> tuple:
    """The call's arguments as hashable values (``(args, kwargs)``): a tensor as its shape, dtype and
    kind, never its values, and never kept alive. The name memo's key and the table's argument text.
    (It runs on every recorded call: plain values and tensors are handled inline.)"""
    out = []
    for a in args:
        kind = type(a)
        if kind in _PLAIN:
            out.append(a)
        elif kind is _TENSOR or kind is _PARAMETER:
            out.append(_new_tuple(ShapeOf, (a.shape, a.dtype, a.requires_grad, kind)))
        else:
            out.append(freeze(a))
    if not kwargs:
        return tuple(out), None
    pairs = []
    for key, value in kwargs.items():
        pairs.append((key, value if type(value) in _PLAIN else freeze(value)))
    return tuple(out), DictOf(pairs)


def freeze(a):
    kind = type(a)
    if kind in _PLAIN:
        return a
    if isinstance(a, torch.Tensor):
        return ShapeOf((a.shape, a.dtype, a.requires_grad, kind))
    if kind is tuple:
        return tuple(map(freeze, a))
    if kind is list:
        return ListOf(map(freeze, a))
    if isinstance(a, dict):
        return DictOf((k, freeze(v)) for k, v in a.items())
    if kind is slice:
        return SliceOf((freeze(a.start), freeze(a.stop), freeze(a.step)))
    if isinstance(a, tuple):
        return tuple(map(freeze, a))
    return a


_PARAMETER = torch.nn.Parameter
_new_tuple = tuple.__new__   # a tuple subclass made without its Python-level constructor call
_TENSOR = torch.Tensor
#: types kept as they are (hashable, and read by name rules only as values); bool is an int
_PLAIN = frozenset({int, float, bool, str, type(None), type(Ellipsis), torch.dtype, torch.device, torch.Size,
                    torch.memory_format, torch.layout})


_DTYPE_NAMES: dict = {}


def _dtype_name(dtype) -> str:
    name = _DTYPE_NAMES[dtype] = str(dtype).replace("torch.", "")
    return name
