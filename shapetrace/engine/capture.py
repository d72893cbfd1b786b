"""Capture: what torch says about each call while the traced code runs, and nothing more.

The :class:`Recorder` (a :class:`torch.overrides.TorchFunctionMode`) runs every call unchanged and
appends one record: the op, the call site (code objects and line, resolved to text after the run),
the module path, each tensor operand's and result's *node* (an identity that links a result to the
later calls that read it) and layout, the other arguments frozen as plain values, and torch's
storage verdict. Nothing here names an axis, judges a call or words a sentence: that is the work of
:mod:`.infer`, over the whole recorded graph, after the run. (``shared/probes/capture_floor.py``
measures why: deciding inside ``__torch_function__`` is where recording's time went.)

Nodes are SSA-like: a result gets a fresh node; a tensor first seen as an operand (an input of the
traced code, a parameter, a tensor made from no tensor) gets an *entered* node; ``shapetrace.name``
gives a tensor a fresh node that carries the declared names. An in-place call that changes a
tensor's shape (``unsqueeze_``, ``transpose_``) gives it a fresh node too, so the graph stays exact.
"""

from __future__ import annotations

import os
import sys
import weakref
from collections.abc import Callable, Sequence
from math import isnan as _isnan
from typing import Any, NamedTuple

import torch
from torch.overrides import TorchFunctionMode

from shapetrace.engine import meta as _meta
from shapetrace.engine.call_args import OnePass, freeze_args, zero_d_argument
from shapetrace.engine.columns import kept_bytes, kept_table, same_shape_table
from shapetrace.engine.directions import AddedOperands
from shapetrace.engine.events import DictOf
from shapetrace.engine.kept_copies import KEPT
from shapetrace.engine.modules import ModuleCalls, building_a_model
from shapetrace.engine.nan_held import NanHeld
from shapetrace.engine.op_args import first_operand, linear_operands
from shapetrace.engine.ops import UNKNOWN, Family, OpSpec, all_operands, callable_index
from shapetrace.engine.ops import record_params as _record_params
from shapetrace.engine.sites import _CWD, Site, call_stack, einops_call, site
from shapetrace.engine.sizes import SizeReads, all_sizes_read, carries_sizes
from shapetrace.engine.unread import values_read


class OpRecord(NamedTuple):
    """One call with a row of its own (or that may get one: an addition onto scores), as captured."""

    spec: OpSpec
    site: Any                  # a :class:`.sites.Site`, or None
    module: int                # the module call it ran in (a slot of :meth:`Capture.module_path`), -1 outside any
    ins: tuple                 # the operands' nodes
    in_raw: tuple              # the operands' layouts (:func:`raw_layout`)
    outs: tuple                # the results' nodes
    out_raw: tuple             # the results' layouts
    frozen: tuple              # (args, kwargs) as plain values (:func:`freeze_args`)
    params: dict | None        # parameters that read tensor values, taken at call time (else None)
    memory: tuple              # (view, no-op, allocates, copies) from torch's storage
    error: str | None          # "TypeName: message" when the call raised
    einops: tuple | None       # (einops call id, output groups) when an einops call made it
    kept: Any                  # a value kept for the analysis: the smaller operand of an addition
    device: Any                # the device of its first result (or operand)


_KEPT_FIELD = OpRecord._fields.index("kept")


class PassRecord(NamedTuple):
    """A call without a row of its own (elementwise arithmetic, an unknown op): how names pass on."""

    spec: OpSpec
    module: int
    ins: tuple
    outs: tuple
    out_shapes: tuple
    frozen: tuple


class Declared(NamedTuple):
    """``shapetrace.name(t, ...)``: a fresh node for ``t`` whose axes are declared (``was``: the node
    ``t`` held before, if any: the declaration speaks for it too)."""

    node: int
    axes: tuple
    was: int | None = None


#: what a node is: its shape, whether it entered the traced code (an input: names may be seeded from the
#: declared sizes), whether it is an ``nn.Parameter``, whether a running module holds it (``ModuleCalls.holds``)
class NodeFacts(NamedTuple):
    shape: tuple
    entered: bool
    parameter: bool
    held: bool = False


