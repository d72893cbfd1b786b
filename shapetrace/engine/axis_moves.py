"""Axis names through ops that move, add, remove, pick or join axes: permute, squeeze, expand, repeat,
indexing, split, ``cat``, ``stack``, broadcasting. Pure Python.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from shapetrace.engine.axes import (
    COPIES,
    MIXED_PREFIX,
    UNKNOWN,
    Atom,
    Axis,
    cut_from,
    indexed_label,
    is_piece_label,
    root_axis,
    sizes_of,
    sliced,
    top_level_terms,
    unknown_axes,
    unknown_axis,
)
from shapetrace.engine.axis_reshape import reshape_axes

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.namer import Namer


# ---------------------------------------------------------------------------
# moving, adding and removing axes
# ---------------------------------------------------------------------------

def permute_axes(axes: Sequence[Axis], order: Sequence[int]) -> tuple[Axis, ...]:
    return tuple(axes[i] for i in order)


def transpose_order(ndim: int, d0: int, d1: int) -> list[int]:
    order = list(range(ndim))
    d0, d1 = d0 % ndim, d1 % ndim
    order[d0], order[d1] = order[d1], order[d0]
    return order


def unsqueeze_axes(axes: Sequence[Axis], dim: int) -> tuple[Axis, ...]:
    dim = dim % (len(axes) + 1)
    return tuple(axes[:dim]) + (Axis(),) + tuple(axes[dim:])


def squeeze_axes(axes: Sequence[Axis], out_shape: Sequence[int]) -> tuple[Axis, ...]:
    """Drop size-1 axes so that what is left has ``out_shape``."""
    kept = list(axes)
    while len(kept) > len(out_shape):
        for i, (a, s) in enumerate(zip(kept, list(out_shape) + [None])):
            if a.size == 1 and s != 1:
                del kept[i]
                break
        else:
            for i in range(len(kept) - 1, -1, -1):
                if kept[i].size == 1:
                    del kept[i]
                    break
    return tuple(kept)


def expand_axes(axes: Sequence[Axis], out_shape: Sequence[int], namer: Namer) -> tuple[Axis, ...]:
    """``expand``: new leading axes and size-1 axes grown to ``n`` (stride 0): broadcast copies.

    A grown axis next to ``H_kv`` whose size is ``n_rep`` is the GQA repeat; one just before ``H_kv`` of that size
    keeps its copies (merged with ``H_kv`` they tile the key/value heads, einops' ``"g ... -> (r g) ..."``); others
    are unnamed.
    """
    lead = len(out_shape) - len(axes)
    out = []
    for j, size in enumerate(out_shape):
        src = axes[j - lead] if j >= lead else Axis()
        if src.size == size:
            out.append(src)
            continue
        before = axes[j - lead - 1] if j - lead - 1 >= 0 else None
        after = axes[j - lead + 1] if 0 <= j - lead + 1 < len(axes) else None
        grown = _grown_axis(size, namer, before)
        tiles_kv_heads = after is not None and namer.label(after) == "H_kv" and namer.size_of("n_rep") == size
        out.append(grown if grown.atoms and (grown.atoms[0].root != COPIES or tiles_kv_heads) else unknown_axis(size))
    return tuple(out)


def _grown_axis(size: int, namer: Namer, src: Axis | None = None) -> Axis:
    """The new axis of ``expand``/``repeat``: copies, named only where provenance says what they are.

    Repeating key/value heads (``H_kv``) ``n_rep`` times gives the query heads (GQA), so that copy
    count is ``n_rep``; any other count of copies has no name (a repeat along tokens is not batch).
    """
    kv_heads = src is not None and (namer.label(src) == "H_kv" if src.atoms else namer.dims.get("H_kv") == 1)
    if kv_heads and namer.size_of("n_rep") == size:
        return root_axis("n_rep", size)
    return Axis((Atom(COPIES, size, 1, size),)) if size != 1 else Axis()


def repeat_axes(axes: Sequence[Axis], repeats: Sequence[int], namer: Namer) -> tuple[Axis, ...]:
    """``repeat`` tiles: the copy index is the *major* part of each grown axis (``2·T``)."""
    lead = len(repeats) - len(axes)
    out = []
    for j, r in enumerate(repeats):
        src = axes[j - lead] if j >= lead else Axis()
        out.append(src if r == 1 else Axis(_grown_axis(r, namer).atoms + src.atoms))
    return tuple(out)


def repeat_interleave_axes(axes: Sequence[Axis], repeats: int, dim: int | None,
                           namer: Namer) -> tuple[Axis, ...]:
    """``repeat_interleave``: each element repeated in place, the copy index is *minor* (``T·2``);
    key/value heads repeated ``n_rep`` times are the query heads ``H`` (GQA)."""
    if dim is None:
        flat = reshape_axes(axes, [math.prod(sizes_of(axes))], namer)[0]
        return (Axis(flat.atoms + _grown_axis(repeats, namer).atoms),)
    dim %= len(axes)
    grown = Axis(axes[dim].atoms + _grown_axis(repeats, namer, axes[dim]).atoms)
    return tuple(axes[:dim]) + (grown,) + tuple(axes[dim + 1:])


def index_axes(axes: Sequence[Axis], spec: Sequence[str], items: Sequence, out_shape: Sequence[int],
               namer: Namer) -> tuple[Axis, ...] | None:
    """Indexing. ``spec`` has one entry per index item: ``"int"`` (drops an axis), ``"slice"``
    (keeps it: whole, or a derived ``T[0:1]`` name when shorter), ``"full"``, ``"none"`` (a new
    size-1 axis), ``"..."``, ``"adv"`` (a tensor or list). One advanced index replaces its axis
    with the index's (unnamed) axes in place; anything more involved returns None (unnamed)."""
    if spec.count("adv") > 1 or spec.count("...") > 1:
        return None
    consumed = sum(1 for s in spec if s in ("int", "slice", "full", "adv"))
    out: list[Axis] = []
    i = 0
    for item, kind in zip(items, spec):
        if kind == "...":
            n = len(axes) - consumed
            out.extend(axes[i:i + n])
            i += n
        elif kind == "none":
            out.append(Axis())
        elif kind == "int":
            i += 1
        elif kind == "full":
            out.append(axes[i])
            i += 1
        elif kind == "slice":
            size = len(range(*item.indices(axes[i].size)))
            start = item.indices(axes[i].size)[0] if item.step in (None, 1) else None
            out.append(sliced(axes[i], size, namer, start) if item.step in (None, 1) else unknown_axis(size))
            i += 1
        else:  # one advanced index: its own axes take this axis's place
            index_dims = len(out_shape) - len(out) - (len(axes) - i - 1)
            picked = _picked(axes[i], item, namer) if index_dims == 1 else None
            out.extend((picked,) if picked is not None else unknown_axes(out_shape[len(out):len(out) + index_dims]))
            i += 1
    out.extend(axes[i:])
    return tuple(out)


def _picked(axis: Axis, item, namer: Namer) -> Axis | None:
    """A list of constant positions picks those entries of a named axis (transformers' padding check
    ``input_ids[:, [-1, 0]]``: the last and the first token of each row): ``T[-1,0]``, what it indexes kept (a
    pick of tokens is tokens), never the bare name. Only a flat list of ints, each inside a whole axis of one plain
    name."""
    if not isinstance(item, list) or not item or not all(type(k) is int and -axis.size <= k < axis.size
                                                         for k in item):
        return None
    label = namer.label(axis)
    if label is None or not label.isidentifier() or len(axis.atoms) != 1 or not axis.atoms[0].whole:
        return None   # (a pick of a fused axis, Falcon's [..., [-2], :] of H+2*H_kv, is left to rules/fused_parts)
    return Axis((Atom(indexed_label(label, ",".join(map(str, item))), len(item), 1, len(item)),), axis.role)


def split_axes(axes: Sequence[Axis], dim: int, pieces: Sequence[int],
               namer: Namer | None = None) -> list[tuple[Axis, ...]]:
    """``split``/``chunk``: ``k`` equal pieces of a product axis are its minor factor (``3*D`` in
    three gives three ``D``) when that factor has a name; otherwise each piece is a derived slice
    (``D[0:64]``), never the whole axis's name."""
    dim %= len(axes)
    axis = axes[dim]
    n = axis.size
    fused = _fused_parts(axis, len(pieces), namer) if len(set(pieces)) == 1 else None
    if fused is not None:
        return [tuple(axes[:dim]) + (fused,) + tuple(axes[dim + 1:]) for _ in pieces]
    if len(set(pieces)) == 1 and pieces and n % pieces[0] == 0 and n // pieces[0] > 1 and namer is not None:
        _major, minor = reshape_axes([axis], [n // pieces[0], pieces[0]], namer)
        label = namer.label(minor)
        if label is not None and not is_piece_label(label) and not label.startswith(MIXED_PREFIX):
            return [tuple(axes[:dim]) + (minor,) + tuple(axes[dim + 1:]) for _ in pieces]
    outs, start = [], 0
    for size in pieces:
        piece = sliced(axis, size, namer, start) if namer is not None else unknown_axis(size)
        outs.append(tuple(axes[:dim]) + (piece,) + tuple(axes[dim + 1:]))
        start += size
    return outs


def _fused_parts(axis: Axis, count: int, namer: Namer | None) -> Axis | None:
    """``qkv.chunk(3)`` / ``kv.split(D)``: a whole fused width cut into its stack count gives the inner
    width (``3*D`` -> ``D``), whatever the head sizes (a per-head layout is split after a view)."""
    if namer is None or len(axis.atoms) != 1 or not axis.atoms[0].whole:
        return None
    root = namer.aliases.get(axis.atoms[0].root, axis.atoms[0].root)
    factor, _, inner = root.partition("*")
    if factor.isdigit() and int(factor) == count and namer.size_of(inner) == axis.size // count:
        return root_axis(namer.aliases.get(inner, inner), axis.size // count)
    return None


def unbind_axes(axes: Sequence[Axis], dim: int) -> tuple[Axis, ...]:
    dim %= len(axes)
    return tuple(axes[:dim]) + tuple(axes[dim + 1:])


def cat_axes(inputs: Sequence[Sequence[Axis]], dim: int, namer: Namer,
             counted: frozenset[int] = frozenset()) -> tuple[Axis, ...]:
    """``cat``: the joined axis is ``S+T`` (every part named) or unnamed, with the role every part shares
    (blocks of keys joined are keys); the other axes keep the names the inputs agree on. ``counted``: the parts
    (by position) whose joined axis is a fixed number of entries, named by that number (a part made from
    parameters only: DINOv2's register tokens, ``1+4+N``); a part of one entry always is (``T+1``)."""
    dim %= len(inputs[0])
    total = sum(inp[dim].size for inp in inputs)
    kept = [(i, inp) for i, inp in enumerate(inputs) if inp[dim].size > 0] or list(enumerate(inputs))
    inputs = [inp for _, inp in kept]   # an empty cache adds nothing
    if len(inputs) == 1:   # one part (einops' ``pack([t], '* n d')``): a copy, every axis as it was, folds kept
        return tuple(inputs[0])
    first = list(inputs[0])
    labels = [str(inp[dim].size) if inp[dim].size == 1 or i in counted and namer.label(inp[dim]) is None
              else namer.label(inp[dim]) for i, inp in kept]   # one more: T+1
    whole = _reordered_whole(labels, total, namer)
    roles = {inp[dim].role for inp in inputs}
    role = roles.pop() if len(roles) == 1 else None   # blocks of keys joined are keys (LUKE's four score blocks)
    if whole is not None:   # the halves of d_k swapped (RoPE's rotate_half): still d_k; documents back in order
        first[dim] = whole
    elif labels and all(lab and not lab.startswith(MIXED_PREFIX) for lab in labels) and \
            any(not lab.isdigit() for lab in labels) and not _copies_of_batch(labels, namer):
        joined = _joined_parts(labels)
        # the tokens of a sequence declared with this length (a class token and N patches, T = 1+N); a join
        # whose parts hold a declared sequence keeps them (a cache of one entry and a chunk: 1+T, never S)
        declared = next((n for n in ("T", "S") if namer.size_of(n) == total), None)
        if declared is not None and namer.role(joined) == "tokens" and not {"T", "S"} & set(labels):
            joined = declared
        first[dim] = Axis((Atom(joined, total, 1, total),))
    else:
        first[dim] = unknown_axis(total)
    if role is not None and first[dim].atoms and first[dim].atoms[0].root != UNKNOWN:
        first[dim] = first[dim].with_role(role)
    for j in range(len(first)):
        if j == dim:
            continue
        if len({namer.label(inp[j]) for inp in inputs}) > 1:   # the parts disagree, or one is unnamed
            first[j] = unknown_axis(first[j].size)
    return tuple(first)


def _copies_of_batch(labels: list[str], namer: Namer) -> bool:
    """Are these ``k`` parts each all of one batch axis (the Set Transformer's heads stacked on the batch,
    ``cat(Q.split(d, 2), 0)`` of features with no name)? Their join is ``k`` blocks of ``B``, block-major,
    as ``H*B`` is; but what the blocks are is not known, and ``B+B+…`` would read as another batch than
    ``H*B`` and as a mix once cut by ``B``: the joined axis gets no name."""
    return len(labels) > 1 and len(set(labels)) == 1 and namer.role(labels[0]) == "batch"


def _joined_parts(labels: list[str]) -> str:
    """``["1", "1", "N"]`` -> ``2+N``: counted parts next to each other (class and distillation tokens)
    add up; the order of the parts is kept (``1``, ``N``, ``12`` is ``1+N+12``, never ``13+N``)."""
    out: list[str] = []
    for part in (part for lab in labels for part in top_level_terms(lab)):   # T+1 and 1 more: T+2
        if part.isdigit() and out and out[-1].isdigit():
            out[-1] = str(int(out[-1]) + int(part))
        else:
            out.append(part)
    return "+".join(out)


def _reordered_whole(labels: list, total: int, namer: Namer) -> Axis | None:
    """``["d_k[4:8]", "d_k[0:4]"]`` covering all of ``d_k``: the whole axis, else None. The cut axis may be a
    fold of declared names: torchtitan's varlen attention cuts the packed ``B*T`` into documents and joins
    their outputs back in order (``B*T[0:6]``, ``B*T[6:12]``), which is ``B*T`` again, batch-major."""
    ranges, bases = [], set()
    for lab in labels:
        cut = cut_from(lab)
        if cut is None or cut[1] is None or cut[2] is None or cut[1] < 0:
            return None
        bases.add(cut[0])
        ranges.append(cut[1:])
    if len(bases) != 1:
        return None
    covered = sorted(ranges)
    if covered[0][0] != 0 or covered[-1][1] != total or any(a[1] != b[0] for a, b in zip(covered, covered[1:])):
        return None
    base = bases.pop()
    if namer.size_of(base) == total:
        return root_axis(base, total)
    parts = base.split("*")
    sizes = [namer.size_of(part) if part.isidentifier() else None for part in parts]
    if len(parts) < 2 or None in sizes or math.prod(sizes) != total or ranges != covered:
        return None   # (a fold's cuts joined out of order are a permutation of it, not the fold)
    return Axis(tuple(Atom(part, size, 1, size) for part, size in zip(parts, sizes)))


def stack_axes(inputs: Sequence[Sequence[Axis]], dim: int) -> tuple[Axis, ...]:
    first = list(inputs[0])
    dim %= len(first) + 1
    return tuple(first[:dim]) + (unknown_axis(len(inputs)),) + tuple(first[dim:])
