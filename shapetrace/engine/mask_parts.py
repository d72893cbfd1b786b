"""The parts a mask was combined from: a causal triangle ``|`` a padding mask, ``&``, ``+``, ``where``.

A mask given to the scores is often made by elementwise ops from several tensors (``causal | pad``,
``causal[None, None] & attention_mask[:, None, None, :]``, ``causal_bias + padding_bias``): its shape
is the broadcast of its parts', so a padding part put on the query axis (``[B, 1, T, 1]``) hides behind a
triangle that varies along both axes. :func:`mask_parts` follows each operand of a call that takes a
mask (``masked_fill``, ``scaled_dot_product_attention``, an addition onto scores, a softmax of scores) back
through the
elementwise ops that combined it, to the tensors they combined, and keeps their shapes (right-aligned
as broadcasting aligns them). Plain data for :mod:`.rules.masks`: ``{event: {operand: (shape, ...)}}``,
only for operands combined from two parts or more.
"""

from __future__ import annotations

from collections.abc import Sequence
from weakref import WeakKeyDictionary

from shapetrace.engine.capture import OpRecord, PassRecord
from shapetrace.engine.directions import causal_triangle
from shapetrace.engine.ops import Family

#: how many combining ops deep a mask is followed (a mask is a handful of parts)
DEPTH = 16
_MEMO: WeakKeyDictionary = WeakKeyDictionary()


def mask_parts_of(capture, event_of_record: dict[int, int]) -> dict[int, dict[int, tuple[tuple[int, ...], ...]]]:
    """:func:`mask_parts` of a :class:`~.capture.Capture`, found once per inference and number of records."""
    memo = _MEMO.get(capture)
    if memo is None or memo[0] != len(capture.records) or memo[1] is not event_of_record:
        found = mask_parts(capture.records, capture.nodes, event_of_record)
        memo = _MEMO[capture] = (len(capture.records), event_of_record, found)
    return memo[2]


def mask_parts(records: Sequence, nodes: Sequence, event_of_record: dict[int, int]) -> dict:
    """For each row that takes a mask (``event_of_record``: the row each record got), each operand combined
    by elementwise ops from two parts or more -> the parts' shapes; ``nodes[node].shape``: a node's shape."""
    producer: dict[int, list[int]] = {}   # node -> the records that made it, in order (an in-place call remakes it)
    found: dict[int, dict[int, tuple[tuple[int, ...], ...]]] = {}
    for index, record in enumerate(records):
        if type(record) not in (OpRecord, PassRecord):
            continue
        event = event_of_record.get(index)
        if event is not None and takes_a_mask(record):
            parts = {i: _parts(records, nodes, producer, node, DEPTH, index) for i, node in enumerate(record.ins)
                     if isinstance(node, int)}
            parts = {i: p for i, p in parts.items() if len(p) > 1}
            if parts:
                found[event] = parts
        for node in record.outs:
            if isinstance(node, int):
                producer.setdefault(node, []).append(index)
    return found


def takes_a_mask(record) -> bool:
    """A call that takes a mask, or scores a mask may have been combined into without a row of its own (a
    softmax: ``softmax(scores + bias)``, read by :mod:`.rules.cached_chunks`)."""
    return record.spec.family in (Family.MASK_FILL, Family.FUSED_ATTENTION, Family.SOFTMAX) \
        or bool(record.spec.additive)


def _parts(records, nodes, producer, node: int, depth: int, before: int) -> tuple[tuple[int, ...], ...]:
    """The shapes of the tensors elementwise ops combined into ``node`` as record ``before`` read it (its own
    shape if none did); an elementwise op of one tensor operand that keeps its shape (``~m``, ``m.bool()``,
    ``m == 0``, ``scores.float()``) is followed through, an expand to its source, and an in-place one
    (``scores += bias``) to what its operand was before it."""
    index = next((i for i in reversed(producer.get(node, ())) if i < before), None)
    record = records[index] if index is not None else None
    if record is not None and depth and (_whole_slice(record, nodes, node) or _broadcast(record, nodes, node)):
        return _parts(records, nodes, producer, record.ins[0], depth - 1, index)
    if record is None or depth == 0 or record.spec.family is not Family.ELEMENTWISE or getattr(record, "error", None):
        return (tuple(nodes[node].shape),)
    operands = [n for n in record.ins if isinstance(n, int)]
    if len(operands) == 1 and tuple(nodes[operands[0]].shape) != tuple(nodes[node].shape):
        return (tuple(nodes[node].shape),)
    return tuple(part for n in operands for part in _parts(records, nodes, producer, n, depth - 1, index))


def _broadcast(record, nodes, node: int) -> bool:
    """Is ``record`` an ``expand`` (``expand_as``, ``broadcast_to``) of a tensor of no more axes? Its source,
    right-aligned, broadcasts exactly as the expand did: ``pad[:, None, :, None].expand(B, 1, T, T)`` is the
    part ``[B, 1, T, 1]`` (on the queries), not ``[B, 1, T, T]``."""
    return record.spec.family is Family.EXPAND and bool(record.ins) and isinstance(record.ins[0], int) \
        and len(nodes[record.ins[0]].shape) <= len(nodes[node].shape)


def _whole_slice(record, nodes, node: int) -> bool:
    """Is ``record`` an indexing by plain slices that keeps every axis whole (OLMo's
    ``attention_bias[:, :, key_len - query_len : key_len, :key_len]`` at the full length)? Each axis stays
    in its place, so the parts keep theirs."""
    if not record.spec.indexes or not record.ins or not isinstance(record.ins[0], int):
        return False
    args = record.frozen[0] if record.frozen else ()
    index = args[1] if len(args) > 1 else None
    index = index if isinstance(index, tuple) else (index,)
    slices = all(isinstance(i, tuple) and len(i) == 3 and i[2] in (None, 1)
                 and all(v is None or isinstance(v, int) for v in i) for i in index)
    return slices and tuple(nodes[record.ins[0]].shape) == tuple(nodes[node].shape)


def from_triangles(records: Sequence, event_of_record: dict[int, int], events: Sequence) -> frozenset[int]:
    """The rows of hiding fills (``masked_fill``) whose mask was made, through any ops, from a causal triangle
    (a ``tril``/``triu`` cut at the causal diagonal: :func:`.directions.causal_triangle`): the code built a
    causal mask for those scores, whatever it combined it with afterwards."""
    causal: set[int] = set()   # nodes made from a causal triangle by ops that only combine or move masks
    found = set()
    for index, record in enumerate(records):
        if type(record) not in (OpRecord, PassRecord):
            continue
        event = event_of_record.get(index)
        ins = [n for n in record.ins if isinstance(n, int)]
        if event is not None and record.spec.family is Family.MASK_FILL and len(ins) > 1 and ins[1] in causal:
            found.add(event)
        made = (event is not None and event < len(events) and causal_triangle(events[event])) or \
            (record.spec.family in _MASK_MOVES and any(n in causal for n in ins))
        if made:
            causal.update(n for n in record.outs if isinstance(n, int))
    return frozenset(found)


#: ops through which a mask stays a mask (combined, cast, viewed, cut, broadcast): never scores or weights
_MASK_MOVES = frozenset({Family.ELEMENTWISE, Family.RESHAPE, Family.SIZE_ONE_AXIS, Family.EXPAND, Family.SLICE,
                         Family.AXIS_ORDER, Family.CONTIGUOUS, Family.JOIN})
