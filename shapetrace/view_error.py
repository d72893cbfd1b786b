"""Why ``view`` refused: the layout facts behind "view size is not compatible" (plain data).

Kept apart from the general layout helpers: it reads one failed event (input
shape, strides, names and the requested shape) and says which axes the view
tried to merge and why their strides cannot express the merge.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from .tracer import Event

VIEW_ERROR = "view size is not compatible"


def requested_shape(args: str) -> list[int]:
    """The target sizes from an event's args text: ``"2, 6, 512"`` -> ``[2, 6, 512]``."""
    return [int(n) for n in re.findall(r"-?\d+", args)]


def merge_groups(in_shape: Sequence[int], out_shape: Sequence[int]) -> list[list[int]]:
    """Input axes (size > 1) that each output axis is made of, where one output axis merges several."""
    ins = [i for i, s in enumerate(in_shape) if s != 1]
    outs = [s for s in out_shape if s != 1]
    groups, i = [], 0
    for size in outs:
        group, prod = [], 1
        while i < len(ins) and prod < size:
            group.append(ins[i])
            prod *= in_shape[ins[i]]
            i += 1
        if prod != size:
            return []
        if len(group) > 1:
            groups.append(group)
    return groups


def explain_view_error(e: "Event") -> str | None:
    """One paragraph on why a ``view`` raised, from its input's strides; None if not a view error."""
    if e.op != "view" or not e.error or VIEW_ERROR not in e.error or not e.inputs:
        return None
    t = e.inputs[0]
    out = requested_shape(e.args)
    if -1 in out and math.prod(t.shape):
        known = math.prod(s for s in out if s != -1)
        out = [math.prod(t.shape) // known if s == -1 else s for s in out]
    label = [n or str(s) for n, s in zip(t.dims, t.shape)]
    for group in merge_groups(t.shape, out):
        for a, b in zip(group, group[1:]):
            need = t.stride[b] * t.shape[b]
            if t.stride[a] != need:
                return (f"view #{e.index} asks for {list(out)} from {_layout(t)}: it would merge "
                        f"{' and '.join(label[i] for i in group)} into one axis, which needs {label[a]} to "
                        f"step {need} elements (= {label[b]}'s stride {t.stride[b]} x {t.shape[b]}), but "
                        f"{label[a]} steps {t.stride[a]}: after the transpose the {t.shape[b]} values of "
                        f"{label[b]} for one {label[a]} are not followed in memory by those of the next. No strides "
                        f"can express the merged axis, so view refuses. Fix: .contiguous() first (a copy of "
                        f"{_bytes(t)}), or .reshape(...), which makes the same copy for you.")
    return (f"view #{e.index} asks for {list(out)} from {_layout(t)}, which these strides cannot express; "
            "call .contiguous() first or use .reshape(...).")


def _layout(t) -> str:
    parts = [f"{n or '?'}={s}" for n, s in zip(t.dims, t.shape)]
    return f"[{', '.join(parts)}] with strides ({', '.join(map(str, t.stride))})"


def _bytes(t) -> str:
    from .explain import fmt_bytes
    return fmt_bytes(t.nbytes)
