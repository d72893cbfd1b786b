"""Where heads are split and merged, from the structure of the trace alone (no axis names needed).

Multi-head attention splits a feature axis into two or more (``view(B, T, H, d)``: the last axis of D
entries becomes H and d, whose product is D), reorders the axes, and lets a batched product (``q @ k``,
an ``einsum``) run over the heads as a batch axis; the merge folds the heads back into the features.
This module follows each axis of each split's result from op to op by position (a transpose or permute
moves them as its strides say, an ``unbind`` drops one, an elementwise op keeps them, a
product keeps its batch axes and its two matrix axes), and reads, at the first batched product of each
attention (the scores: a later one may be the bug), which of its batch axes are the same axis in both
operands: the one made by the split is the heads axis; the one the split's input already had is the
batch axis. No size decides
anything: sizes are compared only where an op's own rule says they match (a reshape keeps the axes
before the ones it folds, element for element, when their sizes are the same).

:func:`attentions` returns, for each attention (the splits before a merge), the splits with their
heads and batch axes and the merge with its batch axes; :mod:`.heads` measures them on the values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from shapetrace.engine.ops import Family

#: an axis made by a split (``(NEW, j)``: the split's j-th new axis) or one its input had (``(LEAD, i)``)
NEW, LEAD = "new", "lead"
#: an axis of one entry an op inserted (``(ONE, event, position)``: ``x[:, :, None]``), a copy axis once expanded
ONE = "one"


@dataclass(frozen=True)
class Found:
    """One attention found from the structure: its splits ``(record, event, heads axis, batch axis)``
    and its merge ``(record, event, batch axis of its operand, batch axis of its result or None)``."""

    splits: tuple[tuple, ...]
    merge: tuple
    merge_heads: int | None = None   # the heads axis of the merge's operand, followed there from the splits


@dataclass
class _Attention:
    """What the walk has seen of the attention it is in."""

    splits: dict = field(default_factory=dict)     # split event index -> (record, event, first new axis)
    shared: set | None = None                      # the batch axes both operands of every product share
    origins: set = field(default_factory=set)      # the splits that reached a product


def attentions(rows) -> list[Found]:
    """The attentions found in ``rows`` (``(record, event)`` in order), each from its splits to its
    merge; an attention whose heads or batch axis is not proven is left out."""
    tracked: dict[tuple[int, int], tuple[tuple, frozenset]] = {}   # (event, output) -> (axis ids, splits)
    found, current = [], _Attention()
    for r, e in rows:
        ins = [tracked.get(s) if s is not None else None for s in e.sources]
        split = _split_at(e) if not any(ins) else None
        if split is not None:
            new = len(e.outputs[0].shape) - split
            ids = tuple((LEAD, i) for i in range(split)) + tuple((NEW, j) for j in range(new))
            tracked[(e.index, 0)] = (ids, frozenset([e.index]))
            current.splits[e.index] = (r, e, split)
            continue
        if not any(ins):
            continue
        merge = _merge_at(r, e, ins, current)
        if merge is not None:
            found.append(merge if isinstance(merge, Found) else None)
            current = _Attention()
            continue
        for i, out in enumerate(_follow(e, ins, current)):
            if out is not None:
                tracked[(e.index, i)] = out
    return [f for f in found if f is not None]


def _split_at(e) -> int | None:
    """Where a reshape splits its operand's last axis into two or more whose product it is: the number
    of axes it keeps in front (None: not such a split)."""
    if e.spec is None or e.spec.family is not Family.RESHAPE or len(e.inputs) != 1 or len(e.outputs) != 1:
        return None
    before, after = e.inputs[0].shape, e.outputs[0].shape
    keep = len(before) - 1
    if keep < 1 or len(after) < keep + 2 or tuple(after[:keep]) != tuple(before[:keep]):
        return None
    new = after[keep:]
    if math.prod(new) != before[-1] or sum(1 for n in new if n > 1) < 2 and not _one_key_value_head(e, new):
        return None
    return keep


def _one_key_value_head(e, new: tuple) -> bool:
    """Is ``e`` multi-query attention's split of a key or value projection into one head (``view(B, T, 1,
    d)``)? Only there is an axis of one entry taken for a heads axis (a mask's ``view(B, 1, 1, T)`` is not)."""
    return len(new) == 2 and new[0] == 1 < new[1] and bool(e.projections) and e.projections[0] in ("k", "v")


def _heads_and_batch(current: _Attention) -> tuple[tuple, tuple] | None:
    """The heads axis (made by the splits) and the batch axis (their input's) that the attention's
    first product batches over in both operands; None unless exactly one of each."""
    if not current.shared:
        return None
    new = [a for a in current.shared if a[0] == NEW]
    lead = [a for a in current.shared if a[0] == LEAD]
    return (new[0], lead[0]) if len(new) == 1 and len(lead) == 1 else None


def _merge_at(r: int, e, ins, current: _Attention):
    """At the merge (the first op after a product whose operand holds the heads axis and whose result
    has fewer axes): the attention :class:`Found`, or ``False`` where it cannot be measured; else None."""
    axes = _heads_and_batch(current)
    first = ins[0]
    if axes is None or first is None or not e.outputs or e.spec is None or e.spec.family is not Family.RESHAPE:
        return None
    heads, batch = axes
    ids = first[0]
    if heads not in ids or len(e.outputs[0].shape) >= len(ids):
        return None
    splits = tuple((r, s, keep + heads[1], batch[1]) for i, (r, s, keep) in sorted(current.splits.items())
                   if i in current.origins)
    at = ids.index(batch) if batch in ids else None
    if not splits or at is None:
        return False
    before, after = e.inputs[0].shape, e.outputs[0].shape
    out_batch = at if len(after) > at and tuple(before[:at + 1]) == tuple(after[:at + 1]) else None
    return Found(splits, (r, e, at, out_batch), ids.index(heads))


def _follow(e, ins, current: _Attention) -> list:
    """Each result's axis ids and the splits it came from (None: not followed)."""
    origins = frozenset().union(*(i[1] for i in ins if i is not None))
    family = e.spec.family if e.spec is not None else None
    if family is Family.PRODUCT or family is Family.FUSED_ATTENTION:
        return [_product(e, ins, current, origins)]
    first = next(i for i in ins if i is not None)
    ids = first[0]
    if family is Family.AXIS_ORDER and len(e.outputs) == 1 and len(e.inputs) == 1:   # transpose, permute, ...
        moved = _swapped(ids, e.params["dims"]) if len(e.params.get("dims") or ()) == 2 else \
            _by_strides(e.inputs[0], e.outputs[0], ids)
        return [(moved, origins) if moved is not None else None]
    if family is Family.SPLIT and "dim" in e.params and all(len(o.shape) == len(ids) - 1 for o in e.outputs):
        dim = e.params["dim"] % len(ids)                                           # unbind: that axis is gone
        return [(ids[:dim] + ids[dim + 1:], origins)] * len(e.outputs)
    if len(e.inputs) == 1 and len(e.outputs) == 1 and family is not None:
        copied = _copied(e, family, ids)
        if copied is not None:
            return [(copied, origins)]
    shape = next(t.shape for t, i in zip(e.inputs, ins) if i is not None)
    return [(ids, origins) if tuple(o.shape) == tuple(shape) else None for o in e.outputs]   # elementwise


def _copied(e, family, ids: tuple) -> tuple | None:
    """The axis ids through an op that copies heads (grouped-query attention's ``repeat_kv``: an axis of
    one inserted, expanded, folded into the heads; ``repeat_interleave``; ``repeat``): each axis keeps its
    id, so the key/value heads line up with the query heads at the product. In which order the copies
    are laid out is not read here: the values say which key/value head each query head reads."""
    before, after = tuple(e.inputs[0].shape), tuple(e.outputs[0].shape)
    if (family is Family.EXPAND or e.spec.repeats) and len(after) == len(before) and \
            all(n and m % n == 0 for n, m in zip(before, after)):
        return ids
    if family in (Family.SLICE, Family.RESHAPE) and len(after) > len(before):
        return _inserted(e.index, before, after, ids)
    if family is Family.RESHAPE and len(after) == len(before) - 1:
        return _copies_folded(before, after, ids)
    return None


def _inserted(index: int, before: tuple, after: tuple, ids: tuple) -> tuple | None:
    """The ids after axes of one entry are inserted (``x[:, :, None]``, ``unsqueeze``), each new one a
    ``ONE`` axis; None where the result is not the operand with such axes. (Where the operand has an
    axis of one entry itself, multi-query attention's one key/value head, the first of the ones keeps its
    id: which of them is new cannot be told, and the fold of the copies keeps the id that is not ``ONE``
    either way.)"""
    out, j = [], 0
    for i, n in enumerate(after):
        if j < len(before) and n == before[j]:
            out.append(ids[j])
            j += 1
        elif n == 1:
            out.append((ONE, index, i))
        else:
            return None
    return tuple(out) if j == len(before) else None


def _copies_folded(before: tuple, after: tuple, ids: tuple) -> tuple | None:
    """The ids after a reshape folds two neighbouring axes into one, where one of them is an inserted
    ``ONE`` axis (the copies): the fold keeps the other's id (``(B, H_kv, n_rep, T, d) -> (B, H, T, d)``);
    None for any other reshape, or where the fold's place is not unique. (With one key/value head,
    ``(B, 1, H, T, d)`` also reads as ``B`` folded with the 1: only a fold of a ``ONE`` axis counts.)"""
    places = [k for k in range(len(after)) if before[:k] == after[:k] and before[k + 2:] == after[k + 1:]
              and before[k] * before[k + 1] == after[k] and [a[0] for a in ids[k:k + 2]].count(ONE) == 1]
    if len(places) != 1:
        return None
    k = places[0]
    kept = ids[k] if ids[k][0] != ONE else ids[k + 1]
    return ids[:k] + (kept,) + ids[k + 2:]


def _swapped(ids: tuple, dims) -> tuple:
    """The ids after swapping two axes (a transpose's recorded ``dims``)."""
    a, b = (d % len(ids) for d in dims)
    out = list(ids)
    out[a], out[b] = out[b], out[a]
    return tuple(out)


def _by_strides(before, after, ids) -> tuple | None:
    """A permute's axis ids, read from the strides: each result axis longer than one is the operand's
    axis of the same stride (distinct in a tensor that was not broadcast); one axis of length one goes
    to the one such axis of the operand (more of them: which is which is unknown, None)."""
    out, ones = [], [i for i, n in enumerate(before.shape) if n == 1]
    for n, stride in zip(after.shape, after.stride):
        same = ones if n == 1 else [i for i, (m, s) in enumerate(zip(before.shape, before.stride))
                                    if s == stride and m == n]
        if len(same) != 1:
            return None
        out.append(ids[same[0]])
    return tuple(out)


def _product(e, ins, current: _Attention, origins) -> tuple | None:
    """A batched product's result ids, noting which batch axes both operands share."""
    contraction = e.spec.contraction if e.spec is not None else ""
    if e.spec is not None and e.spec.family is Family.FUSED_ATTENTION:
        return _fused(e, ins, current, origins)
    if len(ins) != 2 or len(e.outputs) != 1 or contraction not in ("matrix", "subscripts"):
        return None
    if contraction == "subscripts":
        return _einsum(e, ins, current, origins)
    a, b = ins[0], ins[1]
    out_rank = len(e.outputs[0].shape)
    if a is None or b is None or len(a[0]) != out_rank or len(b[0]) != out_rank or out_rank < 3:
        return None
    _note(current, [x for x, y in zip(a[0][:-2], b[0][:-2]) if x == y], [x for x, y in zip(a[0][:-2], b[0][:-2])
                                                                          if x != y], origins)
    return (a[0][:-2] + (a[0][-2], b[0][-1]), origins)


def _fused(e, ins, current: _Attention, origins) -> tuple | None:
    """``scaled_dot_product_attention(q, k, v)``: its batch axes are all but the last two of q and k
    (with ``enable_gqa=True`` k's heads axis has fewer entries: the same axis, grouped); its result's
    ids are q's."""
    if len(ins) < 3 or len(e.outputs) != 1 or ins[0] is None or ins[1] is None:
        return None
    q, k = ins[0][0], ins[1][0]
    if len(q) != len(k) or len(q) != len(e.outputs[0].shape) or len(q) < 3:
        return None
    _note(current, [x for x, y in zip(q[:-2], k[:-2]) if x == y], [x for x, y in zip(q[:-2], k[:-2]) if x != y],
          origins)
    return (q, origins)


def _einsum(e, ins, current: _Attention, origins) -> tuple | None:
    """An einsum's result ids from its subscripts (the letters both operands and the result keep are its
    batch axes)."""
    subscripts = e.params.get("subscripts") or {}
    inputs, output = subscripts.get("inputs"), subscripts.get("output")
    if not inputs or output is None or len(inputs) != 2 or any(i is None for i in ins[:2]):
        return None
    letters: dict[str, tuple] = {}
    disagree = []
    for word, (ids, _) in zip(inputs, ins[:2]):
        if len(word) != len(ids):
            return None
        for letter, axis in zip(word, ids):
            if letters.setdefault(letter, axis) != axis:
                disagree.append(axis)
    batch = [letters[c] for c in output if c in inputs[0] and c in inputs[1]]
    _note(current, batch, disagree, origins)
    if any(c not in letters for c in output):
        return None
    return (tuple(letters[c] for c in output), origins)


def _note(current: _Attention, shared: list, clashing: list, origins) -> None:
    """The batch axes the attention's first product (the scores) shares in both operands; every product
    adds the splits it came from. (A later product may be the bug: one over the wrong heads index.)"""
    if current.shared is None:
        current.shared = set(shared) - set(clashing)
    current.origins |= origins
