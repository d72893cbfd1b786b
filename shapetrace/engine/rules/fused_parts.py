"""Each part of a fused q/k/v projection read once: where each element came from, at the picks.

A fused projection of whole heads (Falcon's ``query_key_value``) is cut by indexing its heads axis
(``H+2``: H query heads, then one key head, then one value head; ``H+2*H_kv``; per group ``n_rep+2``):
``fused[..., :-2, :]``, ``fused[..., [-2], :]``, ``fused[..., [-1], :]``. Which entries of that axis each
pick takes is read from its index; where the picks of one tensor take one part twice and leave another
unread (``[-2]`` for the keys and again for the values), the values are the keys' elements and the value
heads are computed for nothing: names and shapes all agree, so only the picks' entries tell.

Reads: the events of indexing ops (their operand's labels, their recorded index, the event that made the
operand). Adds: ``fused-part-taken-twice`` findings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.axes import FUSED_HEAD_PARTS
from shapetrace.engine.diagnostic import Diagnostic
from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family
from shapetrace.engine.thawed import thaw_args

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.events import Event

_WORDS = ("query", "key", "value")


def fused_parts_taken_twice(analysis: Analysis) -> list[Diagnostic]:
    """A finding at each pick of a fused heads axis that takes entries another pick of the same tensor took,
    while no pick takes some part at all (the values from the key slot; a key from a query head's slot)."""
    groups: dict[object, list[tuple[Event, int, list[int], list[int]]]] = {}
    for e in analysis.events_of(Family.SLICE):
        found = _taken(analysis, e)
        if found is not None:
            groups.setdefault(e.sources[0] if e.sources else e.index, []).append((e, *found))
    out = []
    for picks in groups.values():
        bounds = picks[0][3]
        read = {i for _, _, entries, _ in picks for i in entries}
        unread = [p for p in range(3) if not read & set(range(bounds[p], bounds[p + 1]))]
        before: list[tuple[Event, list[int]]] = []
        for e, axis, entries, _ in picks:
            first = next((f for f, taken in before if set(taken) & set(entries)), None)
            if first is not None and unread:
                out.append(_finding(e, first, axis, entries, bounds, unread[0]))
            before.append((e, entries))
    return out


def _taken(analysis: Analysis, e: Event) -> tuple[int, list[int], list[int]] | None:
    """``(axis, entries, bounds)``: the fused heads axis ``e`` indexes, the entries it takes along it, and
    where its query, key and value parts start (and the last ends); None where it indexes no such axis."""
    operand = e.inputs[0] if e.inputs else None
    if operand is None or not e.raw_args:
        return None
    fused = [j for j, label in enumerate(operand.dims) if label in FUSED_HEAD_PARTS]
    if len(fused) != 1:
        return None
    axis, size = fused[0], operand.shape[fused[0]]
    try:
        args, _ = thaw_args(tuple(e.raw_args[1:3]))
        picked = _entries(args[1] if len(args) > 1 else None, axis, len(operand.shape), size)
    except (TypeError, ValueError, IndexError):
        return None
    widths = [int(p) if p.isdigit() else analysis.namer.size_of(p) for p in FUSED_HEAD_PARTS[operand.dims[axis]]]
    if not picked or None in widths or sum(widths) != size:
        return None
    return axis, picked, [0, widths[0], widths[0] + widths[1], size]


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


def _finding(e: Event, first: Event, axis: int, entries: list[int], bounds: list[int], unread: int) -> Diagnostic:
    o = e.inputs[0]
    parts = [p for p in range(3) if entries == list(range(bounds[p], bounds[p + 1]))]
    held = sorted({p for p in range(3) for i in entries if bounds[p] <= i < bounds[p + 1]})
    what = f"the {_WORDS[parts[0]]} part" if parts else \
        f"entr{'y' if len(entries) == 1 else 'ies'} {', '.join(map(str, entries))} (of the " \
        f"{' and '.join(_WORDS[p] for p in held)} part)"
    return Kind.FUSED_PART_TAKEN_TWICE.found(e.index, (
        f"{e.op} #{e.index} takes {what} of the fused heads {fmt_named(o.dims, o.shape)} (axis {axis}, "
        f"{o.dims[axis]}), which {first.op} #{first.index} took already, and no pick takes its {_WORDS[unread]} "
        f"part: the two tensors share elements, and the {_WORDS[unread]} heads of the projection are computed "
        "and never read."),
        f"Take each part once: its {_WORDS[unread]} part for the {_WORDS[unread]}s.")
