"""The classroom page's strip of ops, folded as the table folds (plain data, no Rich, no torch).

A one-block trace gets one chip per op. A whole model gets one chip per layer (``model.layers.0``)
and one chip per run of layers identical to an earlier one (``model.layers.1-79``, the table's
``the same 37 ops as model.layers.0``); a loop's later iterations (``the same three ops as #0-#2,
99 more times``) get one chip as well. A chip opens into its parts: a run of layers into one chip per
layer, a layer or a loop iteration into its ops. The page opens the chips on the path to the op it
shows, so the strip stays a few rows high for any number of ops.

Nodes are JSON-ready: an int is the position of one op in the page's list of ops; a group is
``{"label", "title", "from", "to", "kids"}`` with ``from``/``to`` the positions of its first and last op.

Op data is shared the same way: :func:`repeat_of` finds, for each op, an earlier op whose every
recorded fact is the same (a folded layer's ops, a loop's iterations), so the page keeps one copy of
its row, sentence and diagram.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from shapetrace.app.folding import fold_events
from shapetrace.app.layers import Layer, LayerFold, event_facts, fold_layers, layered, split_layers

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import Event

Node = Any  # int | dict[str, Any]


def repeat_of(events: Sequence[Event], keep: Collection[int] = ()) -> dict[int, int]:
    """``{position: earlier position}`` for every op identical, fact for fact, to an earlier op.

    Ops in ``keep`` (diagnosed ones) are never shared, in either direction: their notes are their own.
    """
    keep = frozenset(keep)
    first: dict[tuple, int] = {}
    out: dict[int, int] = {}
    for i, e in enumerate(events):
        if e.index in keep:
            continue
        key = event_facts(e)
        j = first.setdefault(key, i)
        if j != i:
            out[i] = j
    return out


def strip_nodes(events: Sequence[Event], keep: Collection[int] = ()) -> list[Node]:
    """The strip's chips for ``events`` (in page order); ``keep``: diagnosed ops, never folded away."""
    position = {e.index: i for i, e in enumerate(events)}
    if not layered(events):
        return _with_loops(list(events), position, keep)
    folds = {f.layers[0].events[0].index: f for f in fold_layers(events, None, keep)}
    nodes: list[Node] = []
    pending: list[Event] = []  # ops outside any layer, between layers
    skip_until = -1
    for item in split_layers(events):
        if isinstance(item, Layer):
            nodes += _with_loops(pending, position, keep)
            pending = []
            first = item.events[0].index
            if first <= skip_until:
                continue
            fold = folds.get(first)
            if fold is not None:
                nodes.append(_fold_node(fold, position, keep))
                skip_until = fold.events[-1].index
            else:
                nodes.append(_layer_node(item, position, keep))
        else:
            pending.append(item)
    return nodes + _with_loops(pending, position, keep)


def _group(label: str, title: str, kids: list[Node], events: Sequence[Event], position: dict[int, int]) -> dict:
    return {"label": label, "title": title, "from": position[events[0].index], "to": position[events[-1].index],
            "kids": kids}


def _layer_node(layer: Layer, position: dict[int, int], keep: Collection[int]) -> dict:
    n = len(layer.events)
    kids = _with_loops(list(layer.events), position, keep)
    return _group(layer.path, f"{layer.path}: {n} op{'s' if n != 1 else ''}", kids, layer.events, position)


def _fold_node(fold: LayerFold, position: dict[int, int], keep: Collection[int]) -> dict:
    first, last = fold.layers[0], fold.layers[-1]
    label = first.path if first is last else f"{first.stack}.{first.number}-{last.number}"
    kids = [_layer_node(layer, position, keep) for layer in fold.layers]
    return _group(label, fold.sentence, kids, fold.events, position)


def _with_loops(events: list[Event], position: dict[int, int], keep: Collection[int]) -> list[Node]:
    """One chip per op, but a loop's later iterations as one chip that opens into one chip per iteration."""
    loops = {f.events[0].index: f for f in fold_events(events, keep=keep)
             if f.times > 1 and f.original[-1].index + 1 == f.events[0].index}
    nodes: list[Node] = []
    i = 0
    while i < len(events):
        loop = loops.get(events[i].index)
        if loop is None:
            nodes.append(position[events[i].index])
            i += 1
            continue
        period = len(loop.original)
        iterations = [loop.events[k:k + period] for k in range(0, len(loop.events), period)]
        kids = [_group(f"#{it[0].index}-#{it[-1].index}", f"iteration {n + 2} of the loop at "
                       f"#{loop.original[0].index}-#{loop.original[-1].index}",
                       [position[e.index] for e in it], it, position) for n, it in enumerate(iterations)]
        label = f"#{loop.events[0].index}-#{loop.events[-1].index} ×{loop.times}"
        nodes.append(_group(label, loop.sentence, kids, loop.events, position))
        i += len(loop.events)
    return nodes
