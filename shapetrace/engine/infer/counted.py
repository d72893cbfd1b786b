"""The values of an index tensor where the trace itself made them: ``torch.arange`` and the ops after it.

A pick by index tensors is read by replaying it on coordinates (:mod:`.elements`); an index whose values are
not known is replaced by random ones, so each picked axis reads as "selected by an index" (``T[ids]``). But an
index the model counted itself is known exactly: ``torch.arange(n)`` (``n`` a plain size, or one read from
an axis), then only moved, reshaped, sliced, broadcast, cast or offset by a number (transformers' masks:
``batch_arange[:, None, None, None]`` and ``kv_arange[None, None, None, :]``, then
``padding_mask[batch_idx, kv_idx]``). Replayed with those values, the pick is a plain walk over the operand's
axes, and each output axis is named by the axes it walks (``B``, ``T``), as any view's; an offset or a reversed
count walks otherwise and is named (or not) by that walk. Nothing here reads a name or a size: only the records
and their arguments.

Reads: the records that made each node (``producer``). Adds: the values, or None (a record that is no count,
one replay that raises, or more than :data:`MAX_VALUES` values).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from shapetrace.engine.indices import KEEPS_VALUES
from shapetrace.engine.ops import callables_of
from shapetrace.engine.thawed import TensorStub, map_operands, thaw_args

#: the most values a count is replayed with (a mask's indices: a few hundred; a replay is a real tensor)
MAX_VALUES = 1 << 16
#: how many records back a count is followed (``arange`` -> ``+ offset`` -> ``[None, :]`` -> ``expand``)
_DEPTH = 8


def counted_values(node: int, producer: Callable[[int], object], depth: int = _DEPTH) -> torch.Tensor | None:
    """The values of ``node`` where a count the trace made holds them, else None."""
    record = producer(node)
    if record is None or depth == 0 or getattr(record, "error", None) or len(record.outs) != 1:
        return None
    shape = _shape(record)
    if shape is None or math.prod(shape) > MAX_VALUES:
        return None
    if record.spec.sized == "count":
        found = _arange(record)
    elif record.spec.family in KEEPS_VALUES and len(record.ins) == 1 and record.ins[0] != node:
        inner = counted_values(record.ins[0], producer, depth - 1)
        found = None if inner is None else _replayed(record, inner)
    else:
        return None
    return found if found is not None and tuple(found.shape) == shape else None


def _shape(record) -> tuple | None:
    """The shape of the record's one result (a row's layout, or a call without a row's shape)."""
    shapes = getattr(record, "out_shapes", None)
    if shapes is not None:
        return tuple(shapes[0]) if len(shapes) == 1 else None
    return tuple(record.out_raw[0][0]) if record.out_raw else None


def _arange(record) -> torch.Tensor | None:
    """``torch.arange(end)`` / ``(start, end[, step])`` of whole numbers, as int64."""
    args, kwargs = thaw_args(record.frozen)
    bounds = [*args, *(kwargs[k] for k in ("start", "end", "step") if k in kwargs)]
    if not 1 <= len(bounds) <= 3 or not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds):
        return None
    return torch.arange(*(int(b) for b in bounds), dtype=torch.int64)


def _replayed(record, values: torch.Tensor) -> torch.Tensor | None:
    """The record's op on ``values`` in place of its one tensor operand (its other arguments as recorded: plain
    numbers, slices, shapes); None where another argument is a tensor or no spelling of the op takes them."""
    args, kwargs = thaw_args(record.frozen)
    stubs: list[TensorStub] = []

    def put(stub: TensorStub):
        stubs.append(stub)
        return values

    args, kwargs = map_operands(args, kwargs, put)
    if len(stubs) != 1:
        return None
    kwargs = {k: v for k, v in kwargs.items() if k not in ("device", "out")}
    for fn in callables_of(record.spec):
        try:
            with torch._C.DisableTorchFunction():   # (never recorded, even while a trace records)
                found = fn(*args, **kwargs)
        except Exception:   # (a spelling that refuses these arguments: the next one)
            continue
        if isinstance(found, torch.Tensor) and not found.is_floating_point() and not found.is_complex():
            return found
    return None
