"""Tokens added up in two different orders, or returned in another order (part of ``diagnose.RULES``).

A broadcast lines its operands up entry by entry. When two operands hold the same tokens on an axis
but in different orders (a residual ``x`` ``[B, N, D]`` in row order, Hp then Wp, plus the output of
a window attention put back without its permute, in window order), torch adds token i of one to a
different token of the other without a word: both axes have N entries. The names prove it: each
axis is a sequence of pieces of the patch grid (``Hp/2``, ``Hp%2``...), and the two sequences differ.

The finding lands where the order was lost: walking back from the add through the rows that made
the operand in window order, the first one whose input could still be put in order by a permute
and whose output no longer can (a ``view`` that merges ``Hp/2`` with ``Wp/2``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine import axes as ax
from shapetrace.engine.diagnostic import Diagnostic
from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import lines_up_by_broadcast
from shapetrace.engine.vocabulary import Role

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.events import Event, TensorInfo


def tokens_in_two_orders(analysis: Analysis) -> list[Diagnostic]:
    out = []
    namer = analysis.namer
    for e in analysis.events_where(lines_up_by_broadcast):
        if e.error or len(e.inputs) < 2:
            continue
        clash = ax.order_clash([(t.axes, t.shape) for t in e.inputs], namer)
        if clash is None:
            continue
        j, ia, ib, pa, pb = clash
        if not ax.in_root_order(e.inputs[ia].axes[-j]) and ax.in_root_order(e.inputs[ib].axes[-j]):
            ia, ib, pa, pb = ib, ia, pb, pa
        out.append(_diagnostic(analysis, e, j, ia, ib, pa))
    return out


def _diagnostic(analysis: Analysis, e: Event, j: int, ia: int, ib: int, reference: tuple) -> Diagnostic:
    """The add ``e`` lines up operand ``ib`` (in another order) with ``ia`` (``reference``'s order)."""
    a, b = e.inputs[ia], e.inputs[ib]
    where = (f"{e.op} #{e.index} lines up {fmt_named(b.dims, b.shape)} with {fmt_named(a.dims, a.shape)}: "
             f"axis {-j} holds the same tokens in both, {_shown(a.dims[-j])} in one and {_shown(b.dims[-j])} "
             "in the other, so each entry meets a different token. Torch sees equal sizes and says nothing.")
    culprit = _where_order_was_lost(analysis, e.sources[ib] if ib < len(e.sources) else None, reference)
    if culprit is None:
        return Kind.MIXED_AXIS.found(e.index, where, _FIX)
    made, axis, before, order = culprit
    src, o = made.inputs[0], made.outputs[0]
    text = (f"{made.op} #{made.index} turns {fmt_named(src.dims, src.shape)} into {fmt_named(o.dims, o.shape)}: "
            f"axis {axis} joins {_shown(o.dims[axis])}, pieces of the tokens in an order that no permute of its "
            "result can undo. " + where)
    fix = _FIX if order is None else (
        f"Put the pieces of each axis next to each other before the {made.op}: "
        f".permute({', '.join(map(str, order))}) on {fmt_named(src.dims, src.shape)} (then .contiguous()), as "
        "Swin's window_reverse does.")
    return Kind.MIXED_AXIS.found(made.index, text, fix)


def _shown(label: str | None) -> str:
    return (label or "?").replace("*", "·")


_FIX = "Undo the window partition in reverse order: permute the window axes back next to the grid axes, then view."


def tokens_returned_out_of_order(analysis: Analysis) -> list[Diagnostic]:
    """The model returns a token axis that holds every piece of its tokens, merged in another order than theirs
    (``T%3·T/3``, where ``T`` splits ``T/3·T%3``: openai/jukebox's ``transpose_block_attn`` attends over strided
    blocks and must transpose them back before the merge): output token i is another input token than i, and
    every later position-wise use (a loss, the next step's causal mask) reads the wrong one. Found where the
    order was lost (the first row back whose input could still be put in order by a permute)."""
    made = analysis.output_made
    if made is None or not 0 <= made[0] < len(analysis.events):
        return []
    out = analysis.events[made[0]].outputs[made[1]] if made[1] < len(analysis.events[made[0]].outputs) else None
    for i, axis in enumerate(out.axes if out is not None else ()):
        atoms = ax.coalesce(axis.atoms)
        if out.shape[i] < 2 or not ax.reorders_one_root(atoms) or analysis.namer.role(atoms[0].root) != Role.TOKENS:
            continue
        reference = ((atoms[0].root, 1, atoms[0].root_size),)
        row = _merged_at(analysis, made, atoms[0].root)
        if row is None:
            continue
        src, o = row.inputs[0], row.outputs[0]
        lost = next(j for j, a in enumerate(o.axes) if _out_of_order(a, atoms[0].root))
        order = _restoring_order(src, reference, analysis.namer)
        now = [analysis.namer.atom_label(a) or "?" for a in atoms]
        own = [analysis.namer.atom_label(a) or "?" for a in sorted(atoms, key=lambda a: -a.stride)]
        fix = (f"Bring {atoms[0].root}'s pieces back in its own order ({'·'.join(own)}, not {'·'.join(now)}) "
               f"before the {row.op}: a transpose of the axes that hold them (a fold split first), then the merge, "
               "undoing the regrouping in reverse.") if order is None else (
            f"Put the pieces back in {atoms[0].root}'s order before the {row.op}: .permute("
            f"{', '.join(map(str, order))}) on {fmt_named(src.dims, src.shape)} (then .contiguous()), undoing the "
            "regrouping in reverse.")
        return [Kind.MIXED_AXIS.found(row.index, (
            f"{row.op} #{row.index} turns {fmt_named(src.dims, src.shape)} into {fmt_named(o.dims, o.shape)}: axis "
            f"{lost} joins {_shown(o.dims[lost])}, every token of {atoms[0].root} but in another order than "
            f"{atoms[0].root}'s own, and the model returns them so ({fmt_named(out.dims, out.shape)}): output token i "
            "is another input token than i. Torch sees the right shape and says nothing."), fix)]
    return []


def _out_of_order(axis: ax.Axis, root: str) -> bool:
    """Does ``axis`` hold every piece of ``root`` merged in another order than the root's own (``T%3·T/3``, alone
    or inside a fold: ``B·T%3·T/3``)?"""
    return ax.reorders_one_root([a for a in ax.coalesce(axis.atoms) if a.root == root])


def _merged_at(analysis: Analysis, source: tuple, root: str):
    """The row that merged ``root``'s pieces out of order (the first one back from ``source``, through first
    operands, whose result has such an axis and whose first operand has none: Jukebox's ``a.view(bs, ql, d)``,
    not the ``Conv1D`` flatten after it), or None."""
    for _ in range(64):
        row = analysis.events[source[0]]
        if not row.inputs or not any(_out_of_order(a, root) for a in row.outputs[source[1]].axes):
            return None
        if not any(_out_of_order(a, root) for a in row.inputs[0].axes):
            return row
        source = row.sources[0] if row.sources else None
        if source is None:
            return None
    return None


def _where_order_was_lost(analysis: Analysis, source: tuple | None, reference: tuple):
    """``(row, axis, its input, a permutation that restores it)`` of the row that lost the order, walking back
    from ``source`` (``(row, output)`` of the tensor in the wrong order); None if none is found."""
    seen = 0
    while source is not None and seen < 64:
        seen += 1
        made = analysis.events[source[0]]
        out = made.outputs[source[1]] if source[1] < len(made.outputs) else None
        if out is None or not made.inputs:
            return None
        lost = _lost_axis(out, reference, analysis.namer)
        if lost is None:
            return None
        before = made.inputs[0]
        if _lost_axis(before, reference, analysis.namer) is None:
            return made, lost, before, _restoring_order(before, reference, analysis.namer)
        source = made.sources[0] if made.sources else None
    return None


def _run(axis: ax.Axis, reference: tuple, namer) -> int | None:
    """Where this axis's token pieces sit in ``reference`` if they are a run of it, in order; -1 for an
    axis with no pieces of it; None if they are out of order."""
    atoms = ax.token_pieces(axis, namer)
    roots = {p[0] for p in reference}
    if atoms is None or not any(a.root in roots for a in atoms):
        return -1
    ref_atoms = [ax.Atom(r, 0, s, n) for r, s, n in reference]
    cuts = ax.cuts_of(atoms, ref_atoms)
    pieces, reference = ax.refine(atoms, cuts), ax.refine(ref_atoms, cuts)
    if not pieces or not reference:
        return None
    n = len(pieces)
    for start in range(len(reference) - n + 1):
        if reference[start:start + n] == pieces:
            return start
    return None


def _lost_axis(t: TensorInfo, reference: tuple, namer) -> int | None:
    """The first axis of ``t`` whose token pieces are not a run of ``reference`` in order, or None."""
    for i, axis in enumerate(t.axes):
        if t.shape[i] > 1 and _run(axis, reference, namer) is None:
            return i
    return None


def _restoring_order(t: TensorInfo, reference: tuple, namer) -> list[int] | None:
    """The permutation of ``t``'s axes that puts its token pieces in ``reference``'s order (the other
    axes stay where they are)."""
    starts = {i: _run(axis, reference, namer) for i, axis in enumerate(t.axes)}
    tokens = [i for i, s in starts.items() if s is not None and s >= 0]
    if not tokens:
        return None
    ordered = iter(sorted(tokens, key=lambda i: starts[i]))
    order = [next(ordered) if i in tokens else i for i in range(len(t.axes))]
    return None if order == list(range(len(t.axes))) else order
