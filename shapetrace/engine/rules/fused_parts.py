"""Each part of a fused q/k/v projection read once: where each element came from, at the picks.

A fused projection is cut by indexing an axis of q, k and v parts side by side (:data:`~..axes.FUSED_PARTS`):
the heads axis of Falcon's ``query_key_value`` viewed ``(B, T, H + 2, d_k)`` (``H+2``: H query heads, then
one key head, then one value head; ``H+2*H_kv``; per group ``n_rep+2``), picked ``fused[..., :-2, :]``,
``fused[..., [-2], :]``, ``fused[..., [-1], :]``; or the width itself (``D+2*d_k``) and its key/value half
(``d_k+d_k``) sliced. Which entries of that axis each pick takes is read from its index; where the picks of
one tensor take entries twice and leave a part unread (``[-2]`` for the keys and again for the values), the
two tensors share elements and that part is computed for nothing: names and shapes all agree, so only the
picks' entries tell.

Reads: the events of indexing ops (their operand's labels, their recorded index, the event that made the
operand). Adds: ``fused-part-taken-twice`` findings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.axes import FUSED_PARTS
from shapetrace.engine.diagnostic import Diagnostic
from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family
from shapetrace.engine.thawed import thaw_args

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.events import Event

def fused_parts_taken_twice(analysis: Analysis) -> list[Diagnostic]:
    """A finding at each pick of a fused axis that takes entries another pick of the same tensor took,
    while no pick takes some part at all (the values from the key slot; a key from a query head's slot)."""
    groups: dict[object, list[tuple[Event, int, list[int], list[tuple[int, int, str]]]]] = {}
    for e in analysis.events_of(Family.SLICE):
        found = _taken(analysis, e)
        if found is not None:
            groups.setdefault(e.sources[0] if e.sources else e.index, []).append((e, *found))
    out = []
    for picks in groups.values():
        parts = picks[0][3]
        read = {i for _, _, entries, _ in picks for i in entries}
        unread = [word for start, end, word in parts if not read & set(range(start, end))]
        before: list[tuple[Event, list[int]]] = []
        for e, axis, entries, _ in picks:
            first = next((f for f, taken in before if set(taken) & set(entries)), None)
            if first is not None and unread:
                out.append(_finding(e, first, axis, entries, parts, unread[0]))
            before.append((e, entries))
    return out


def _taken(analysis: Analysis, e: Event) -> tuple[int, list[int], list[tuple[int, int, str]]] | None:
    """``(axis, entries, parts)``: the fused axis ``e`` indexes, the entries it takes along it, and each of
    its parts' ``(start, end, word)``; None where it indexes no such axis."""
    operand = e.inputs[0] if e.inputs else None
    if operand is None or not e.raw_args:
        return None
    fused = [j for j, label in enumerate(operand.dims) if label in FUSED_PARTS]
    if len(fused) != 1:
        return None
    axis, size = fused[0], operand.shape[fused[0]]
    try:
        args, _ = thaw_args(tuple(e.raw_args[1:3]))
        picked = _entries(args[1] if len(args) > 1 else None, axis, len(operand.shape), size)
    except (TypeError, ValueError, IndexError):
        return None
    parts, start = [], 0
    for name, word in FUSED_PARTS[operand.dims[axis]]:
        width = int(name) if name.isdigit() else analysis.namer.size_of(name)
        if width is None:
            return None
        parts.append((start, start + width, word))
        start += width
    return (axis, picked, parts) if picked and start == size else None


def _entries(index, axis: int, ndim: int, size: int) -> list[int] | None:
    """The entries along ``axis`` an index of basic or list form takes, in order (None: another form)."""
    items = list(index) if isinstance(index, tuple) else [index]
    if any(i is None for i in items) or sum(i is Ellipsis for i in items) > 1:
        return None
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at:at + 1] = [slice(None)] * (ndim - len(items) + 1)
    items += [slice(None)] * (ndim - len(items))
    item = items[axis]
    if isinstance(item, slice):
        return list(range(size))[item]
    if isinstance(item, list) and all(isinstance(i, int) for i in item):
        return [i % size for i in item]
    return None


def _finding(e: Event, first: Event, axis: int, entries: list[int], parts: list[tuple[int, int, str]],
             unread: str) -> Diagnostic:
    o = e.inputs[0]
    whole = [word for start, end, word in parts if entries == list(range(start, end))]
    held = [word for start, end, word in parts if any(start <= i < end for i in entries)]
    what = f"the {whole[0]} part" if whole else \
        f"entr{'y' if len(entries) == 1 else 'ies'} {', '.join(map(str, entries))} (of the {' and '.join(held)} part)"
    return Kind.FUSED_PART_TAKEN_TWICE.found(e.index, (
        f"{e.op} #{e.index} takes {what} of the fused {fmt_named(o.dims, o.shape)} (axis {axis}, "
        f"{o.dims[axis]}), which {first.op} #{first.index} took already, and no pick takes its {unread} "
        f"part: the two tensors share elements, and the {unread} part of the projection is computed and "
        "never read."),
        f"Take each part once: its {unread} part for the {unread}s.")
