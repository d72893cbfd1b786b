"""A table's heads re-read by a view across its other axes (part of ``diagnose.RULES``).

A bias made from parameters only (Swin's relative-position table ``[N, N, H]``: an MLP's H outputs,
picked row by row by relative position) has no names of its own. Added to scores ``[B, H, T, S]``, its
axis that meets the heads is the heads (:func:`.infer.backward._bias_heads`, only where no other axis
of the scores has H entries). When the view that made that axis cuts across the table's own axes
(``[6, 6, 4]`` read as ``[4, 6, 6]``: ``view(-1, N, N)`` where ``permute(2, 0, 1)`` was meant), each
head's entries are pieces of several positions and outputs: heads are mixed with positions, whatever
the values learned. A table read straight from a parameter (nothing computed it, nothing picked its
rows) is left alone: any layout of learned values is as good as another.
"""

from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING

from shapetrace.engine.diagnostic import Diagnostic
from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.opspec import Family

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.events import Event

HEADS = "H"
#: ops that re-read a tensor without computing or picking anything
_READS = frozenset({Family.RESHAPE, Family.AXIS_ORDER, Family.CONTIGUOUS, Family.SIZE_ONE_AXIS, Family.EXPAND})


def table_heads_rechopped(analysis: Analysis) -> list[Diagnostic]:
    out = []
    for e in analysis.events_of(Family.RESHAPE):
        if e.error or not e.inputs or not e.outputs:
            continue
        src, o = e.inputs[0], e.outputs[0]
        if HEADS not in o.dims or any(src.dims) or o.dims.count(HEADS) != 1:
            continue
        p = o.dims.index(HEADS)
        if not _cut_across(tuple(src.shape), tuple(o.shape), p) or not _computed(analysis, e):
            continue
        out.append(_diagnostic(e, p))
    return out


def _cut_across(before: tuple[int, ...], after: tuple[int, ...], p: int) -> bool:
    """Whether axis ``p`` of ``after`` lies in a group of the reshape that regroups two or more axes of
    ``before`` into two or more axes (neither a split of one axis nor a merge into one)."""
    i = j = 0
    while i < len(before) or j < len(after):
        gi, gj = [i], [j]
        a, b = (before[i] if i < len(before) else 1), (after[j] if j < len(after) else 1)
        i, j = i + 1, j + 1
        while a != b:
            if a < b and i < len(before):
                a *= before[i]
                gi.append(i)
                i += 1
            elif j < len(after):
                b *= after[j]
                gj.append(j)
                j += 1
            else:
                return False
        if p in gj:
            big_in = [k for k in gi if k < len(before) and before[k] > 1]
            big_out = [k for k in gj if k < len(after) and after[k] > 1]
            return len(big_in) >= 2 and len(big_out) >= 2 and prod(before[k] for k in big_in) > 1
    return False


def _computed(analysis: Analysis, e: Event) -> bool:
    """Whether the reshaped tensor was computed or had its rows picked (not a parameter merely re-read)."""
    source, seen = (e.sources[0] if e.sources else None), 0
    while source is not None and seen < 64:
        seen += 1
        made = analysis.events[source[0]]
        if made.spec is None or made.spec.family not in _READS:
            return True
        source = made.sources[0] if made.sources else None
    return False


def _diagnostic(e: Event, p: int) -> Diagnostic:
    src, o = e.inputs[0], e.outputs[0]
    size = o.shape[p]
    text = (f"{e.op} #{e.index} turns the table {fmt_named(src.dims, src.shape)} into {fmt_named(o.dims, o.shape)}: "
            f"axis {p} is added along the heads of the scores later, but this view cuts it across the table's "
            f"axes, so each of its {size} entries holds pieces of several rows and columns of the table "
            "(heads mixed with positions). Torch sees the same number of elements and says nothing.")
    found = [k for k, s in enumerate(src.shape) if s == size]
    if len(found) == 1 and len(src.shape) == len(o.shape):
        order = [k for k in range(len(src.shape)) if k != found[0]]
        order.insert(p, found[0])
        fix = (f"Move the table's axis of {size} into place with .permute({', '.join(map(str, order))}) "
               "(then .contiguous()) instead of a view.")
    else:
        fix = "Move the table's heads axis into place with a permute, not a view."
    return Kind.MIXED_AXIS.found(e.index, text, fix, blame=((-1, p),))
