"""Where a name on a cache came from: the write that put it there (used by ``diagnose``).

A static cache is a buffer made with ``new_zeros``: nothing names it but what is written into it.
``cache[:, :, s:e] = k`` with ``k`` still ``[B, T, H, d_k]`` (the transpose forgotten, T == H) puts
the tokens on the cache's head axis, and torch checks only the sizes. The contradiction shows later,
when the keys read back from the cache meet the queries in a product; the fact that is wrong is the
write, so that is where the finding belongs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.ops import LAYOUT_FAMILIES, Family

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.axes import Axis
    from shapetrace.engine.events import Event

_THROUGH = LAYOUT_FAMILIES | {Family.WRITE}


def write_behind(analysis: Analysis, e: Event, operand: int, axis: Axis) -> Event | None:
    """The write that gave ``axis`` (of ``e``'s operand) its name, reached back through the layout ops
    (slices, transposes, views) that read the written tensor; None when the name came another way."""
    source = e.sources[operand] if operand < len(e.sources) else None
    for _ in range(64):
        if source is None:
            return None
        made = analysis.events[source[0]]
        family = made.spec.family
        if family not in _THROUGH or not made.inputs:
            return None
        if family is Family.WRITE:
            target, value = made.inputs[0], made.inputs[-1]
            return made if axis in target.axes and axis in value.axes else None
        source = made.sources[0] if made.sources else None
    return None


def swap_for(value_dims, wrong: str, right: str) -> str | None:
    """``transpose(i, j)`` that puts ``right`` where the value has ``wrong`` (both among its axes)."""
    if wrong in value_dims and right in value_dims:
        i, j = sorted((value_dims.index(wrong), value_dims.index(right)))
        return f"transpose({i}, {j})"
    return None