class Capture:
    """The raw record of one run: records in call order and the facts of every node."""

    def __init__(self) -> None:
        self.records: list = []
        self.nodes: list[NodeFacts] = []
        self._ids: dict[int, tuple] = {}          # id(tensor) -> (weak reference, node)
        self.modules: list[int] = []              # the module slots running now (innermost last)
        self.module_calls = ModuleCalls()
        self.value_checked: list[tuple[int, torch.Tensor]] = []   # (record, softmax/SDPA output): NaN rows
        self.values_screened = False   # an attention output was read at its call and had no NaN (_check_values)
        self.nan_held = NanHeld()       # attention outputs with NaN rows at their call: did the code clear them?
        self.kept_bytes = 0
        KEPT.start()   # (a trace starts: the copies' buffers of traces gone are free again)
        self.unrecorded_failure: tuple[BaseException, OpRecord] | None = None
        self.setup: set[int] = set()              # records made while a model was built (setup_frames)
        #: the records an opened composite (:func:`run_opened`) made: library code's own, reported at the user's call
        self.opened: list[tuple[OpSpec, int, int]] = []   # (spec, start, end)
        self.keep_top_call = False   # keep the first outermost module call: (module, args, kwargs, result)
        self.per_entry: tuple = ()   # the top call's arguments declared to hold one number per batch entry
        self.top_call: tuple | None = None
        self.top_span: tuple[int, int] = (0, 0)   # the records the top call made: [start, end)
        mine = weakref.ref(self)   # (not a bound method: no cycle, so a capture goes with its trace)
        #: ``x.size(dim)``, ``x.size()``, ``x.shape``: sizes that carry where they were read (:mod:`.sizes`)
        self.size_read = SizeReads(lambda t: mine().node_of(t))
        self.grads = None   # a backward session noting each call's autograd nodes (trace(backward=True))
        self.backward_via: dict[OpSpec, int] = {}   # the traced code's own backward passes, per way it started them

    @property
    def rows(self) -> int:
        """Records of calls with a row of their own, counted without inferring anything (safe to ask
        from another thread while the code runs; an addition onto scores is decided later, uncounted)."""
        return sum(1 for r in list(self.records) if type(r) is OpRecord and r.spec.row)

    # -- nodes -----------------------------------------------------------------------------------
    def node_of(self, t: torch.Tensor) -> int:
        """The node ``t`` holds now (an entered node the first time it is seen)."""
        entry = self._ids.get(id(t))
        if entry is not None and entry[0]() is t:
            return entry[1]
        return self._enter(t)

    def known_node(self, t: torch.Tensor) -> int | None:
        entry = self._ids.get(id(t))
        return entry[1] if entry is not None and entry[0]() is t else None

    def _enter(self, t: torch.Tensor) -> int:
        node = len(self.nodes)
        held = not isinstance(t, torch.nn.Parameter) and self.module_calls.holds(self.modules, t)
        self.nodes.append(NodeFacts(tuple(t.shape), True, isinstance(t, torch.nn.Parameter), held))
        self._ids[id(t)] = (weakref.ref(t), node)
        return node

    def _made(self, t: torch.Tensor, shape) -> int:
        node = len(self.nodes)
        self.nodes.append(_new_tuple(NodeFacts, (tuple(shape), False, False, False)))
        self._ids[id(t)] = (_weakref(t), node)
        return node

    def declare(self, t: torch.Tensor, axes: tuple) -> None:
        entry = self._ids.get(id(t))
        was = entry[1] if entry is not None and entry[0]() is t else None
        node = self._made(t, t.shape)
        self.records.append(Declared(node, axes, was))

    # -- calls -----------------------------------------------------------------------------------
    def record(self, spec: OpSpec, func, args, kwargs):
        """Run one call that gets a row and keep what torch says about it. This runs on every such
        call, so it is one function of plain loops; the rare cases are in helpers."""
        inputs, nodes, in_raw, frozen, zero_d = self._read_args(spec, args, kwargs)
        codes, offset, reduce = call_stack(_getframe(2))   # (site(2), inlined: it runs on every call)
        einops = einops_call(reduce) if reduce is not None and _EINOPS in sys.modules else None
        where = _new_tuple(Site, (codes, offset, _CWD[-1] if _CWD else os.getcwd())) if codes else None
        params = _record_params(spec, args, kwargs) if spec.params is not None and \
            (zero_d or spec.params_read_values) else None
        modules = self.modules
        module = modules[-1] if modules else -1
        try:
            result = func(*args, **kwargs) if inputs and not inputs[0].is_meta else \
                _meta.call(spec, func, args, kwargs, inputs)   # (a real tensor in: torch computes it)
        except Exception as exc:
            self.records.append(_new_tuple(OpRecord, (
                spec, where, module, tuple(nodes), tuple(in_raw), (), (), frozen,
                _record_params(spec, args, kwargs) if params is None else params, _NOTHING,
                _error_text(exc), einops, None, inputs[0].device if inputs else _CPU)))
            if not modules:
                self._mark_setup()
            raise
        outs = [result] if type(result) is _TENSOR else _tensor_outputs(result)
        out_nodes, out_raw = [], []
        facts, ids, inplace = self.nodes, self._ids, spec.inplace
        for o in outs:
            shape = o.shape
            if inplace and spec.memory != "view":   # values changed in place: the same node
                node = self._same_or_new(o, shape, inputs, nodes)
            else:   # a new node (_made, inlined); new metadata in place (transpose_) is one too
                node = len(facts)
                facts.append(_new_tuple(NodeFacts, (tuple(shape), False, False, False)))
                ids[id(o)] = (_weakref(o), node)
            out_nodes.append(node)
            out_raw.append((shape, o.stride(), o.storage_offset(), o.dtype))
        if outs:
            first = outs[0]
            if spec.family is _SOFTMAX or spec.family is _FUSED_ATTENTION:
                self._check_values(first, out_nodes[0])
            elif self.nan_held.nodes:
                self.nan_held.read_by(spec, nodes, in_raw, first, out_nodes[0])
            device = first.device
        else:
            device = inputs[0].device if inputs else _CPU
        self.records.append(_new_tuple(OpRecord, (
            spec, where, module, tuple(nodes), tuple(in_raw), tuple(out_nodes), tuple(out_raw), frozen,
            params, _memory_verdict(spec, inputs, outs), None, einops, None, device)))
        if self.grads is not None:
            self.grads.note(len(self.records) - 1, outs, inputs, args, kwargs)
        if not modules:   # outside every module call: maybe a model being built, not its forward
            self._mark_setup()
        return result

    def _read_args(self, spec: OpSpec, args, kwargs) -> tuple:
        """``(operands, their nodes, their layouts, the frozen arguments, a 0-d tensor among them)``
        of a call: in one pass over the arguments when the op reads every tensor among them
        (:meth:`_read_in_one_pass`; ``F.linear``'s, whose operand is its first), else operand by operand."""
        if spec.operands is None or spec.operands in _FIRST_OPERAND and args and type(args[0]) in _PLAIN_TENSORS:
            read = self._read_in_one_pass(args, kwargs, spec.operands is not None)
            if read is not None:
                return read
        inputs = (spec.operands or all_operands)(args, kwargs)
        ids, nodes, in_raw = self._ids, [], []
        for t in inputs:
            entry = ids.get(id(t))
            nodes.append(entry[1] if entry is not None and entry[0]() is t else self._enter(t))
            in_raw.append((t.shape, t.stride(), t.storage_offset(), t.dtype))
        frozen = freeze_args(args, kwargs, inputs, in_raw)
        return inputs, nodes, in_raw, frozen, zero_d_argument(frozen)

    def _read_in_one_pass(self, args: tuple, kwargs, first_only: bool) -> tuple | None:
        """:meth:`_read_args` in one pass (:class:`~.call_args.OnePass`: every tensor an operand, or the
        first argument alone), or None for arguments it does not read (a slice, a nested list, a tensor
        subclass): the general reading then takes the call and finds the nodes entered here, in order."""
        read = OnePass(self.node_of, first_only)
        frozen = read.values(args)
        if frozen is None:
            return None
        if kwargs:
            values = read.values(kwargs.values())
            if values is None:
                return None
            frozen_kwargs = DictOf(zip(kwargs, values))
        else:
            frozen_kwargs = None
        return read.inputs, read.nodes, read.in_raw, (frozen, frozen_kwargs), read.zero_d

    def _check_values(self, out: torch.Tensor, node: int) -> None:
        """An attention output (softmax, SDPA) whose rows may be all NaN. On the CPU it is screened now by one
        sum: one with a NaN is held (what later code does with it: :mod:`.nan_held`) and kept to be searched
        after the run; one without is let go (no weights held alive: ~750 page faults per forward of the ladder's
        D 256 model), except for the dependency check (its zero triangle). Elsewhere (no sync) all are kept."""
        if out.is_meta:
            return
        if out.device.type == "cpu" and out.dim() >= 3 and out.is_floating_point():
            if _isnan(out.detach().sum(dtype=torch.float32).item()):
                self.nan_held.hold(node, len(self.records))
            elif not self.keep_top_call:
                self.values_screened = True
                return
        self.value_checked.append((len(self.records), out))   # read once, after the run

    def _mark_setup(self) -> None:
        """The last record ran while a model was being built (:func:`building_a_model`): setup, not forward."""
        if building_a_model(_getframe(2)):
            self.setup.add(len(self.records) - 1)

    def record_addition(self, spec: OpSpec, func, args, kwargs):
        """``a + b`` of two tensors: recorded in full, since the analysis may find that it adds a mask
        or a bias onto attention scores (a row of its own, whose mask values it reads: a copy of the
        smaller operand's values is kept, on the CPU, within :data:`KEEP_BUDGET` bytes; the operand
        itself is not held: :mod:`.kept_copies`)."""
        result = self.record(spec, func, args, kwargs)
        tensors = [a for a in args[:2] if type(a) is _TENSOR or isinstance(a, torch.Tensor)]
        least = min(t.numel() for t in tensors)
        # the smaller operand; both when they tie (``scores + bias`` at B = 1), in operand order: which one
        # is the scores is known only to the analysis (:func:`.directions.added_operand`)
        smallest = [t for t in tensors if t.numel() == least]
        if all(t.device.type == "cpu" and t.is_floating_point() and not t.is_meta for t in smallest):
            size = sum(t.numel() * t.element_size() for t in smallest)
            if self.kept_bytes + size <= KEEP_BUDGET:
                self.kept_bytes += size
                copies = [KEPT.copy(t) for t in smallest]
                self._keep(copies[0] if len(copies) == 1 else AddedOperands(*copies))
        return result

    def record_product(self, spec: OpSpec, func, args, kwargs):
        """``q * cos`` that broadcasts, or ``scores * mask`` of one shape, with a rotary table or a mask kept."""
        result = self.record(spec, func, args, kwargs)
        kept = kept_table(args, KEEP_BUDGET - self.kept_bytes)
        if kept is not None:
            self.kept_bytes += kept_bytes(kept)
            self._keep(kept)
        return result

    def _keep(self, value) -> None:
        """The last record keeps ``value`` for the analysis (its ``kept`` field, set without ``_replace``)."""
        last = self.records[-1]
        self.records[-1] = _new_tuple(OpRecord, (*last[:_KEPT_FIELD], value, *last[_KEPT_FIELD + 1:]))

    def _same_or_new(self, o, shape, inputs, nodes) -> int:
        """An in-place call's result: the input's node when its shape is unchanged, else a fresh one."""
        for t, node in zip(inputs, nodes):
            if o is t:
                return node if tuple(shape) == self.nodes[node].shape else self._made(o, shape)
        return self._made(o, shape)

    def carry(self, op: str, spec: OpSpec, func, args, kwargs):
        """A call without a row: run it, and keep how its results relate to its operands (names pass
        on by broadcasting; an unknown op's results are made here, never seeded by size)."""
        tensors = all_operands(args, kwargs)
        try:   # (real tensors in: torch computes it; else a meta rule may, as in _meta.call)
            result = func(*args, **kwargs) if tensors and not _any_meta(tensors) else \
                _meta.call(spec, func, args, kwargs)
        except Exception as exc:
            self._note_failure(op, args, kwargs, exc)
            raise
        if spec.starts_backward:   # a backward pass (a script's step), not an op: its grads are inputs from here
            self.backward_via[spec] = self.backward_via.get(spec, 0) + 1
            return result
        if spec.on_self:   # (``x.new_ones(n, m)`` of sizes read from axes: x gives only its dtype and device)
            args, tensors = args[1:], ()
        if not tensors:
            if spec.sized and type(result) is _TENSOR and carries_sizes(args, kwargs):   # an entered node:
                self.records.append(_new_tuple(PassRecord, (spec, self.modules[-1] if self.modules else -1, (),
                                                            (self._enter(result),),   # seeded if no size names it
                                                            (result.shape,), freeze_args(args, kwargs))))
            return result   # a fresh tensor (torch.randn(B, T, D)): an input, seeded where it is used
        outs = [result] if type(result) is _TENSOR else _tensor_outputs(result)
        if not outs and not spec.inplace:   # (cache[i] = k returns nothing, and is kept: a write)
            return result
        ids, ins = self._ids, []
        for t in tensors:
            entry = ids.get(id(t))
            ins.append(entry[1] if entry is not None and entry[0]() is t else self._enter(t))
        out_nodes, shapes = [], []
        for o in outs:
            shape = o.shape
            for t, node in zip(tensors, ins):
                if o is t:   # an in-place op returns its own input: its node stays
                    out_nodes.append(node if tuple(shape) == self.nodes[node].shape else self._made(o, shape))
                    break
            else:
                out_nodes.append(self._made(o, shape))
            shapes.append(shape)
        frozen = freeze_args(args, kwargs) if spec.scaling or spec.params is not None or spec.inplace or (
            spec.additive and len(args) == 2 and type(args[1]) is int) else _NO_ARGS   # (``ids + p``: :mod:`.indices`)
        self.records.append(_new_tuple(PassRecord, (spec, self.modules[-1] if self.modules else -1, tuple(ins),
                                                    tuple(out_nodes), tuple(shapes), frozen)))
        if self.grads is not None:
            self.grads.note(len(self.records) - 1, outs, tensors, args, kwargs)
        if not self.modules:
            self._mark_setup()
        return result

    def _note_failure(self, op: str, args, kwargs, exc: Exception) -> None:
        """An op without a row (``+``, ``where``...) raised: kept as a failed record, shown only if this
        exception ends the traced block."""
        tensors = all_operands(args, kwargs)
        nodes = tuple(self.node_of(t) for t in tensors)
        raws = tuple((t.shape, t.stride(), t.storage_offset(), t.dtype) for t in tensors)
        spec = OpSpec(op.strip("_") or op, "new")
        record = OpRecord(spec, site(3), self.modules[-1] if self.modules else -1, nodes, raws, (), (),
                          freeze_args(args, kwargs), {}, _NOTHING, _error_text(exc), None, None,
                          tensors[0].device if tensors else _CPU)
        self.unrecorded_failure = (exc, record)


