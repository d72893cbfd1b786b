"""Rows: the :class:`~shapetrace.engine.events.Event` of each call that gets one.

Reads: the record's layouts (read at call time), its inputs' and outputs' axes, params and tags.
Adds: ``state.events``, ``state.event_of_record``, ``state.made_by`` (which row made each node), whether
a row's operands are all parameters or made from parameters only (``Event.from_parameters``), and
the scalings of scores by a number (``state.scalings``) for the scale check.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

from shapetrace.engine import axes as ax
from shapetrace.engine.axes import Axis
from shapetrace.engine.capture import OpRecord, PassRecord
from shapetrace.engine.events import Event, ShapeOf, TensorInfo, new_event, new_info
from shapetrace.engine.infer.provenance import from_parameters_only
from shapetrace.engine.ops import OpSpec

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.infer.state import Inference


def add_row(state: Inference, index: int, record: OpRecord, in_axes, out_axes, params, tags) -> int:
    """The record's event appended, traced back to the rows that made its operands; its index."""
    event_index = len(state.events)
    state.event_of_record[index] = event_index
    event = event_of(state, event_index, record.spec, record, in_axes, out_axes, params, tags)
    event.sources = tuple(map(state.made_by.get, record.ins))
    if state.carried and any(n in state.carried for n in record.ins):
        event.carried = tuple(n in state.carried for n in record.ins)
    if record.ins and from_parameters_only(state, record.ins):
        event.from_parameters = True
    if state.reduced_into:
        joined = tuple(state.reduced_into.get(n, frozenset()) for n in record.ins)
        if any(joined):
            event.joined = joined
    for position, node in enumerate(record.outs):
        state.made_by[node] = (event_index, position)
    state.events.append(event)
    return event_index


def event_of(state: Inference, index: int, spec: OpSpec, record: OpRecord, in_axes, out_axes, params, tags) -> Event:
    view, noop, allocates, copies = record.memory
    device = _device_type(record.device)
    out_infos = [shared_info(state, raw, axes, device) for raw, axes in zip(record.out_raw, out_axes)]
    alloc = sum(o.nbytes for o in out_infos) if allocates else 0   # bytes from the shapes read at call time
    frozen_args, frozen_kwargs = record.frozen
    in_infos = [shared_info(state, r, a, device) for r, a in zip(record.in_raw, in_axes)]
    module = state.capture.module_calls.path(record.module)
    return new_event(index, spec, in_infos, out_infos, view, noop, alloc, alloc if copies else 0,
                     params or {}, record.error, module, tags or (None,) * len(record.ins), record.site,
                     (spec, frozen_args, frozen_kwargs))


def shared_info(state: Inference, raw: tuple, axes: tuple[Axis, ...], device: str) -> TensorInfo:
    """:meth:`info`, one object for each layout and axes of this pass: most tensors are one row's
    output and the next row's input, and an info's labels are then resolved once. Shared only
    within one :meth:`advance` (nothing reads a label until it ends), so no info created after a
    read shares labels resolved before it. Keyed by the axes' identity: the entry keeps them alive."""
    key = (raw, id(axes), device)
    hit = state.infos.get(key)
    if hit is None:
        hit = state.infos[key] = (info(state, raw, axes, device), axes)
    return hit[0]


def info(state: Inference, raw: tuple, axes: tuple[Axis, ...], device: str) -> TensorInfo:
    layout = _LAYOUTS.get(raw)
    if layout is None:
        layout = _layout_facts(raw)
    shape = layout[0]
    if len(axes) != len(shape):   # (every name was checked against torch's shape when it was made)
        axes = ax.unknown_axes(shape)
    return new_info(shape, layout[1], layout[2], layout[3], layout[4], device, layout[5], axes, state.namer)


def failed_event(state: Inference, record: OpRecord) -> Event:
    in_axes = [state.axes_of(n) for n in record.ins]
    return event_of(state, len(state.events), record.spec, record, in_axes, [], record.params, None)


def note_scaling(state: Inference, record: PassRecord, in_axes) -> None:
    """``scores / s`` or ``q * s`` by a plain number: kept (as the factor applied) for the scale check."""
    args = record.frozen[0]
    if len(args) != 2 or len(record.ins) != 1:
        return
    number = args[1] if type(args[0]) is ShapeOf else args[0]
    if type(number) is ShapeOf or not isinstance(number, (int, float)) or isinstance(number, bool) or \
            number == 0:
        return
    roles = {a.role for a in in_axes[0]}
    on = "scores" if {"query", "key"} <= roles else state.tags.get(record.ins[0])
    if on in ("scores", "q", "k"):
        factor = 1 / number if record.spec.scaling == "divides" else float(number)
        state.scalings.append({"event": max(len(state.events) - 1, 0), "factor": factor, "on": on})


def info_like(info: TensorInfo, axes: tuple[Axis, ...], namer) -> TensorInfo:
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
_DEVICE_TYPES: dict = {}


def _device_type(device) -> str:
    """``device.type`` (``"cpu"``), remembered per device: torch builds the string afresh on each read."""
    name = _DEVICE_TYPES.get(device)
    if name is None:
        name = _DEVICE_TYPES[device] = device.type
    return name


def _dtype_name(dtype) -> str:
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).replace("torch.", "")
    return name
