"""Pieces: a projection's width split into pieces, named by what each piece proves (part of
:func:`.corrections.corrections`).

A fused projection cut into more pieces than q, k and v (Hymba's ``in_proj`` that also makes the
state-space branch's ``x`` and gate ``z``, PaLM's parallel block ``q, k, v, ff``) has a width no
declared name spells, so the walk leaves it unnamed and every piece with it: the grouped-query head
order and all that follows are unchecked. Each piece says what it is by its use, not by its size: a
piece viewed ``(..., H, d_k)`` and read as the queries of an attention (the first operand of
``scaled_dot_product_attention`` or of the scores' product) is ``H·d_k`` (``D`` where D = H·d_k); one
viewed ``(..., H_kv, d_k)`` and read as keys or values (a later operand) is ``D_kv`` (``D`` where H_kv
heads are H heads, or H_kv is not declared and it has H heads). A piece no use names keeps a width of
its own, ``F[a:b]`` (a range of the projection's own width ``F``, role-less): the projection's width is the
sum of the pieces in order (``D+D_kv+D_kv+F[128:192]+F[192:256]``), whose slices at the cut points are
those pieces (:func:`..axes.sliced`). Equal sizes decide nothing: a piece as wide as D that no attention reads as
queries stays its own width.

Reads: the finished first walk (the records, each node's shape, the projections' axes; which nodes
come from parameters only). Adds: nothing to the state; returns pins ``{node: axes}``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine import axes as ax
from shapetrace.engine.axes import Axis
from shapetrace.engine.capture import OpRecord
from shapetrace.engine.infer.widths import record_readers
from shapetrace.engine.opspec import Family
from shapetrace.engine.vocabulary import PROJECTED

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.infer.state import Inference

#: ops that read q, k and v as attention does: the first operand is the queries
_ATTENTION = (Family.PRODUCT, Family.FUSED_ATTENTION)


def named_pieces(state: Inference, unproven: dict[int, tuple[Axis, ...]]) -> dict[int, tuple[Axis, ...]]:
    """Pins naming each projection whose features are unnamed, a width of its own (``F``) or named by their
    width alone and unproven (:func:`.widths.unproven_widths`), and cut by one split into pieces, at least
    one of which a use proves (see the module's docstring)."""
    readers: dict[int, list] | None = None
    pins: dict[int, tuple[Axis, ...]] = {}
    for record in state.capture.records:
        if type(record) is not OpRecord or record.spec.family is not Family.PROJECTION or not record.outs:
            continue
        node = record.outs[0]
        axes = unproven.get(node) or state.axes.get(node)
        if not axes or state.namer.label(axes[-1]) not in (None, PROJECTED) or not _reads_features(state, record):
            continue
        readers = readers if readers is not None else record_readers(state)
        root = _pieces_root(state, readers, node)
        if root is not None:
            pins[node] = axes[:-1] + (ax.root_axis(root, axes[-1].size),)
    return pins


def named_on_the_way(state: Inference, pins: dict[int, tuple[Axis, ...]]) -> set[int]:
    """The tensors between each projection in ``pins`` and the first attention that reads what it became: with
    the pieces named, the second walk names them itself, so a pin made from the first walk's unnamed pieces
    (the heads a product proves, carried back with the head width unnamed) is not theirs."""
    readers, found = record_readers(state), set()
    for node in pins:
        frontier = [node]
        for _ in range(16):
            later = []
            for tensor in frontier:
                for record in readers.get(tensor, ()):
                    if record.spec.family in (*_ATTENTION, Family.PROJECTION, Family.MODULE_ATTENTION):
                        continue
                    later += [out for out in record.outs if out not in found]
                    found.update(record.outs)
            frontier = later
    return found


def _pieces_root(state: Inference, readers: dict, node: int) -> str | None:
    """The sum naming ``node``'s width by its pieces, where one split cuts it into two or more pieces and a
    use names at least one of them; else None."""
    shape = tuple(state.capture.nodes[node].shape)
    splits = [r for r in readers.get(node, ()) if r.spec.family is Family.SPLIT and _cuts_width(state, r, shape)]
    if len(splits) != 1:
        return None
    named = [_piece_name(state, readers, piece) for piece in splits[0].outs]
    if not {0} < {slot for _, slot in filter(None, named)}:
        return None   # (the queries and the keys or values that attention reads against them: one piece is no proof)
    names = [found[0] if found else None for found in named]
    terms, at = [], 0
    for name, piece in zip(names, splits[0].outs):
        width = state.capture.nodes[piece].shape[-1]
        terms.append(name or ax.indexed_label(PROJECTED, f"{at}:{at + width}"))
        at += width
    return "+".join(terms)


def _cuts_width(state: Inference, record, shape: tuple[int, ...]) -> bool:
    """Does ``record`` cut the last axis of a tensor of ``shape`` into two or more pieces side by side?"""
    outs = [tuple(state.capture.nodes[out].shape) for out in record.outs]
    return len(outs) > 1 and all(o[:-1] == shape[:-1] and o[-1] for o in outs) and \
        sum(o[-1] for o in outs) == shape[-1]


def _piece_name(state: Inference, readers: dict, piece: int) -> tuple[str, int] | None:
    """What ``piece`` proves it is, and the attention's operand that reads it: the queries' ``H·d_k`` (0) or the
    keys' or values' ``D_kv`` (1, 2; see the module's docstring), or None."""
    name_slot = _named(state, readers, piece)
    return name_slot if name_slot and name_slot[0] else None


def _named(state: Inference, readers: dict, piece: int) -> tuple[str | None, int] | None:
    namer = state.namer
    heads, kv_heads, d_k = namer.size_of("H"), namer.size_of("H_kv"), namer.size_of("d_k")
    if not heads or not d_k:
        return None
    view = _view_into_heads(state, readers, piece, d_k)
    if view is None:
        return None
    viewed_heads, viewed = view
    slot = _attention_slot(state, readers, viewed)
    queries = "D" if namer.size_of("D") == heads * d_k else "H*d_k"
    if slot is None:
        return None
    if slot == 0:
        return (queries if viewed_heads == heads else None), slot
    if kv_heads is not None and kv_heads != heads:
        return ("D_kv" if viewed_heads == kv_heads and namer.size_of("D_kv") == kv_heads * d_k else None), slot
    return (queries if viewed_heads == heads else None), slot


def _view_into_heads(state: Inference, readers: dict, piece: int, d_k: int, depth: int = 3):
    """``(heads, the view's result)``: the first view, within ``depth`` one-operand ops of ``piece``, of its
    width as (heads, d_k) with the leading axes kept; None where there is none."""
    frontier = [piece]
    for _ in range(depth):
        later = []
        for tensor in frontier:
            shape = tuple(state.capture.nodes[tensor].shape)
            for record in readers.get(tensor, ()):
                if len(_data(state, record)) != 1 or len(record.outs) != 1:
                    continue
                out = tuple(state.capture.nodes[record.outs[0]].shape)
                if record.spec.family is Family.RESHAPE:
                    if out[:-2] == shape[:-1] and out[-1] == d_k and out[-2] * d_k == shape[-1]:
                        return out[-2], record.outs[0]
                    continue
                if out == shape:
                    later.append(record.outs[0])
        frontier = later
    return None


def _attention_slot(state: Inference, readers: dict, start: int, depth: int = 16) -> int | None:
    """The operand position at which the first attention (a product of two tensors, a fused attention)
    reached from ``start`` reads what it became, within ``depth`` ops and before a projection makes new
    features of it: 0 for the queries; None where no attention or more than one position is reached."""
    frontier, seen, slots = [start], {start}, set()
    for _ in range(depth):
        later = []
        for tensor in frontier:
            for record in readers.get(tensor, ()):
                data = _data(state, record)
                if record.spec.family in _ATTENTION and len(data) > 1:
                    slots.update(i for i, n in enumerate(record.ins) if n == tensor)
                    continue
                if record.spec.family in (Family.PROJECTION, Family.MODULE_ATTENTION):
                    continue
                later += [out for out in record.outs if out not in seen]
                seen.update(record.outs)
        if slots:
            return slots.pop() if len(slots) == 1 else None
        frontier = later
    return None


def _reads_features(state: Inference, record) -> bool:
    """Does the projection read named features (a model's width, not tokens merged with features: SAINT's
    intersample rows ``(n d)``, whose attention over the batch no piece of this projection can name)?"""
    source = state.axes.get(record.ins[0]) if record.ins else None
    label = state.namer.label(source[-1]) if source else None
    return label is not None and state.namer.role(label.lstrip(ax.MIXED_PREFIX)) == "features"


def _data(state: Inference, record) -> list[int]:
    return [n for n in record.ins if n not in state.from_parameters]
