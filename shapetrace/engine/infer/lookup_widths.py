"""The width of a module's lookup table named by what a later use proves (part of :func:`.corrections.corrections`).

An ``nn.Embedding`` of relative distances or buckets, ``[T, T] -> [T, T, w]``, makes a width of the module's own:
its size decides nothing (``w`` may have the heads' size or a head's, :func:`.axis_compute.projected_width` leaves
it unnamed). A later use does: a product that sums it against a named axis (BERT's relative keys,
``einsum('bhld,lrd->bhlr', q, table)``, pair each entry of ``w`` with the same entry of the queries' ``d_k``;
SpeechT5's ``q @ table.transpose(-2, -1)``), or an op that moves it whole and gives it a name its pattern
proves (T5's bias ``rearrange(values, 'i j h -> h i j')``, then broadcast onto the scores' heads). That name is
carried back (:class:`.backward.NameWalker`, through the ops that move whole axes) up to the lookup's output, and
the walk is kept only where it reaches one: nothing else is named by this pass.

Reads: the finished inference's axes, the records. Adds: nothing to the state; returns the pins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.axes import Axis
from shapetrace.engine.infer.backward import CARRIED, NameWalker
from shapetrace.engine.infer.lined_up import sound_name
from shapetrace.engine.infer.widths import record_makers
from shapetrace.engine.op_args import parse_einsum
from shapetrace.engine.ops import Family, is_matrix_product
from shapetrace.engine.thawed import thaw_args

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.infer.state import Inference

#: what a lookup's width is followed forward through to its use: ops that keep or move whole axes of one tensor
_MOVES = CARRIED | {Family.SLICE}


def lookup_widths(inference: Inference, found: dict[int, tuple[Axis, ...]]) -> dict[int, tuple[Axis, ...]]:
    """Pins naming the unnamed width of each lookup (``embedding``) made in the forward from what a later
    use proves: a product's contraction against a sound name, or an axis move whose result names it."""
    namer, records, setup = inference.namer, inference.capture.records, inference.capture.setup
    pins: dict[int, tuple[Axis, ...]] = {}

    def axes(node: int) -> tuple[Axis, ...]:
        return pins.get(node) or found.get(node) or inference.axes.get(node) or ()

    lookups = set()
    for i, record in enumerate(records):
        spec = getattr(record, "spec", None)
        if spec is None or not spec.looks_up or i in setup or not record.outs:
            continue
        out = axes(record.outs[0])
        if out and out[-1].size > 1 and namer.label(out[-1]) is None:
            lookups.add(record.outs[0])
    if not lookups:
        return {}
    made = record_makers(inference)

    def from_lookup(node: int) -> bool:
        while node not in lookups:
            record = made.get(node)
            if record is None or record.spec.family not in _MOVES or len(set(record.ins)) != 1:
                return False
            node = record.ins[0]
        return True

    def walk(axis: Axis, start) -> None:
        walker = NameWalker(inference, {**found, **pins}, axis)
        start(walker)
        if lookups & set(walker.pins):
            for n, a in walker.pins.items():
                pins.setdefault(n, a)

    for record in records:
        spec = getattr(record, "spec", None)
        if spec is None or not record.outs or not record.ins:
            continue
        for node, position, theirs in _contracted(inference, record, axes):
            mine = axes(node)
            if mine[position].size == theirs.size and namer.label(mine[position]) is None \
                    and sound_name(namer, theirs) and from_lookup(node):
                walk(theirs, lambda w, n=node, p=position: w.back(n, p))
        if spec.family in _MOVES and len(set(record.ins)) == 1 and from_lookup(record.ins[0]):
            out = record.outs[0]
            for p, axis in enumerate(axes(out)):
                if axis.size > 1 and sound_name(namer, axis):
                    walk(axis, lambda w, r=record, n=out, q=p: w.through_op(r, n, q))
    return pins


def _contracted(inference: Inference, record, axes) -> list[tuple[int, int, Axis]]:
    """``(node, position, axis)``: axis ``position`` of operand ``node`` is summed against ``axis`` of the other
    operand (``a @ b``: ``a[-1]`` with ``b[-2]``; ``einsum``: a letter of two operands the result drops)."""
    ins = record.ins
    if len(ins) != 2 or ins[0] == ins[1]:
        return []
    a, b = axes(ins[0]), axes(ins[1])
    if is_matrix_product(record.spec):
        return [(ins[1], len(b) - 2, a[-1]), (ins[0], len(a) - 1, b[-2])] if len(a) >= 2 and len(b) >= 2 else []
    if record.spec.contraction != "subscripts":
        return []
    args, kwargs = thaw_args(record.frozen)
    equation = args[0] if args and isinstance(args[0], str) else kwargs.get("equation")
    parsed = parse_einsum(equation, [len(a), len(b)]) if isinstance(equation, str) else None
    if parsed is None or [len(t) for t in parsed["inputs"]] != [len(a), len(b)]:
        return []
    (ta, tb), found = parsed["inputs"], []
    for letter in ta:
        if letter in tb and letter not in parsed["output"] and ta.count(letter) == 1 and tb.count(letter) == 1:
            i, j = ta.index(letter), tb.index(letter)
            found += [(ins[1], j, a[i]), (ins[0], i, b[j])]
    return found
