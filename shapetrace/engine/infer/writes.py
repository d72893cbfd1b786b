"""Writes: the names a write into a tensor proves for its target.

Reads: a write record (``cache[:, :, s:e] = k``, ``index_copy_``, ``copy_``), its operands' axes and
the slice it wrote through. Adds: ``state.writes`` (target node -> the names it holds from then on)
and the target's ``state.axes``; a buffer written in slices (``state.sliced_from``) is named too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine import axes as ax
from shapetrace.engine.axes import Axis
from shapetrace.engine.capture import OpRecord, PassRecord
from shapetrace.engine.ops import (
    arg,
    write_kind,
)
from shapetrace.engine.thawed import TensorStub, thaw_args

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.infer.state import Inference


#: the name of a buffer's axis that holds token positions written in parts (a static cache's length)
CAPACITY = "L"
#: the name of a buffer's axis that holds batch slots written in parts (meta-llama's ``cache_k[:bsz]``,
#: a cache made for a larger batch than the one written)
BATCH_CAPACITY = "B_max"
#: the role a value's axis written in part must have for the target's axis to take each capacity name
_CAPACITY_OF_ROLE = {"tokens": CAPACITY, "batch": BATCH_CAPACITY}


def written(state: Inference, record: OpRecord, in_axes) -> OpRecord:
    """A write (``cache[:, :, s:e] = k``, ``index_copy_``, ``copy_``): the names it proves for its
    target are noted, the rest of the record reads the target with them (``in_axes`` is updated in
    place: its row shows what the write made), and its result is the target itself (``__setitem__``
    returns nothing)."""
    if record.error is None:
        note_write(state, record, in_axes)
        target = record.ins[0]
        for position, node in enumerate(record.ins):
            if node == target:
                in_axes[position] = state.axes_of(target)
    if not record.outs and record.error is None:
        record = record._replace(outs=record.ins[:1], out_raw=record.in_raw[:1])
    return record


def note_write(state: Inference, record: PassRecord, in_axes) -> None:
    """A write into a tensor (``cache[:, :, s:e] = k``, ``cache.index_copy_(2, pos, k)``,
    ``buf.copy_(x)``): where the target's axes are unnamed, the written values name them. An axis
    written whole takes the value's name; one written in part along a token axis holds positions
    (``L``, a capacity of tokens); one written in part along the batch (``cache_k[:bsz]``, a cache made
    for a larger batch) holds batch slots (``B_max``: its first ``bsz`` are this batch's entries, the rest
    another call's, so it is never named ``B``). The record of the write reads its target so named from here on
    (:func:`written`); records before it that used the old names are walked again with them as pins
    (:func:`.state.corrected`)."""
    target, value = record.ins[0], record.ins[-1]
    if target == value:
        return
    mine, theirs = in_axes[0], in_axes[-1]
    lined = {p: (theirs[v], whole) for p, (v, whole) in write_lines(record, len(mine), len(theirs)).items()}
    pinned, changed = list(state.writes.get(target, mine)), False
    for p, (axis, whole) in lined.items():
        if state.namer.label(pinned[p]) is not None or state.namer.label(axis) is None:
            continue
        if whole and axis.size == pinned[p].size:
            pinned[p], changed = axis, True
        elif not whole and state.namer.role(axis.atoms[0].root) in _CAPACITY_OF_ROLE:
            capacity = _CAPACITY_OF_ROLE[state.namer.role(axis.atoms[0].root)]
            if capacity == BATCH_CAPACITY and not _from_first_slot(record, p):
                continue   # (a batch written elsewhere than its first slots: cache[:bsz] would not be it)
            pinned[p], changed = ax.root_axis(capacity, pinned[p].size), True
    if changed:
        state.writes[target] = pinned = tuple(pinned)   # what it holds from here on
        state.rename(target, pinned)
        name_sliced_buffer(state, target, tuple(pinned))


def _from_first_slot(record, p: int) -> bool:
    """Does the write's index cut axis ``p`` of its target from slot 0 (``cache_k[:bsz, ...]``)?"""
    if write_kind(record.spec) != "index":
        return False
    args, _ = thaw_args(record.frozen)
    items = args[1] if len(args) > 1 and isinstance(args[1], tuple) else args[1:2]
    item = items[p] if p < len(items) and ... not in items[:p + 1] else None
    return isinstance(item, slice) and item.start in (None, 0) and item.step in (None, 1)


def name_sliced_buffer(state: Inference, view: int, named: tuple[Axis, ...]) -> None:
    """A write into a slice of a buffer names the buffer too, on the axes the slice keeps whole:
    ``key_states[..., :nope].copy_(k_nope)`` fills a ``new_empty`` buffer in parts (transformers'
    DeepSeek latent attention), and the buffer is what the attention product reads."""
    found = state.sliced_from.get(view)
    if found is None:
        return
    base, record = found
    mine = list(state.writes.get(base, state.axes_of(base)))
    args, _ = thaw_args(record.frozen)
    changed = False
    for p, (v, whole) in written_axes(args[1] if len(args) > 1 else None, len(mine), len(named)).items():
        axis = named[v]
        if whole and state.namer.label(mine[p]) is None and state.namer.label(axis) is not None and \
                axis.size == mine[p].size:
            mine[p], changed = axis, True
    if changed:
        state.writes[base] = mine = tuple(mine)
        state.rename(base, mine)


def write_lines(record, ndim: int, value_ndim: int) -> dict[int, tuple[int, bool]]:
    """A write's target axis -> (the value's axis lined up with it, written whole?)."""
    args, kwargs = thaw_args(record.frozen)
    kind = write_kind(record.spec)
    if kind == "whole":
        return {p: (v, True) for v, p in enumerate(range(ndim - value_ndim, ndim)) if p >= 0}
    if kind == "rows":
        if value_ndim != ndim:
            return {}
        dim = arg(args, kwargs, 1, "dim", 0) % ndim
        return {p: (p, p != dim) for p in range(ndim)}
    return written_axes(args[1] if len(args) > 1 else None, ndim, value_ndim)


def written_axes(index, ndim: int, value_ndim: int) -> dict[int, tuple[int, bool]]:
    """``target[index] = value``: target axis -> (the value's axis lined up with it, written whole?).
    Basic indexing only (ints drop an axis, slices keep it, one 1-D tensor index keeps it); the value
    broadcasts onto the indexed region from the right."""
    items = index if isinstance(index, tuple) else (index,)
    if any(i is None for i in items):
        return {}
    if ... in items:
        cut = items.index(...)
        items = items[:cut] + (slice(None),) * (ndim - len(items) + 1) + items[cut + 1:]
    items = items + (slice(None),) * (ndim - len(items))
    kept: list[tuple[int, bool]] = []
    for p, item in enumerate(items[:ndim]):
        if type(item) is int:
            continue
        if type(item) is slice:
            kept.append((p, item == slice(None)))
        elif isinstance(item, TensorStub) and len(item.shape) == 1:
            kept.append((p, False))
        else:
            return {}
    start = len(kept) - value_ndim
    return {p: (k - start, whole) for k, (p, whole) in enumerate(kept) if k >= start}
