"""Where a reshape cuts the features ``D`` in two (part of :func:`.head_split.head_split_order`): the cut, and
whether the code makes the cut the sizes given say (``H`` heads of ``d_k``) anywhere."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.ops import Family

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.events import TensorInfo


def feature_split(o: TensorInfo) -> tuple[str, int, int] | None:
    """``(root, outer, inner)`` when two neighbouring axes of ``o`` are the two pieces of the features
    ``D`` (outer first), as ``view(B, T, H, d_k)`` makes them; None otherwise."""
    for left, right in zip(o.axes, o.axes[1:]):
        if len(left.atoms) == len(right.atoms) == 1:
            a, b = left.atoms[0], right.atoms[0]
            if a.root == b.root == "D" and b.stride == 1 and a.stride == b.size and a.size * b.size == a.root_size:
                return a.root, a.size, b.size
    return None


def splits_as_given(analysis: Analysis, heads: int | None, d_k: int | None) -> bool:
    """Does some reshape cut ``D`` into the ``heads`` of ``d_k`` given? Then another cut of it (the
    Differential Transformer's q and k in 2·H half-heads of d_k/2, beside v in H heads of d_k) is the
    code's own finer cut, not a sign that the sizes given disagree with the code."""
    return bool(heads and d_k) and any(feature_split(o) == ("D", heads, d_k)
                                       for e in analysis.events_of(Family.RESHAPE) for o in e.outputs[:1])
