"""Rotary position embeddings: does the table pair features the way the rotation does? (issue 33 item 4)

A rotary embedding computes ``x * cos + rotate(x) * sin``, where ``rotate`` moves each feature of x onto
its partner (negated on one side of each pair): ``rotate_half`` (transformers' Llama, GPT-NeoX) pairs
feature i with i ± d/2; ``rotate_every_two`` (GPT-J) and lucidrains' interleaved ``rotate_half`` pair 2k
with 2k + 1. Each pair is turned as one 2-d vector only if the table gives both of its features the same
angle: columns i and p(i) of cos, and of sin, hold the same values at every position. A table laid out
the other way (``repeat_interleave(2)`` under ``rotate_half``, ``cat([f, f])`` under
``rotate_every_two``) turns each feature by another pair's angle, and no rotation comes out.

Two facts, both exact, never a guess from sizes:

* the partner p(i) from **element provenance**: the data moves that make ``rotate(x)`` from ``x``
  (slices, ``cat``, ``stack``, ``unbind``, ``flatten``, ``reshape``; a negation or a cast keeps every
  element where it is) are replayed on a coordinate tensor of x's shape (:func:`.provenance.coordinates`);
* which **columns of the table are equal**, from a copy of it kept when the multiplication ran
  (:func:`.columns.kept_table`: on the CPU only, up to :data:`~.directions.READ_LIMIT` elements).

:func:`rotaries` finds every ``a * t1 + b * t2`` whose ``b`` is made from ``a`` by data moves alone, and
says for each whether its tables pair features as it rotates them (plain data: :class:`Rotary`).
Meta's complex form (``view_as_complex`` then one product) pairs by construction and is never a case.
Nor is the rotation written on halves (modded-nanogpt's ``y1 = x1·cos + x2·sin``, ``y2 = x1·(−sin) + x2·cos``
on ``x1, x2 = x.chunk(2, -1)``): each column of its tables turns one pair; it is found by its two sums
crossing their tables over (:func:`_halves`), and its tables are read for the axes their angles change along.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from weakref import WeakKeyDictionary

import torch

from shapetrace.engine import propagate as pr
from shapetrace.engine.capture import OpRecord, PassRecord
from shapetrace.engine.columns import COMPARE_LIMIT, READ_LIMIT, changing_axes, feature_classes
from shapetrace.engine.directions import TIED
from shapetrace.engine.infer.elements import callable_of
from shapetrace.engine.ops import Family, callables_of, write_kind
from shapetrace.engine.opspec import LAYOUT_FAMILIES
from shapetrace.engine.provenance import MAX_ELEMENTS, coordinates
from shapetrace.engine.rotary_positions import with_positions
from shapetrace.engine.same_moves import SameMoves
from shapetrace.engine.thawed import TensorStub, map_operands, thaw_args

#: records walked back from a rotated tensor to the tensor it rotates (rotate_half is 4, GPT-J's 5)
MAX_CHAIN = 16
#: families whose ops only move or re-read elements (with ``spec.replay`` and ``spec.stacks``)
_MOVES = LAYOUT_FAMILIES | {Family.SPLIT, Family.JOIN}

PAIRED, MISMATCH, UNCHECKED = "paired", "mismatch", "unchecked"


@dataclass(frozen=True)
class Rotary:
    """One ``x * cos + rotate(x) * sin`` found in a run, and what its tables say.

    Attributes:
        event: the row of the rotation's last data move (the ``cat`` of ``rotate_half``, the ``flatten`` of
            ``rotate_every_two``); None when none of its moves has a row.
        outcome: :data:`PAIRED`, :data:`MISMATCH` or :data:`UNCHECKED`.
        partners: p(i) for each feature i of x (empty when the rotation could not be replayed).
        table: the shape of the table that disagrees (or was not read).
        equal: the classes of that table's equal columns (empty when not read).
        why: why the pairing was not checked (empty unless :data:`UNCHECKED`).
        varies: the axes of the rotated tensor (all but its features) along which a table's angles
            change, when both tables were read (:func:`changing_axes`).
        still: its axes of more than one entry along which neither table changes: every entry there is
            turned by the same angles (a rotation that q·k cancels, where the axis holds tokens).
        at_zero: both tables were read and turn every feature by angle 0 (cos 1, sin 0): position 0.
        appended: ``(row of the join, entries before it, axis)`` where a rotation at position 0 was then
            joined after other entries along an axis (a key appended to a cache whose position restarted).
        tables: the nodes of the cos and sin tables; rotated: the node of x; moves: the records of the data
            moves that make ``rotate(x)`` from x (what :mod:`.value_checked` reads).
        angles: copies of the cos and sin tables, where both were read.
        shifts: x is an earlier rotation's result, moved (data moves only): this rotation shifts tokens that
            already carry their positions (a cached fragment re-rotated to where it lands), it gives none.
        position: for a table of one position, the integer position whose angles it holds, read against a
            table of the run that counts positions (:mod:`.rotary_positions`); None when not read.
        expected: the position its token belongs at (a key joined after n cached entries: n; a query
            meeting S keys: S - 1); None when not found.
        placed: ``(axis of the rotated tensor, how[, row of the join that appends it, the join's own axis])``
            that places its token at ``expected`` (the two axes differ where the key was transposed on its way).
    """

    event: int | None
    outcome: str
    partners: tuple[int, ...] = ()
    table: tuple[int, ...] = ()
    equal: tuple[int, ...] = ()
    why: str = ""
    varies: tuple[int, ...] = ()
    still: tuple[int, ...] = ()
    at_zero: bool = False
    appended: tuple[int | None, int, int] | None = None
    tables: tuple[int, ...] = ()
    rotated: int | None = None
    moves: tuple[int, ...] = ()
    at: int | None = None
    angles: tuple = field(default=(), repr=False, compare=False)
    position: int | None = None
    expected: int | None = None
    placed: tuple | None = None
    shifts: bool = False


_MEMO: WeakKeyDictionary = WeakKeyDictionary()


def rotaries_of(capture, event_of_record: dict[int, int]) -> tuple[Rotary, ...]:
    """:func:`rotaries` of a :class:`~.capture.Capture`, found once per inference and number of records
    (a trace's analysis is asked for more than once)."""
    memo = _MEMO.get(capture)   # (the rows' map is kept in the memo: compared by identity, never reused)
    if memo is None or memo[0] != len(capture.records) or memo[1] is not event_of_record:
        found = rotaries(capture.records, capture.nodes, event_of_record)
        memo = _MEMO[capture] = (len(capture.records), event_of_record, found)
    return memo[2]


def rotaries(records: Sequence, shapes: Sequence, event_of_record: dict[int, int]) -> tuple[Rotary, ...]:
    """Every rotary embedding among ``records`` (a capture's, in call order), checked; ``shapes``: the
    capture's node facts (``shapes[node].shape``); ``event_of_record``: the row each record got."""
    producer: dict[int, int] = {}
    terms: dict[int, int] = {}     # node -> the multiplication record it is (or a same-shape unary op of it)
    found: list[Rotary] = []
    at_zero: dict[int, int] = {}   # node -> the rotary (in ``found``) at position 0 that made it
    first_zero: dict[int, tuple] = {}   # node -> (that rotary, the axes whose first entry is at position 0)
    outs: dict[int, int] = {}      # rotary (in ``found``) -> the node of its result
    halves: dict[tuple, list] = {}  # (source, half, half) -> each sum of the two halves' products seen so far
    writes: dict[int, list[int]] = {}   # node -> the ``__setitem__`` records that wrote into it, in order
    same = SameMoves()   # (x sliced twice: flash-attn's x[..., :ro_dim] * cos + rotate_half(x[..., :ro_dim]) * sin)
    for index, record in enumerate(records):
        if type(record) not in (OpRecord, PassRecord) or getattr(record, "error", None):
            continue
        same.note(record)
        if write_kind(record.spec) == "index" and record.ins and not record.outs:
            writes.setdefault(record.ins[0], []).append(index)
        if record.spec.family is Family.JOIN and any(n in at_zero or n in first_zero for n in record.ins):
            _appended(found, at_zero, first_zero, record, shapes, event_of_record.get(index), producer)
        if record.spec.scaling == "multiplies" and len(record.ins) == 2 and len(record.outs) == 1:
            terms[record.outs[0]] = index
        elif _keeps_places(shapes, record) and record.ins[0] in terms:
            terms[record.outs[0]] = terms[record.ins[0]]
        elif (record.spec.additive or record.spec.subtractive) and len(record.ins) == 2 \
                and all(n in terms for n in record.ins):   # (x·cos − rotate(x)·sin: the rotation by −θ)
            products = [records[terms[n]] for n in record.ins]
            rotary = _rotary(records, shapes, producer, products, writes, same) \
                or _halves(records, shapes, producer, products, halves)
            if rotary is not None:
                record_at, rotary = rotary
                shifts = any(_chain(records, shapes, producer, rotary.rotated, out, set(), writes) is not None
                             for out in outs.values())
                rotary = replace(rotary, shifts=shifts)
                rows = [event_of_record[i] for i in record_at if i in event_of_record]
                found.append(replace(rotary, event=max(rows) if rows else None, at=index))
                outs[len(found) - 1] = record.outs[0]
                if rotary.at_zero:
                    at_zero[record.outs[0]] = len(found) - 1
                elif _first_at_zero(rotary, shapes):
                    first_zero[record.outs[0]] = (len(found) - 1, _first_at_zero(rotary, shapes))
        for node in record.outs:
            if node not in record.ins:   # (``t.to(t.dtype)`` returns ``t``: the op that made it stays its producer)
                producer[node] = index
    return tuple(_join_row(r, event_of_record) for r in with_positions(found, records, shapes, outs))


def _join_row(rotary: Rotary, event_of_record: dict[int, int]) -> Rotary:
    """``rotary`` with the join that places its token (a record, in :attr:`Rotary.placed`) as its row."""
    if rotary.placed is None or len(rotary.placed) < 3:
        return rotary
    return replace(rotary, placed=(*rotary.placed[:2], event_of_record.get(rotary.placed[2]), *rotary.placed[3:]))


def step_token_label(events: Sequence, rotary: Rotary, out) -> str | None:
    """The name of the axis that places a rotation of one token (:attr:`Rotary.placed`) on ``out``, the rotated
    tensor's row; where that axis has one entry and no name (a decoding step's), the name it has in the result
    of the join that appends the token (``T+1``)."""
    axis = rotary.placed[0] if rotary.placed else len(out.dims)
    if axis >= len(out.dims) or out.dims[axis] is not None or out.shape[axis] != 1 or len(rotary.placed) < 3 \
            or rotary.placed[2] is None or rotary.placed[2] >= len(events) or not events[rotary.placed[2]].outputs:
        return out.dims[axis] if axis < len(out.dims) else None
    joined, along = events[rotary.placed[2]].outputs[0].dims, rotary.placed[3] if len(rotary.placed) > 3 else axis
    return joined[along] if along < len(joined) else None


def _appended(found: list, at_zero: dict, first_zero: dict, record, shapes: Sequence, event: int | None,
              producer: dict) -> None:
    """A join (``torch.cat([cache, k], dim=2)``) that puts a rotation at position 0 after other entries along
    its axis, or one whose first token is at position 0 after entries no record of the run made (a cache
    handed in: mlx-vlm's chunked prefill taking each chunk's M-RoPE ids from the prompt's start; not EVA's
    class token, made in the run): noted on that rotary (:attr:`Rotary.appended`)."""
    args, kwargs = thaw_args(record.frozen)
    dim = kwargs.get("dim", args[1] if len(args) > 1 else 0)
    rank = len(shapes[record.ins[0]].shape)
    if type(dim) is not int or not -rank <= dim < rank:
        return
    dim %= rank
    before = 0
    for k, node in enumerate(record.ins):
        which = at_zero.get(node, first_zero[node][0] if node in first_zero and dim in first_zero[node][1]
                             and all(n not in producer for n in record.ins[:k]) else None)
        if which is not None and before > 0 and found[which].appended is None:
            found[which] = replace(found[which], appended=(event, before, dim))
        before += shapes[node].shape[dim]


def _first_at_zero(rotary: Rotary, shapes: Sequence) -> tuple[int, ...]:
    """The axes of more than one entry along which a rotation's tables change and whose first entry turns
    every feature by angle 0 (cos 1, sin 0): its first token at position 0, the others not."""
    if len(rotary.angles) != 2 or rotary.rotated is None:
        return ()
    shape = tuple(shapes[rotary.rotated].shape)
    try:
        cos, sin = (torch.broadcast_to(t, shape) for t in rotary.angles)
    except RuntimeError:
        return ()
    return tuple(j for j in rotary.varies if j < len(shape) - 1 and shape[j] > 1
                 and bool((cos.select(j, 0) == 1).all()) and bool((sin.select(j, 0) == 0).all()))


def _keeps_places(shapes: Sequence, record) -> bool:
    """A call without a row of one tensor whose result has its shape (``-x``, ``x.float()``, ``x * 0.5``):
    every element stays where it is."""
    return type(record) is PassRecord and len(record.ins) == 1 and len(record.outs) == 1 \
        and record.spec.family is Family.ELEMENTWISE and shapes[record.outs[0]].shape == shapes[record.ins[0]].shape


def _rotary(records: Sequence, shapes: Sequence, producer: dict[int, int], products: list,
            writes: dict | None = None, same: SameMoves | None = None) -> tuple[set[int], Rotary] | None:
    """``a * t1 + b * t2`` (either order, either operand order) with ``b`` made from ``a``, or from a twin of ``a``
    (``same``), by data moves (``writes``: node -> the ``__setitem__`` records that wrote into it)."""
    for first, second in (products, products[::-1]):
        for x_at in (0, 1):
            for r_at in (0, 1):
                x, rotated = first.ins[x_at], second.ins[r_at]
                twins = same.of(x) if same is not None else frozenset()
                chain = _chain(records, shapes, producer, rotated, x, set(), writes or {}, twins)
                checked = _checked(records, shapes, sorted(chain), x, rotated,
                                   ((first, 1 - x_at), (second, 1 - r_at)), twins) if chain else None
                if checked is not None:
                    tables = (first.ins[1 - x_at], second.ins[1 - r_at])
                    return chain, replace(checked, tables=tables, rotated=x, moves=tuple(sorted(chain)))
    return None


def _chain(records: Sequence, shapes: Sequence, producer: dict[int, int], node: int, x: int,
           seen: set, writes: dict | None = None, twins: frozenset = frozenset()) -> set[int] | None:
    """The records that move ``x``'s elements into ``node`` (empty when ``node`` is ``x``; None when
    something else enters, or an op that computes rather than moves). ``seen``: the records already
    walked (a ``stack`` of both pieces of one ``unbind`` reaches it twice); ``writes``: node -> the
    ``__setitem__`` records that wrote into it (their values are walked too: ``rot_x[..., :n] = -x[..., n:]``);
    ``twins``: nodes that hold x's elements as x does (:mod:`.same_moves`)."""
    writes = writes or {}
    if node == x or node in twins:
        return set()
    index = producer.get(node)
    if index is None or len(seen) >= MAX_CHAIN:
        return None
    if index in seen:
        return {index}
    record = records[index]
    if not _moves(shapes, record):
        return None
    seen.add(index)
    found = {index}
    later = [w for w in writes.get(node, ()) if w > index]
    for n in [*record.ins, *(n for w in later for n in records[w].ins[1:])]:
        part = _chain(records, shapes, producer, n, x, seen, writes, twins)
        if part is None:
            return None
        found |= part
    return found | set(later)


def _moves(shapes: Sequence, record) -> bool:
    spec = record.spec
    if type(record) is PassRecord:
        return _keeps_places(shapes, record)
    return bool(spec.replay) or spec.stacks or spec.family in _MOVES or _written_move(spec) is not None


def _written_into(target, *args):
    """``target[index] = value`` replayed out of place: a copy of ``target`` with ``value`` written in."""
    *index, value = args
    out = target.clone()
    out[index[0] if len(index) == 1 else tuple(index)] = value
    return out


def _copies(spec) -> bool:
    """A copy that keeps every element in place and has no replay of its own (``x.clone()``)."""
    return spec.memory == "copy" and spec.family is Family.OTHER and not spec.replay and spec.names is pr.same


def _written_move(spec):
    """The out-of-place replay, here only, of a move written as a copy and writes into it (TransformerLens's
    ``rotate_every_two``: ``rot_x = x.clone()``, ``rot_x[..., :n] = -x[..., n:]``); None for other ops."""
    if write_kind(spec) == "index":
        return _written_into
    return (lambda t, *_, **__: t.clone()) if _copies(spec) else None


# -- the rotation written on halves (modded-nanogpt's) -----------------------------------------------------

def _halves(records: Sequence, shapes: Sequence, producer: dict[int, int], products: list,
            seen: dict) -> tuple[set[int], Rotary] | None:
    """The rotation written on two pieces of one tensor (modded-nanogpt's and smolGPT's ``x1, x2 =
    x.chunk(2, -1)``; ``y1 = x1 * cos + x2 * sin``, ``y2 = x1 * (-sin) + x2 * cos``), found at the second of
    its two sums: each sum multiplies the same two pieces, and the table of one piece in the first is the
    table of the other piece in the second (the same tensor, or its negation). Only both sums together
    make a rotation: one alone (a learnt mix of two halves) is none. Its tables give a pair of features
    one column by construction, so the pairing holds; what they are read for is where their angles change.
    ``seen``: the first sums found so far, keyed by source and pieces."""
    for first_at in (0, 1):
        for second_at in (0, 1):
            a, b = products[0].ins[first_at], products[1].ins[second_at]
            source = _piece_of(records, shapes, producer, a)
            if source is None or source[0] != (_piece_of(records, shapes, producer, b) or (None,))[0] or a == b:
                continue
            tables = {a: products[0].ins[1 - first_at], b: products[1].ins[1 - second_at]}
            key = (source[0], *sorted((a, b)))
            for before, sites in seen.get(key, []):
                if _same_table(records, producer, before[a], tables[b]) \
                        and _same_table(records, producer, before[b], tables[a]):
                    return _rotation_on_halves(records, shapes, producer, key, sites)
            seen.setdefault(key, []).append((tables, ((products[0], 1 - first_at), (products[1], 1 - second_at))))
            return None
    return None


def _piece_of(records: Sequence, shapes: Sequence, producer: dict[int, int], node: int) -> tuple[int, ...] | None:
    """``(source, *records)`` where ``node`` is a piece of one tensor cut along its last axis at the same index
    on every other axis: by one data move (a slice, a ``chunk``, a ``split``), or by a view of the last axis as
    ``(-1, 2)`` then ``unbind(-1)`` (Meta's real-valued ``apply_rotary_emb``, as ExecuTorch and llama2.c write
    it: ``x.reshape(x.shape[:-1] + (-1, 2)).unbind(-1)``); else None."""
    index = producer.get(node)
    record = records[index] if index is not None else None
    if record is None or type(record) is not OpRecord or len(record.ins) != 1 \
            or record.spec.family not in (Family.SLICE, Family.SPLIT):
        return None
    whole, piece = tuple(shapes[record.ins[0]].shape), tuple(shapes[node].shape)
    if len(whole) == len(piece) + 1 and whole[:-1] == piece:   # (an unbind of the last axis: one component)
        return _viewed_last(records, shapes, producer, record.ins[0], index)
    if len(whole) != len(piece) or not whole or whole[:-1] != piece[:-1] or piece[-1] >= whole[-1]:
        return None
    return record.ins[0], index


def _viewed_last(records: Sequence, shapes: Sequence, producer: dict[int, int], node: int,
                 unbind: int) -> tuple[int, ...] | None:
    """``(source, view, unbind)`` where ``node`` is ``source`` with its last axis viewed as two; else None."""
    index = producer.get(node)
    record = records[index] if index is not None else None
    if record is None or type(record) is not OpRecord or len(record.ins) != 1 \
            or record.spec.family is not Family.RESHAPE:
        return None
    whole, split = tuple(shapes[record.ins[0]].shape), tuple(shapes[node].shape)
    if len(split) != len(whole) + 1 or not whole or split[:-2] != whole[:-1] or split[-2] * split[-1] != whole[-1]:
        return None
    return record.ins[0], index, unbind


def _same_table(records: Sequence, producer: dict[int, int], one: int, other: int) -> bool:
    """``one`` and ``other`` are one table, or one is the other negated (``-sin``, a call without a row)."""
    if one == other:
        return True
    for x, y in ((one, other), (other, one)):
        index = producer.get(x)
        record = records[index] if index is not None else None
        if type(record) is PassRecord and tuple(record.ins) == (y,) and record.spec.family is Family.ELEMENTWISE \
                and not record.frozen[0]:   # (an elementwise call of the table alone: ``-sin``)
            return True
    return False


def _rotation_on_halves(records: Sequence, shapes: Sequence, producer: dict[int, int], key: tuple,
                        sites) -> tuple[set[int], Rotary] | None:
    """The :class:`Rotary` of a rotation on halves whose two sums were found: the pieces' moves replayed on
    the source's coordinates must pair every feature with one other (``p(p(i)) = i``); its tables read as
    broadcast against a piece."""
    source, a, b = key
    moves = {i for piece in (a, b) for i in (_piece_of(records, shapes, producer, piece) or ())[1:]}
    shape = tuple(shapes[source].shape)
    if math.prod(shape) > MAX_ELEMENTS:
        return None
    env: dict[int, Any] = {source: coordinates([shape])[0]}
    if not all(_replay(records[i], env) for i in sorted(moves)) or a not in env or b not in env:
        return None
    d, came = shape[-1], [env[n].long() - 1 for n in (a, b)]                 # (..., d/2) each: source's flat index
    rows = torch.arange(came[0].numel() // came[0].shape[-1]).reshape(*shape[:-1], 1)
    if any(bool((c < 0).any()) or not bool((c // d == rows).all()) for c in came):
        return None
    first, second = (c.reshape(-1, c.shape[-1]) % d for c in came)             # (rows, d/2): features
    if not bool((first == first[:1]).all()) or not bool((second == second[:1]).all()):
        return None
    partners = [-1] * d
    for i, j in zip(first[0].tolist(), second[0].tolist()):
        partners[i], partners[j] = j, i
    if -1 in partners or any(partners[p] != i or p == i for i, p in enumerate(partners)):
        return None
    found = Rotary(None, PAIRED, tuple(partners))
    read = [kept[1] for kept, place in ((_kept(product, place), place) for product, place in sites)
            if kept[0] == place]
    varies = changing_axes(read, tuple(shapes[a].shape)) if len(read) == len(sites) else None
    if varies is not None:
        still = tuple(j for j, n in enumerate(shape[:-1]) if n > 1 and j not in varies)
        at_zero = any(bool((one == 1).all()) and bool((other == 0).all()) for one, other in (read, read[::-1]))
        found = replace(found, varies=varies, still=still, at_zero=at_zero, angles=tuple(read))
    tables = tuple(product.ins[place] for product, place in sites)
    return moves, replace(found, tables=tables, rotated=source, moves=tuple(sorted(moves)))


# -- the partner of each feature ----------------------------------------------------------------------

def _checked(records: Sequence, shapes: Sequence, chain: list[int], x: int, rotated: int, tables,
             twins: frozenset = frozenset()) -> Rotary | None:
    """The rotation's partners and each table's equal columns compared: a table that gives a feature
    and its partner different values is a mismatch, whatever the other table says. None: the data moves
    are no rotation of features."""
    found = _paired(records, shapes, chain, x, rotated, tables, twins)
    read = [kept[1] for kept, at in ((_kept(product, at), at) for product, at in tables) if kept[0] == at]
    if found is None or len(read) != len(tables):
        return found
    varies = changing_axes(read, tuple(shapes[x].shape))
    if varies is None:
        return found
    still = tuple(j for j, n in enumerate(shapes[x].shape[:-1]) if n > 1 and j not in varies)
    at_zero = bool((read[0] == 1).all()) and bool((read[1] == 0).all())   # (x * cos + rotate(x) * sin)
    return replace(found, varies=varies, still=still, at_zero=at_zero, angles=tuple(read))


def _kept(product, at: int) -> tuple:
    """``(operand position, copy)`` of the table a product kept, or ``(None, None)``; of a product of one
    shape, which kept both operands (:data:`.directions.TIED`), the one at ``at``."""
    kept = product.kept if type(product) is OpRecord and isinstance(product.kept, tuple) else (None, None)
    return (at, kept[1][at]) if kept[0] == TIED and 0 <= at < len(kept[1]) else kept


def _paired(records: Sequence, shapes: Sequence, chain: list[int], x: int, rotated: int, tables,
            twins: frozenset = frozenset()) -> Rotary | None:
    last = None
    partners = _partners(records, shapes, chain, x, rotated, twins)
    if partners is None:
        big = math.prod(shapes[x].shape) > MAX_ELEMENTS
        return Rotary(last, UNCHECKED, why=f"the rotated tensor has more than {MAX_ELEMENTS:,} elements, too many to "
                                           "replay its data moves on coordinates" if big else
                                           "a data move of the rotation could not be replayed on coordinates")
    if not partners:
        return None   # (it moves elements across positions, or pairs no features: no rotation)
    read, unread = [], None
    for product, at in tables:
        kept = _kept(product, at)
        classes = feature_classes(kept[1]) if kept[0] == at else None
        table = tuple(shapes[product.ins[at]].shape)
        if classes is None or len(classes) != len(partners):
            unread = unread or Rotary(last, UNCHECKED, partners, table, why=_why_unread(product, at, table))
        elif any(classes[i] != classes[p] for i, p in enumerate(partners)):
            return Rotary(last, MISMATCH, partners, table, classes)
        else:
            read.append(classes)
    if unread is not None:
        return unread
    if all(len(set(classes)) == 1 for classes in read):
        return Rotary(last, UNCHECKED, partners, why="the tables hold the same value on every feature (position 0 "
                                                     "alone), which says nothing of how they pair features")
    return Rotary(last, PAIRED, partners)


def _why_unread(product, at: int, shape: tuple) -> str:
    """Why a table's columns were not compared: the true reason, never a guess."""
    if type(product) is not OpRecord:
        return "the table has the shape of what it multiplies, and such a product's values are not kept"
    device = product.device
    if getattr(device, "type", "cpu") == "meta":
        return "the meta device has no values"
    if getattr(device, "type", "cpu") != "cpu":
        return f"the table is on {device}, and reading it would wait for the device"
    if math.prod(shape) > READ_LIMIT:
        return f"the table has more than {READ_LIMIT:,} elements"
    if math.prod(shape) * shape[-1] > COMPARE_LIMIT:
        return f"comparing its columns would take more than {COMPARE_LIMIT:,} comparisons"
    return "the table is a learnt parameter, not a float tensor, or over the bytes the trace keeps"


def _partners(records: Sequence, shapes: Sequence, chain: list[int], x: int,
              rotated: int, twins: frozenset = frozenset()) -> tuple[int, ...] | None:
    """p(i) for each feature i: element [..., i] of ``rotated`` came from element [..., p(i)] of ``x`` (or of
    a twin of x, which holds the same elements), at the same index on every other axis; ``()`` when the moves
    are no such pairing; None when they could not be replayed."""
    shape = tuple(shapes[x].shape)
    if not shape or math.prod(shape) > MAX_ELEMENTS:
        return None
    env: dict[int, Any] = dict.fromkeys((x, *twins), coordinates([shape])[0])
    for index in chain:
        if not _replay(records[index], env):
            return None
    moved = env.get(rotated)
    if moved is None or tuple(moved.shape) != shape:
        return ()
    if not bool((moved == moved.round()).all()):
        return ()   # (its values were computed, not moved)
    came = moved.abs().long() - 1                                           # (..., d): x's flat index
    d = shape[-1]
    rows = torch.arange(came.numel() // d).reshape(*shape[:-1], 1)          # (..., 1): each element's row
    if bool((came < 0).any()) or not bool((came // d == rows).all()):
        return ()   # (a filled-in value, or elements moved across positions, heads or batch entries)
    partners = came.reshape(-1, d) % d                                      # (rows, d)
    negated = (moved < 0).reshape(-1, d)                                    # (rows, d)
    if not bool((partners == partners[:1]).all()) or not bool((negated == negated[:1]).all()):
        return ()
    p, sign = partners[0].tolist(), negated[0].tolist()
    if any(p[p[i]] != i or p[i] == i or sign[i] == sign[p[i]] for i in range(d)):
        return ()   # (not a rotation: each pair is two features, one of them negated)
    return tuple(p)


def _replay(record, env: dict) -> bool:
    """Run one data move on the coordinate tensors in ``env``; its results join ``env``."""
    if type(record) is PassRecord:   # (a negation or a cast: every element stays in place)
        if record.ins[0] not in env:   # (never on a chain :func:`_chain` found; a guard, not a guess)
            return False
        env[record.outs[0]] = _unary(record, env[record.ins[0]])
        return True
    if any(n not in env for n in record.ins):
        return False
    args, kwargs = _with_operands(record, env)
    if args is None:
        return False
    shapes = [tuple(raw[0]) for raw in record.out_raw]
    # (the replay's function first; then the op's own, for a method's spelling: ``x.flip(0)``)
    functions = [callable_of(record.spec.replay)] if record.spec.replay else []
    if _written_move(record.spec) is not None:
        functions = [_written_move(record.spec)]
    for fn in [*functions, *callables_of(record.spec)]:
        try:
            result = fn(*args, **kwargs)
        except Exception:   # (another function of the same op, with another signature)
            continue
        outs = [result] if isinstance(result, torch.Tensor) else list(result)
        if write_kind(record.spec) == "index" and not record.outs:   # (a write: the target holds the result)
            if isinstance(result, torch.Tensor) and result.shape == env[record.ins[0]].shape:
                env[record.ins[0]] = result
                return True
            continue
        if [tuple(o.shape) for o in outs] == shapes:
            env.update(zip(record.outs, outs))
            return True
    return False


def _unary(record, x):
    """A call without a row, replayed on coordinates when it takes its operand alone (``-x``, so the
    rotation's signs show); else the coordinates as they are (its elements stay in place)."""
    if record.frozen[0]:
        return x
    for fn in callables_of(record.spec):
        try:
            result = fn(x)
        except Exception:   # (a function of the same op that wants more arguments)
            continue
        if isinstance(result, torch.Tensor) and result.shape == x.shape:
            return result
    return x


def _with_operands(record, env: dict) -> tuple[tuple | None, dict]:
    """The record's arguments with each tensor operand, in order, replaced by its coordinates."""
    operands = iter(env[n] for n in record.ins)
    missing = []

    def put(stub: TensorStub):
        found = next(operands, None)
        if found is None:
            missing.append(stub)
        return found

    args, kwargs = map_operands(*thaw_args(record.frozen), put)
    return (None, {}) if missing or next(operands, None) is not None else (args, kwargs)
