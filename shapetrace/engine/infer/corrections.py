"""Corrections: names that a later use proves for tensors named too early.

Reads: the whole inference once it has finished (writes, ``shapetrace.name`` declarations made
later, ambiguous size guesses and the broadcasts that line them up, products that show the heads,
projections named by their width alone that no use proves: :mod:`.widths`).
Adds: nothing to the state; returns ``{node: axes}`` (the pins) that :func:`.state.corrected` walks
the records again with, so that the ops before the deciding use read them too. Also the one-operand step that passes an
ambiguity on (:func:`keep_ambiguity`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine import axes as ax
from shapetrace.engine.axes import Axis
from shapetrace.engine.capture import OpRecord, PassRecord
from shapetrace.engine.infer.backward import complex_tables, heads_from_products, joined_names, stacked_pairs
from shapetrace.engine.infer.built_inputs import built_input_names
from shapetrace.engine.infer.lined_up import broadcast_names, contracted_names
from shapetrace.engine.infer.lookup_widths import lookup_widths
from shapetrace.engine.infer.module_heads import module_heads
from shapetrace.engine.infer.pieces import named_on_the_way, named_pieces
from shapetrace.engine.infer.widths import unproven_widths, widths_by_use
from shapetrace.engine.ops import (
    lines_up_by_broadcast,
)

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.infer.state import Inference


def corrections(state: Inference) -> dict[int, tuple[Axis, ...]]:
    """Names that a later use proves for tensors whose sizes fit more than one seed.

    A fresh ``torch.ones(T, T).triu(1)`` at B = T fits ``[B, T]`` and ``[T, B]``; when it is then
    broadcast onto scores ``[B, H, T, T]`` from the right (a mask, a bias), torch lines it up with
    ``[T, T]``, and that is what it is. Only an ambiguous size guess yields to its use: a guess
    that fits one seed only stays, and a use that contradicts it is a finding of the diagnostics.
    """
    found: dict[int, tuple[Axis, ...]] = {n: a for n, a in state.writes.items() if n not in state.pins}
    found.update(declared_later(state, found))
    found.update(heads_from_products(state, found))
    for node, axes in module_heads(state).items():
        found.setdefault(node, axes)
    for node, axes in joined_names(state, found).items():
        found.setdefault(node, axes)
    for node, axes in (*complex_tables(state, found).items(), *stacked_pairs(state, found).items()):
        found.setdefault(node, axes)
    for node, axes in broadcast_names(state, found).items():
        found.setdefault(node, axes)
    for node, axes in contracted_names(state, found).items():
        found.setdefault(node, axes)
    for node, axes in lookup_widths(state, found).items():
        found.setdefault(node, axes)
    for node, axes in built_input_names(state, found).items():
        found.setdefault(node, axes)
    unproven = unproven_widths(state)
    if unproven:   # a width's name no use proves (.widths): nor the writes that copied its pieces
        roots = {state.axes[n][-1].atoms[0].root for n in unproven}
        found = {n: _without(axes, roots) for n, axes in found.items()}
    pieces = named_pieces(state, unproven)
    if pieces:   # the pieces named (.pieces): a pin the first walk's unnamed pieces left partial is not theirs
        on_the_way = named_on_the_way(state, pieces)
        found = {n: axes for n, axes in found.items()
                 if n not in on_the_way or all(state.namer.label(a) is not None for a in axes)}
    for node, axes in {**widths_by_use(state), **unproven, **pieces}.items():
        found.setdefault(node, axes)
    if not state.ambiguous:
        return found
    made_from: dict[int, set[int]] = {}
    for record in state.capture.records:
        if type(record) is not OpRecord and type(record) is not PassRecord:
            continue
        if not lines_up_by_broadcast(record.spec) or len(record.ins) < 2:
            continue
        for node in record.ins:
            root = state.ambiguous.get(node)
            if root is not None and root not in found:
                if root not in made_from:
                    made_from[root] = _made_from(state, root)
                if any(other in made_from[root] for other in record.ins if other != node):
                    continue   # (a residual x + f(x): names f(x) took from x's own guess prove nothing about it)
                lined = lined_up(state, node, record.ins)
                if lined is not None and len(without_ones(lined)) == len(state.capture.nodes[root].shape):
                    found[root] = without_ones(lined)
    return found


def _made_from(state: Inference, root: int) -> set[int]:
    """Every node the records computed from ``root`` (its data flows into them), ``root`` included."""
    reached = {root}
    for record in state.capture.records:
        if (type(record) is OpRecord or type(record) is PassRecord) and any(n in reached for n in record.ins):
            reached.update(record.outs)
    return reached


def _without(axes: tuple[Axis, ...], roots: set[str]) -> tuple[Axis, ...]:
    """``axes`` with every axis holding a piece of one of ``roots`` (``3*D``, ``3*D[48:72]``) unnamed."""
    return tuple(ax.unknown_axis(a.size) if any(t.root.split("[", 1)[0] in roots for t in a.atoms) else a
                 for a in axes)


def declared_later(state: Inference, found: dict) -> dict[int, tuple[Axis, ...]]:
    """``mask = torch.ones(T, T).triu(1)`` then ``shapetrace.name(mask, "T T")``: the declaration
    speaks for the tensor before it too, where that had no names (or only a size guess that fit more
    than one seed). Names computed before are never overridden: a contradiction is a finding."""
    out: dict[int, tuple[Axis, ...]] = {}
    for node, axes in state.declared.items():
        if node in state.pins or node in found or state.capture.nodes[node].shape != tuple(a.size for a in axes):
            continue
        root = state.ambiguous.get(node)
        if root is not None:
            out.setdefault(root, axes)
        elif all(state.namer.label(a) is None for a in state.axes.get(node, ())):
            out[node] = axes
    return out


def keep_ambiguity(state: Inference, ins, outs, in_axes, out_axes) -> None:
    """A one-operand op that keeps an ambiguous guess's axes (``triu``, ``~``, ``.bool()``, or
    ``m[None, None]`` that only adds axes of size 1) passes the ambiguity on: a later use of its
    result decides the guess."""
    if len(ins) == 1 and ins[0] in state.ambiguous:
        kept = without_ones(in_axes[0])
        for node, axes in zip(outs, out_axes):
            if without_ones(axes) == kept:
                state.ambiguous.setdefault(node, state.ambiguous[ins[0]])


def lined_up(state: Inference, node: int, ins) -> tuple[Axis, ...] | None:
    """The axes ``node`` meets, from the right, in a larger operand of the same broadcast."""
    mine = state.axes.get(node)
    if mine is None:
        return None
    for other in ins:
        theirs = state.axes.get(other)
        if other == node or other in state.ambiguous or theirs is None or len(theirs) < len(mine):
            continue
        lined = theirs[len(theirs) - len(mine):]
        if all(a.size == b.size or a.size == 1 for a, b in zip(mine, lined)) and \
                all(whole_root(b) for a, b in zip(mine, lined) if a.size != 1):
            pinned = tuple(b if a.size != 1 else a for a, b in zip(mine, lined))
            return pinned if pinned != mine else None
    return None


def without_ones(axes: tuple[Axis, ...]) -> tuple[Axis, ...]:
    return tuple(a for a in axes if a.size != 1)


def whole_root(axis: Axis) -> bool:
    """A whole named axis (``T``, not a piece of one, a merge, or an unknown)."""
    return len(axis.atoms) == 1 and axis.atoms[0].whole and axis.atoms[0].root not in (ax.UNKNOWN, ax.COPIES)
