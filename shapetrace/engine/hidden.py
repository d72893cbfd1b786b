"""Copies torch makes without being asked: the one inside a batched ``matmul`` (plain data, no torch).

For ``a @ b`` with batch axes, torch expands both operands to the common batch
shape and reshapes each to ``(batch, rows, cols)`` before calling ``bmm``. That
reshape is a view only when the operand's batch axes chain in memory; otherwise
torch clones the operand first (``aten.clone`` under ``TorchDispatchMode``). So
``q @ k.transpose(-2, -1)`` with ``q, k`` of shape ``[B, H, T, d_k]`` taken
straight from ``x.view(B, T, H, d_k).transpose(1, 2)`` copies both operands:
``B`` and ``H`` do not chain (stride 3,072 vs 8 x 64). The rule is checked
against TorchDispatchMode in tests/engine/test_hidden.py.

>>> from shapetrace.engine.events import Event, TensorInfo
>>> q = TensorInfo((2, 8, 6, 64), (3072, 64, 512, 1), 0, "float32", False, ("B", "H", "T", "d_k"), nbytes=24576)
>>> k_t = TensorInfo((2, 8, 64, 6), (3072, 64, 1, 512), 0, "float32", False, ("B", "H", "d_k", "T"), nbytes=24576)
>>> e = Event(0, "matmul", "", "", "", [q, k_t], [])
>>> [(c.operand, c.after.stride, c.nbytes) for c in matmul_hidden_copies(e)]
[(0, (3072, 384, 64, 1), 24576), (1, (3072, 384, 6, 1), 24576)]
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from shapetrace.engine.layout import row_major
from shapetrace.engine.viewfail import view_groups

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import Event, TensorInfo


@dataclass(frozen=True)
class HiddenCopy:
    """One operand that ``matmul`` copies before ``bmm``: as it was, and as the copy lays it out."""

    operand: int
    before: TensorInfo
    after: TensorInfo
    nbytes: int
    reason: str = ""


def _batch_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return tuple(out)


def _expanded(t: TensorInfo, batch: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    lead = len(batch) - (len(t.shape) - 2)
    shape, stride = list(batch), []
    for j, size in enumerate(batch):
        k = j - lead
        if k < 0 or t.shape[k] != size:
            stride.append(0)
        else:
            stride.append(t.stride[k])
    return tuple(shape) + t.shape[-2:], tuple(stride) + t.stride[-2:]


@functools.lru_cache(maxsize=4096)   # a pure function of three tuples: every layer's matmuls ask the same
def _first_break(shape: tuple[int, ...], stride: tuple[int, ...], target: tuple[int, ...]) -> tuple[int, int] | None:
    for group in view_groups(shape, target):
        for a, b in zip(group.inputs, group.inputs[1:]):
            if stride[a] != shape[b] * stride[b]:
                return a, b
    return None


def _reason(t: TensorInfo, shape, stride, target, pair: tuple[int, int]) -> str:
    lead = len(shape) - len(t.shape)
    names = [(t.dims[j - lead] if j >= lead and t.dims[j - lead] else f"dim{j}") for j in range(len(shape))]
    a, b = pair
    return (f"bmm needs it as one batch of matrices, shape ({', '.join(f'{s:,}' for s in target)}), but "
            f"{names[a]} and {names[b]} do not chain in memory (stride {stride[a]:,} ≠ {shape[b]:,} × "
            f"{stride[b]:,}), so torch clones it first")


def matmul_hidden_copies(event: Event) -> list[HiddenCopy]:
    """The operands a batched ``matmul``/``@`` clones before ``bmm`` (both operands 3-D or more)."""
    if not event.spec.copies_inside or len(event.inputs) != 2 or event.error:
        return []
    a, b = event.inputs
    if len(a.shape) < 3 or len(b.shape) < 3:
        return []  # mm/mv and the folding path for a 2-D operand are not modelled
    batch = _batch_shape(a.shape[:-2], b.shape[:-2])
    if batch is None:
        return []
    out = []
    for n, t in enumerate((a, b)):
        shape, stride = _expanded(t, batch)
        target = (math.prod(batch),) + t.shape[-2:]
        pair = _first_break(shape, stride, target)
        if pair is not None:
            size = 4 if t.dtype == "float32" else (t.nbytes // max(math.prod(t.shape), 1) or 4)
            after = replace(t, shape=shape, stride=row_major(shape), storage_offset=0, contiguous=True,
                            nbytes=math.prod(shape) * size)
            out.append(HiddenCopy(n, t, after, after.nbytes, _reason(t, shape, stride, target, pair)))
    return out


def note_hidden_copies(events: Sequence[Event]) -> None:
    """The pass that stores each event's hidden copies (:attr:`.events.Event.hidden_copies`): run once the
    names are final (the reason names the operand's axes), so an event carries plain data only.

    Reads: each event's op (its spec's ``copies_inside``), error, inputs' layouts and names.
    Adds: ``event.hidden_copies`` of the ops that may copy inside (a batched ``matmul``)."""
    for event in events:
        if event.spec.copies_inside and not event.error:
            event.hidden_copies = tuple(matmul_hidden_copies(event))