#: bytes of mask operands kept for the analysis (beyond them, an addition onto scores is not read)
KEEP_BUDGET = 64 << 20
_EINOPS = "einops"
#: families whose outputs are attention weights or outputs: an all-NaN row there is a query with no key left
#: (:attr:`~.opspec.OpSpec.value_checked`, compared by identity on the hot path)
_SOFTMAX, _FUSED_ATTENTION = Family.SOFTMAX, Family.FUSED_ATTENTION
_NO_ARGS = ((), None)
#: the ops whose one operand is their first argument (read in one pass when it is a plain tensor)
_FIRST_OPERAND = (first_operand, linear_operands)
_PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)
_CPU = torch.device("cpu")


def _error_text(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:   # an exception whose __str__ raises still gets a line
        text = "(its message could not be read)"
    return f"{type(exc).__name__}: {text}"


class Recorder(TorchFunctionMode):
    """The TorchFunctionMode that feeds a :class:`Capture`: every call goes through the op registry."""

    def __init__(self, capture: Capture):
        super().__init__()
        self.capture = capture
        self.closed = False   # its trace ended in another thread: it passes every call through

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.closed:
            return func(*args, **kwargs)
        try:
            op, spec = _SPECS[func]
        except (KeyError, TypeError):
            op, spec = _spec_of(func)
        if spec is None:   # x.size(), x.shape; x.tolist(), x.item(): not recorded, the tensor read (:mod:`.unread`)
            if op is None or not args:
                return func(*args, **kwargs)
            return self.capture.size_read(args, kwargs) if op == "size" else \
                values_read(self.capture, func, args, kwargs)
        if spec.opens:
            return run_opened(self, func, args, kwargs, spec)
        if spec.row or spec.on_self and not all_sizes_read(args[1:2] if spec.sized == "sequence" else args[1:]):
            # (``x.new_empty(B, 3, T, 8)``, a literal among its sizes: an unknown op's row, its result never seeded)
            return self.capture.record(spec if spec.row else UNKNOWN, func, args, kwargs)
        if (spec.additive or spec.subtractive) and len(args) >= 2 and isinstance(args[0], _TENSOR) and \
                isinstance(args[1], _TENSOR):
            return self.capture.record_addition(spec, func, args, kwargs)
        if spec.family is _ELEMENTWISE:   # the analysis checks how it lines up (a product: a table's values too)
            lined_up = _broadcasts(args)
            if spec.scaling == "multiplies" and (lined_up or same_shape_table(args)):
                return self.capture.record_product(spec, func, args, kwargs)
            if lined_up:
                return self.capture.record(spec, func, args, kwargs)
        return self.capture.carry(op, spec, func, args, kwargs)


#: elementwise ops of two operands or more, which torch lines up by broadcasting
_ELEMENTWISE = Family.ELEMENTWISE


def _broadcasts(args: tuple) -> bool:
    """Two tensors of different shapes among the first three arguments (``q * cos``, ``where(m, s, f)``)."""
    tensors = [a for a in args[:3] if isinstance(a, _TENSOR)]
    return len(tensors) >= 2 and any(t.shape != tensors[0].shape for t in tensors[1:])


def run_opened(mode: TorchFunctionMode, func, args, kwargs, spec: OpSpec | None = None):
    """Run a composite (``F.multi_head_attention_forward``) with ``mode`` active inside it, so each of
    its inner ops dispatches to the mode like any other code. The composite's own first line asks
    torch whether a mode wants the call (``has_torch_function``); that one question is answered "no",
    so the body runs instead of coming back to the mode."""
    module = sys.modules[func.__module__]
    original = module.has_torch_function
    asked = []

    def first_no(values):
        if not asked:
            asked.append(True)
            return False
        return original(values)

    module.has_torch_function = first_no
    capture = getattr(mode, "capture", None)
    start = len(capture.records) if capture is not None else 0
    try:
        with mode:
            return func(*args, **kwargs)
    finally:
        module.has_torch_function = original
        if capture is not None and spec is not None:
            capture.opened.append((spec, start, len(capture.records)))


#: func -> (op name, spec), or (None, None) for calls that are not recorded (metadata reads)
_SPECS: dict = {}


def _spec_of(func: Callable) -> tuple[str | None, OpSpec | None]:
    """What the registry says of ``func`` (the function itself: ``F.unfold`` is not ``Tensor.unfold``),
    remembered per function object (up to a few thousand). A function the registry does not know is
    :data:`~.ops.UNKNOWN` under its ``__name__``; reading a property it does not know (``x.shape``,
    ``x.grad``), or setting one, is not recorded."""
    try:
        spec = callable_index().get(func)
    except TypeError:   # a callable that cannot be hashed: looked up each time
        spec = None
    if spec is not None:
        found = (("values" if spec.reads_values else None), None) if spec.cheap else (spec.name, spec)
    else:
        name = getattr(func, "__name__", None)
        found = (None, None) if name is None or name in _DESCRIPTOR_CALLS else (name, UNKNOWN)
    if func is _SIZE or type(func) is type(_SHAPE) and func == _SHAPE:
        found = ("size", None)   # a size read: not recorded, its sizes carry their axes (:meth:`Capture.size_read`)
    try:
        if len(_SPECS) < 4096:
            _SPECS[func] = found
    except TypeError:
        pass
    return found


#: the descriptor protocol: a property read or set (``x.shape``, ``x.data = y``), metadata only
_DESCRIPTOR_CALLS = ("__get__", "__set__")


# -- torch's mode stack ---------------------------------------------------------------------------------

def drop_closed_recorders() -> None:
    """Take off this thread's mode stack the recorders whose trace was exited in another thread
    (torch's mode stack is per thread: only its own thread can take a mode off it)."""
    for mode in list(torch.overrides._get_current_function_mode_stack()):
        if isinstance(mode, Recorder) and mode.closed:
            remove_mode(mode)


def remove_mode(mode: TorchFunctionMode) -> None:
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


# -- layouts and storage --------------------------------------------------------------------------------

def raw_layout(t: torch.Tensor) -> tuple:
    """What torch says about ``t`` now (its layout can change later)."""
    return t.shape, t.stride(), t.storage_offset(), t.dtype


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


def shares_storage(out: torch.Tensor, inputs: Sequence[torch.Tensor]) -> bool:
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
        for t in inputs:
            if o is t:
                break
        else:   # (a result that is none of its operands)
            break
    else:
        return _NO_OP   # contiguous() on a contiguous tensor, eval dropout, in-place fill
    if spec.memory in _MAY_ALIAS:
        for o in outs:
            if not shares_storage(o, inputs):
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


def _any_meta(tensors) -> bool:
    for t in tensors:
        if t.is_meta:
            return True
    return False


_weakref = weakref.ref
_getframe = sys._getframe
_new_tuple = tuple.__new__   # a tuple subclass made without its Python-level constructor call
_TENSOR = torch.Tensor
_SIZE = torch.Tensor.size
_SHAPE = torch.Tensor.shape.__get__
