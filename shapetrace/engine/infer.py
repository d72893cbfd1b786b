"""Infer: names, provenance and events from a captured run, in passes over the whole record.

:mod:`.capture` keeps what torch said about each call; this module decides what it means, after the
run (or when a trace's events are read while it still records):

1. **names forward**: each node's axes from its producer's operands, through the op registry's name
   rules (:mod:`.propagate`), seeded by the declared sizes where a tensor enters, by
   ``shapetrace.name`` and by einops patterns; every name is checked against torch's own shape;
2. **provenance**: which projection (q, k, v, a fused qkv) each tensor came from, from the module a
   linear ran in, carried through views and splits;
3. **rows**: which calls get a row (an addition onto attention scores does: it is where masks go in)
   and the :class:`~.events.Event` of each, with its layouts and labels;
4. **sequences**: at equal lengths, which sequence queries the other (``T`` and ``S`` for display);
5. **values**: NaN rows of the attention outputs, read once after the run.

Later passes read the whole graph: :mod:`.structure` names what entered unnamed from how the run
used it (a conv patch stem, a class token joined by ``cat``, a cache).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from shapetrace.engine import axes as ax
from shapetrace.engine.axes import Axis, Namer
from shapetrace.engine.capture import OpRecord, PassRecord
from shapetrace.engine.events import DictOf, Event, ListOf, ShapeOf, SliceOf, TensorInfo, new_event, new_info
from shapetrace.engine.ops import ADDITIVE, SCORE_ADD, Call, OpSpec, arg, record_params
from shapetrace.engine.propagate import fits
from shapetrace.engine.vocabulary import FUSED_PARTS, canonical, projection_kind

#: ops whose result mixes two operands' roles: no projection tag passes through them
COMBINES = frozenset({"matmul", "bmm", "mm", "baddbmm", "einsum", "scaled_dot_product_attention"})
#: ops that project features (their output is tagged q, k or v from the module they run in)
PROJECTIONS = frozenset({"linear", "addmm"})
#: elementwise ops that scale scores by a number (the 1/√d_k of attention)
SCALING_OPS = frozenset({"div", "true_divide", "__truediv__", "__itruediv__", "div_", "mul", "__mul__",
                         "__rmul__", "__imul__", "mul_"})
_SPLITS = frozenset({"split", "chunk", "unbind", "tensor_split"})
_PICKS = frozenset({"__getitem__", "select"})


# ---------------------------------------------------------------------------
# arguments: frozen at call time, read back as plain stand-ins
# ---------------------------------------------------------------------------

class _Device:
    type = "frozen"


class TensorStub:
    """A tensor argument as captured: its shape, dtype and kind, never its values. Name rules read
    these (an index tensor's rank, a weight that is a parameter); a rule that needs more fails and
    leaves the axis unnamed."""

    __slots__ = ("shape", "dtype", "requires_grad", "kind")
    device = _Device()

    def __init__(self, frozen: ShapeOf):
        self.shape, self.dtype, self.requires_grad, self.kind = frozen

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    def __index__(self) -> int:
        raise TypeError("a captured tensor has no value")

    @property
    def is_parameter(self) -> bool:
        return self.kind.__name__ == "Parameter"


def thaw(value):
    kind = type(value)
    if kind is ShapeOf:
        return TensorStub(value)
    if kind is SliceOf:
        return slice(*(thaw(v) for v in value))
    if kind is ListOf:
        return [thaw(v) for v in value]
    if kind is DictOf:
        return {k: thaw(v) for k, v in value}
    if kind is tuple:
        return tuple(thaw(v) for v in value)
    return value


def thaw_args(frozen: tuple) -> tuple[tuple, dict]:
    args, kwargs = frozen
    return tuple(thaw(a) for a in args), ({k: thaw(v) for k, v in kwargs} if kwargs else {})


# ---------------------------------------------------------------------------
# the forward pass
# ---------------------------------------------------------------------------

class Inference:
    """Names and events of one capture, made incrementally: :meth:`advance` reads the records added
    since the last call (a trace's events may be read while it records)."""

    def __init__(self, capture, namer: Namer, dims: dict, seed_order: Sequence[str]):
        self.capture = capture
        self.namer = namer
        self.dims = dims
        self.seed_order = list(seed_order)
        self.axes: dict[int, tuple[Axis, ...]] = {}   # node -> axes
        self.tags: dict[int, str] = {}                 # node -> q / k / v / qkv / kv
        self.sequences: dict[int, str] = {}            # entered token node -> T or S
        self.events: list[Event] = []
        self.event_of_record: dict[int, int] = {}
        self.scalings: list[dict[str, Any]] = []
        self.pattern_conflicts: list[tuple[int, str]] = []
        self.name_mismatches = 0
        self.seeded_by_size = False
        self._memo: dict[tuple, tuple] = {}
        self._interned: dict[tuple, tuple] = {}
        self._done = 0
        self._pending = None   # an einops chain: (call id, output node, event index, groups)

    # -- nodes -------------------------------------------------------------------------------------
    def axes_of(self, node: int) -> tuple[Axis, ...]:
        found = self.axes.get(node)
        if found is not None:
            return found
        facts = self.capture.nodes[node]
        seeded = self._seed(node, facts) if facts.entered else None
        if seeded is not None:
            return seeded
        found = ax.unknown_axes(facts.shape)
        self.axes[node] = found
        return found

    def _seed(self, node: int, facts) -> tuple[Axis, ...] | None:
        """Names for a tensor that enters the traced code (an input, not a parameter, not made here).

        Its shape is matched against the declared sizes: ``[B, T, D]``, ``[B, T]`` (token ids),
        ``[B, H, T, d_k]``... The first token tensor to enter is ``T``; with ``S`` declared, a
        second, different one is ``S`` (cross-attention), even when the two lengths are equal.
        """
        shape = facts.shape
        if len(shape) < 2 or facts.parameter or not self.dims:
            return None
        names = self._seed_names(shape, self._sequence_name(node, shape))
        if names is None:
            return None
        axes = tuple(ax.root_axis(n, s) for n, s in zip(names, shape))
        axes = self._interned.setdefault(axes, axes)
        self.axes[node] = axes
        if "T" in names or "S" in names:
            self.sequences.setdefault(node, "S" if "S" in names else "T")
        self.seeded_by_size = True
        return axes

    def _sequence_name(self, node: int, shape: tuple[int, ...]) -> str:
        """``T`` for the first sequence to enter; ``S`` for a second one when ``S`` is declared."""
        if node in self.sequences:
            return self.sequences[node]
        if "S" in self.dims and "T" in self.sequences.values():
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

    # -- the pass ----------------------------------------------------------------------------------
    def advance(self) -> list[Event]:
        records = self.capture.records
        for index in range(self._done, len(records)):
            record = records[index]
            kind = type(record)
            if self._pending is not None and not self._chained(record):
                self._finish_pattern()
            if kind is OpRecord:
                self._op(index, record)
            elif kind is PassRecord:
                self._pass(record)
            else:
                self.axes[record.node] = record.axes
        self._done = len(records)
        return self.events

    def finish(self) -> None:
        """After the run: the last einops chain ends, failed calls that ended the block join."""
        self.advance()
        if self._pending is not None:
            self._finish_pattern()

    def _op(self, index: int, record: OpRecord) -> None:
        spec = record.spec
        in_axes = [self.axes_of(n) for n in record.ins]
        if spec.name in ADDITIVE and not spec.row:
            if not self._onto_scores(in_axes):
                self._pass_names(spec, record.ins, record.outs, [r[0] for r in record.out_raw], record.frozen,
                                 in_axes)
                return
            spec = SCORE_ADD
            record = record._replace(spec=spec, params=_additive_params(record.kept))
        shapes = [r[0] for r in record.out_raw]
        if record.error is None:
            out_axes, params = self._names_of(spec, record, in_axes, shapes)
        else:
            out_axes, params = [], record.params or {}
        for node, axes in zip(record.outs, out_axes):
            if node not in self.axes or not _same_node_as_input(node, record.ins):
                self.axes[node] = axes
        tags = self._tags_of(record.ins)
        if record.outs and (tags or spec.name in PROJECTIONS):
            self._tag_outputs(spec, record, in_axes, shapes, params, tags)
        event_index = len(self.events)
        self.event_of_record[index] = event_index
        self.events.append(self._event(event_index, spec, record, in_axes, out_axes, params, tags))
        if record.einops is not None and len(record.outs) == 1:
            self._pending = (record.einops[0], record.outs[0], event_index, record.einops[1])

    def _pass(self, record: PassRecord) -> None:
        in_axes = [self.axes_of(n) for n in record.ins]
        self._pass_names(record.spec, record.ins, record.outs, record.out_shapes, record.frozen, in_axes)
        if record.spec.name in SCALING_OPS:
            self._note_scaling(record, in_axes)

    def _pass_names(self, spec: OpSpec, ins, outs, shapes, frozen, in_axes) -> None:
        """Ops without a row: elementwise ones pass names on by broadcasting; unknown ones name nothing."""
        for node, shape in zip(outs, shapes):
            if node in ins:
                continue   # an in-place op kept its input's node: its names stay
            if spec.names is None:
                self.axes[node] = ax.unknown_axes(tuple(shape))
                continue
            operands = [a for a, n in zip(in_axes, ins)]
            found, _ = self._names_of(spec, _PassCall(frozen, ins), operands, [shape])
            self.axes[node] = found[0]
        tags = self._tags_of(ins)
        if tags:
            tag = _single(tags)
            if tag is not None:
                for node in outs:
                    if node not in ins:
                        self.tags[node] = tag

    # -- names -------------------------------------------------------------------------------------
    def _names_of(self, spec: OpSpec, record, in_axes, shapes):
        """``(names of each output, params)``. A name rule is a function of the op, its operands'
        axes, its arguments (tensors by shape, dtype and kind) and torch's output shapes, so the same
        call in the next layer is answered from a memo. Axes are keyed by identity (each memo entry
        keeps its axes alive, so no id is reused)."""
        frozen, params = record.frozen, record.params
        try:
            key = (spec.name, tuple(map(id, in_axes)), frozen, tuple(map(tuple, shapes)),
                   None if params is None else _freeze_params(params))
            hit = self._memo.get(key)
        except TypeError:   # an argument that cannot be hashed: computed afresh
            key = hit = None
        if hit is not None:
            self.name_mismatches += hit[1]
            return hit[0], (hit[2] if params is None else params)
        args, kwargs = thaw_args(frozen)
        if params is None:
            params = record_params(spec, args, kwargs)
        shapes = [tuple(s) for s in shapes]
        if spec.names is None or not shapes:
            found, mismatched = [ax.unknown_axes(s) for s in shapes], 0
        else:
            before = self.name_mismatches
            call = Call(spec.name, args, kwargs, [None] * len(in_axes), list(in_axes), shapes, self.namer, params)
            found = self._checked(spec, call)
            mismatched = self.name_mismatches - before
        found = [self._interned.setdefault(axes, axes) for axes in found]   # equal axes: one object
        if key is not None:
            self._memo[key] = (found, mismatched, params, tuple(in_axes))
        return found, params

    def _checked(self, spec: OpSpec, call: Call) -> list[tuple[Axis, ...]]:
        """The registry's names for each output, kept only where they fit torch's own shape."""
        try:
            found = spec.names(call)
        except (IndexError, KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError):
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

    # -- provenance: which projection a tensor came from ------------------------------------------
    def _tags_of(self, nodes) -> tuple | None:
        if not self.tags:
            return None
        found = tuple(self.tags.get(n) for n in nodes)
        return found if any(t is not None for t in found) else None

    def _tag_outputs(self, spec: OpSpec, record: OpRecord, in_axes, shapes, params, input_tags) -> None:
        """q, k and v from the projection modules that made them (``q_proj``, ``c_attn`` then a split
        into three, ``proj[0]`` of a packed in-projection), carried through views and elementwise ops."""
        outs, op = record.outs, spec.name
        if op in PROJECTIONS:
            tag = _projection_here(record)
            if tag is not None:
                self.tags[outs[0]] = tag
            return
        tag = _single(input_tags or ())
        if tag is None or op in COMBINES:
            return
        parts = FUSED_PARTS.get(tag)
        if parts and len(outs) == len(parts) and op in _SPLITS:
            for out, part in zip(outs, parts):
                self.tags[out] = part
            return
        if parts and op in _PICKS:
            args, kwargs = thaw_args(record.frozen)
            picked = _fused_index(Call(op, args, kwargs, [], in_axes, shapes, self.namer, params), parts)
            if picked is not None:
                self.tags[outs[0]] = picked
            return
        for out in outs:
            self.tags[out] = tag

    def _onto_scores(self, in_axes) -> bool:
        """Is one operand a tensor of attention scores (query and key axes)?"""
        return len(in_axes) == 2 and any({"query", "key"} <= {a.role for a in axes} for axes in in_axes)

    def _note_scaling(self, record: PassRecord, in_axes) -> None:
        """``scores / s`` or ``q * s`` by a plain number: kept (as the factor applied) for the scale check."""
        args = record.frozen[0]
        if len(args) != 2 or len(record.ins) != 1:
            return
        number = args[1] if type(args[0]) is ShapeOf else args[0]
        if type(number) is ShapeOf or not isinstance(number, (int, float)) or isinstance(number, bool) or \
                number == 0:
            return
        roles = {a.role for a in in_axes[0]}
        on = "scores" if {"query", "key"} <= roles else self.tags.get(record.ins[0])
        if on in ("scores", "q", "k"):
            factor = 1 / number if "div" in record.spec.name else float(number)
            self.scalings.append({"event": max(len(self.events) - 1, 0), "factor": factor, "on": on})

    # -- einops ------------------------------------------------------------------------------------
    def _chained(self, record) -> bool:
        pending = self._pending
        return type(record) is OpRecord and record.einops is not None and record.einops[0] == pending[0] and \
            bool(record.ins) and record.ins[0] == pending[1]

    def _finish_pattern(self) -> None:
        """The pattern's output: an axis it calls heads that holds tokens is a contradiction
        (``'b (h n) d -> b h n d'``); an axis provenance left unnamed takes the pattern's name where
        that name is a declared one of the same size (``h`` -> ``H``)."""
        _, node, index, groups = self._pending
        self._pending = None
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
            event.outputs[0] = _info_like(info, axes, self.namer)
            self.axes[node] = axes

    def _pattern_axis(self, group: list[str], axis: Axis) -> Axis:
        if not axis.atoms or any(a.root != ax.UNKNOWN for a in axis.atoms):
            return axis
        names = [canonical(w) for w in group if not w.isdigit()]
        sizes = [self.namer.size_of(n) for n in names]
        if not names or None in sizes or math.prod(sizes) != axis.size:
            return axis
        return ax.Axis(tuple(ax.Atom(n, s, 1, s) for n, s in zip(names, sizes) if s != 1))

    # -- events ------------------------------------------------------------------------------------
    def _event(self, index: int, spec: OpSpec, record: OpRecord, in_axes, out_axes, params, tags) -> Event:
        view, noop, allocates, copies = record.memory
        device = record.device.type
        out_infos = [self.info(raw, axes, device) for raw, axes in zip(record.out_raw, out_axes)]
        alloc = sum(o.nbytes for o in out_infos) if allocates else 0   # bytes from the shapes read at call time
        frozen_args, frozen_kwargs = record.frozen
        in_infos = [self.info(r, a, device) for r, a in zip(record.in_raw, in_axes)]
        return new_event(index, spec.name, in_infos, out_infos, view, noop, alloc, alloc if copies else 0,
                         params or {}, record.error, record.module, tags or (None,) * len(record.ins), record.site,
                         (spec.name, frozen_args, frozen_kwargs))

    def info(self, raw: tuple, axes: tuple[Axis, ...], device: str) -> TensorInfo:
        layout = _LAYOUTS.get(raw)
        if layout is None:
            layout = _layout_facts(raw)
        shape = layout[0]
        if len(axes) != len(shape):   # (every name was checked against torch's shape when it was made)
            axes = ax.unknown_axes(shape)
        return new_info(shape, layout[1], layout[2], layout[3], layout[4], device, layout[5], axes, self.namer)

    def failed_event(self, record: OpRecord) -> Event:
        in_axes = [self.axes_of(n) for n in record.ins]
        return self._event(len(self.events), record.spec, record, in_axes, [], record.params, None)

    # -- sequences ---------------------------------------------------------------------------------
    def orient_sequences(self) -> None:
        """With ``S`` and ``T`` of one length, the first token tensor to enter is called ``T``. Where the
        run shows the other one queries it (scores of q and k whose rows are ``S`` and columns ``T``: an
        encoder that ran before its decoder), the two labels are swapped for display, so the queries'
        tokens read ``T`` and the source's ``S``, as in torch's ``nn.Transformer``."""
        if self.dims.get("S") is None or self.dims.get("S") != self.dims.get("T"):
            return
        for event in self.events:
            tags, outs = event.projections, [o.axes for o in event.outputs]
            if event.op in COMBINES and tags and tuple(tags[:2]) == ("q", "k") and outs and len(outs[0]) >= 2:
                rows, cols = (axis.atoms[0].root if len(axis.atoms) == 1 and axis.atoms[0].whole else None
                              for axis in outs[0][-2:])
                if (rows, cols) == ("S", "T"):
                    self.namer.swap_sequences()
                if {rows, cols} == {"S", "T"}:
                    return


class _PassCall:
    """The part of a record :meth:`Inference._names_of` reads, for a call without a row."""

    __slots__ = ("frozen", "params")

    def __init__(self, frozen, ins):
        self.frozen = frozen
        self.params = None


def _same_node_as_input(node: int, ins) -> bool:
    return node in ins


def _single(tags) -> str | None:
    """The one projection tag among ``tags`` (None when there is none, or two different ones)."""
    tag = None
    for t in tags:
        if t is not None and t != tag:
            if tag is not None:
                return None   # operands of two projections: the result is neither
            tag = t
    return tag


def _projection_here(record: OpRecord) -> str | None:
    """The kind of projection a linear is, from the module it runs in (or torch's packed MHA weight)."""
    kind = projection_kind(record.module) if record.module else None
    if kind is None and record.module_type == "MultiheadAttention":
        args, kwargs = thaw_args(record.frozen)
        weight = arg(args, kwargs, 1, "weight")
        shape = getattr(weight, "shape", ())
        if len(shape) == 2 and shape[0] == 3 * shape[1]:
            kind = "qkv"
    return kind


def _fused_index(call: Call, parts: tuple[str, ...]) -> str | None:
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


def _additive_params(kept) -> dict:
    """Does the added tensor hide scores (values at or below -1e4: an additive mask)? Read on CPU only,
    from the operand kept at call time (none kept: not read)."""
    if kept is None or kept.numel() == 0:
        return {}
    return {"hides": bool(kept.min().item() <= -1e4)}


def _freeze_params(params: dict) -> tuple:
    return tuple(sorted((k, _hashable(v)) for k, v in params.items()))


def _hashable(value):
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return _freeze_params(value)
    return value


def _info_like(info: TensorInfo, axes: tuple[Axis, ...], namer) -> TensorInfo:
    from dataclasses import replace

    return replace(info, dims=None, axes=axes, namer=namer)


#: raw layout -> (shape, stride, offset, dtype name, contiguous, bytes): the same layouts recur layer after layer
_LAYOUTS: dict[tuple, tuple] = {}


def _layout_facts(raw: tuple) -> tuple:
    shape, stride, offset, dtype = raw
    shape = tuple(shape)
    facts = (shape, stride, offset, _dtype_name(dtype), _is_contiguous(shape, stride),
             math.prod(shape) * dtype.itemsize)
    if len(_LAYOUTS) >= 8192:
        _LAYOUTS.clear()
    _LAYOUTS[raw] = facts
    return facts


def _is_contiguous(shape: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """torch's rule: row-major strides, ignoring axes of size 1 (and any tensor with no elements)."""
    expected = 1
    for size, step in zip(reversed(shape), reversed(stride)):
        if size == 0:
            return True
        if size != 1:
            if step != expected:
                return False
            expected *= size
    return True


_DTYPE_NAMES: dict = {}


def _dtype_name(dtype) -> str:
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).replace("torch.", "")
    return name
