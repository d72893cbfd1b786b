"""A regrouping that only moves data and is undone before anything computes on it: no mix of tokens.

MobileViT (huggingface/transformers ``MobileViTLayer.unfolding``) cuts a feature map ``[B, C, H, W]`` into
patches with ``reshape(B * C * n_h, p_h, n_w, p_w).transpose(1, 2).reshape(B, C, N, P)``: the first reshape's
leading axis holds pieces of B, C and the row blocks of H (``B·D·Hp/2``), which read alone is a mix of
tokens with channels; but that axis is only a loop index for the next transpose, and the reshape right after
it gives back clean axes (``[B, D, Hp/2·Wp/2, Hp%2·Wp%2]``). No op computed along the mixed axis, so no token
was mixed with anything: what decides is the tensor the movement ends in. What proves it, from the record:

* every op that reads the mixed result, and every op reading theirs in turn, only moves data (a reshape or
  view, an axis order, ``contiguous``), never slices, expands, joins or computes;
* every tensor of that movement that something else reads (or that nothing reads) has no mixed axis, and no
  axis holding two pieces of one axis apart (Swin's ``window_reverse`` without its permute gives
  ``Hp/2·Wp/2·Hp%2·Wp%2``: each piece a token piece, the rows of windows interleaved); the walk
  stops there (a move of that clean tensor further on is judged at its own op).

A movement that ends in a mixed tensor keeps its error (MobileViT's ``folding`` without its ``transpose(1, 2)``
ends in ``[B, D, ·, ·]`` whose rows mix row blocks with columns), and so does a mix that a product, a norm, a
slice or an elementwise op reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.axes import coalesce
from shapetrace.engine.events import readers_of
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic

#: ops that only move data: the same elements in a new shape or order
_MOVES = frozenset({Family.RESHAPE, Family.AXIS_ORDER, Family.CONTIGUOUS})
_MIXES = ("error", "warning")


def undone_regroups(analysis: Analysis, found: list[Diagnostic]) -> list[Diagnostic]:
    """``found`` less the ``mixed-axis`` errors on moves whose every path of moves ends in clean axes."""
    readers = readers_of(analysis.events)
    return [d for d in found if not (d.kind == Kind.MIXED_AXIS and d.event is not None
                                     and _undone(analysis, readers, d.event))]


def _moves(e) -> bool:
    return e.spec is not None and e.spec.family in _MOVES and len(e.inputs) == 1 and len(e.outputs) == 1


def _mixed(namer, info) -> bool:
    """An axis that mixes, or one holding pieces of one axis apart from each other (Swin's grid read back
    without its permute: ``Hp/2·Wp/2·Hp%2·Wp%2``, rows of windows interleaved, which alone is no mix)."""
    return any(namer.mix_kind(a) in _MIXES or _split_apart(a) for a in info.axes)


def _split_apart(axis) -> bool:
    roots = [a.root for a in coalesce(axis.atoms)]
    return len(set(roots)) < len(roots)


def _undone(analysis: Analysis, readers: dict, start: int) -> bool:
    namer = analysis.namer
    e = analysis.events[start]
    if not _moves(e) or not any(namer.mix_kind(a) == "error" for a in e.outputs[0].axes):
        return False   # a mix another rule proves (a table's heads cut across its rows) is not this one
    todo, seen, ended = [start], set(), False
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        uses = [r for r, _ in readers.get((i, 0), [])]
        moves = [r for r in uses if _moves(r)]
        if len(moves) == len(uses) and uses:
            todo.extend(r.index for r in moves)
            continue
        # something else reads this tensor, or nothing does: an end (moves past it start from clean axes,
        # and a mix they make is their own op's finding)
        if _mixed(namer, analysis.events[i].outputs[0]):
            return False
        ended = True
    return ended
