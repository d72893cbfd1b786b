"""Sizes and indices: names that sizes read from axes give to what is built from them.

Reads: a record whose arguments carry :class:`~shapetrace.engine.sizes.SizeOf` values (``x.size(0)``
read while the trace recorded) and the axes of the nodes they were read from. Adds: the names of

- a tensor made from sizes alone (``torch.arange(x.size(1))`` is ``[T]``; ``torch.zeros(n, m)`` with
  both read from axes is ``[that axis, that axis]``): its axes are those axes, whatever their sizes;
- an axis an ``expand`` grows to a size read from an axis (``cls_token.expand(x.size(0), -1, -1)``:
  one copy per batch entry, ``B``);
- an unnamed axis sliced from its start to a size read from an axis (``self.bias[:, :, :T, :T]``,
  transformers' GPT-2 ``self.bias[:, :, key_length - query_length : key_length, :key_length]`` at a
  prefill, ``wpe[:x.size(1)]``): positions ``0 … n - 1``, as ``arange(n)`` is, so that axis.

A count that starts after a read size counts what it adds to it (``torch.arange(past, past + T)``,
transformers' ``cache_position``: T positions after ``past`` cached ones, along T's axis). A size that
was not read from an axis, or other arithmetic on one (``n + 1`` on its own), names nothing; a sum of two
reads is the axis a ``cat`` of those two axes makes (``cache.size(2) + T``: ``T+T``). Equal values
never stand in for a read: the value carries its source, or it carries none.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from shapetrace.engine.axes import COPIES, UNKNOWN, Atom, Axis, unknown_axis
from shapetrace.engine.axis_moves import cat_axes
from shapetrace.engine.infer.seeds import fitting_seeds, sequence_name
from shapetrace.engine.infer.writes import BATCH_CAPACITY
from shapetrace.engine.sizes import SizeOf, SizeQuot, SizeSum, other_term
from shapetrace.engine.thawed import thaw_args

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.infer.state import Inference


def constructed_axes(state: Inference, record) -> tuple[Axis, ...] | None:
    """The axes of a tensor built from sizes (``arange``, ``zeros``...), or None where one of its
    sizes was not read from an axis. A 1, literal or read from an unnamed axis, is a size-1 axis, which no
    name needs (Swin's ``img_mask = torch.zeros((1, H, W, 1))`` with ``H, W`` read from the grid is ``[1, H, W,
    1]``; a decode step's ``ones(seqlen, total).tril(total - seqlen)`` at seqlen = 1 is ``[1, T+1]``)."""
    args, kwargs = thaw_args(record.frozen)
    shape = tuple(record.out_shapes[0])
    if record.spec.sized == "count":
        sizes = _count(args, kwargs)
    else:
        sizes = list(args[0]) if args and isinstance(args[0], (tuple, list)) else list(kwargs.get("size", args))
        if record.spec.sized == "sequence" and not (args and isinstance(args[0], (tuple, list))):
            sizes = []   # full(size, fill_value): the size is a sequence
    if len(sizes) != len(shape):
        return None
    found = [_size_axis(state, s, n) for s, n in zip(sizes, shape)]
    return None if None in found else tuple(found)


def _size_axis(state: Inference, size, length: int) -> Axis | None:
    """The axis a size given to a tensor built from sizes makes, ``length`` long: the named axis it was read from,
    the join of two it adds, or a size-1 axis for a 1; None where it is none of those."""
    found = read_axis(state, size) or _read_sum(state, size) or _one(size)
    return found if found is not None and found.size == length else None


def _one(size) -> Axis | None:
    """A size of 1 that no named axis gave (a literal, or a decode step's ``x.shape[1]`` of an unnamed axis) is a
    size-1 axis: one entry has no order to keep."""
    return Axis() if isinstance(size, int) and size == 1 else None


def partly_read_axes(state: Inference, record) -> tuple[Axis, ...] | None:
    """The axes of a tensor built from sizes some of which were read from axes and some written as literals: each
    read size names its axis, each literal 1 is a size-1 axis, each other literal is unnamed. Used where seeding it
    by its shape (as a tensor that enters) would put a data size's name (batch, tokens) on a literal (code learns
    those from its input and never writes them, so a literal 2 at B = 2 is the code's own count: ProphetNet's
    ``torch.ones((ngram, T, T))``, ``T`` read from the ids, is ``[2, T, T]`` at every B), or where no seed fits its
    shape (Pix2Struct's ``torch.zeros((1, n_heads, T, T))``: ``[1, 4, T, T]``). None elsewhere: the seed stands
    (``torch.zeros(B, T, d_model)``, a literal width, is ``[B, T, D]``)."""
    args, kwargs = thaw_args(record.frozen)
    shape = tuple(record.out_shapes[0])
    if record.spec.sized == "count" or not record.outs:
        return None
    sizes = list(args[0]) if args and isinstance(args[0], (tuple, list)) else list(kwargs.get("size", args))
    if record.spec.sized == "sequence" and not (args and isinstance(args[0], (tuple, list))) \
            or len(sizes) != len(shape) or not any(type(s) is SizeOf for s in sizes):
        return None
    fitting = fitting_seeds(state, shape, sequence_name(state, record.outs[0], shape))
    role = state.namer.plain_role
    literal_data = any(type(s) is int and s != 1 and role(n) in ("batch", "tokens")
                       for names in fitting for s, n in zip(sizes, names))
    if fitting and not literal_data:
        return None
    return tuple(_size_axis(state, s, n) or unknown_axis(n) for s, n in zip(sizes, shape))


def grown_axes(state: Inference, record, out_axes: list) -> list:
    """``expand``: an axis grown to a size read from an axis (a copy per entry of it) takes its name."""
    sizes = _size_args(record, out_axes, "size")
    return out_axes if sizes is None else _grown(record, out_axes, lambda j: read_axis(state, sizes[j]))


def grown_like_other(record, in_axes: list, out_axes: list) -> list:
    """``mask.expand_as(scores)``: an axis grown to the size of the other's axis at its place (a copy per
    entry of it) takes that axis's name, as ``expand`` does with a size read from an axis (DistilBERT's
    ``(mask == 0).view(bs, 1, 1, k_length).expand_as(scores)``)."""
    if len(out_axes) != 1 or len(in_axes) < 2 or not record.in_raw or len(in_axes[1]) != len(out_axes[0]):
        return out_axes
    other = in_axes[1]
    return _grown(record, out_axes, lambda j: None if other[j].size == 1 or unnamed_or_copies(other[j]) else other[j])


def _grown(record, out_axes: list, source) -> list:
    """``out_axes`` with each unnamed axis the call grew (a new leading axis, or one of size 1 before) named
    by ``source(j)``, the axis its copies count entries of, where that has its size."""
    axes = list(out_axes[0])
    before = tuple(record.in_raw[0][0]) if record.in_raw else ()
    lead = len(axes) - len(before)
    for j, axis in enumerate(axes):
        found = source(j) if j < lead or before[j - lead] == 1 else None
        if found is not None and found.size == axis.size and unnamed_or_copies(axis):
            axes[j] = found
    return [tuple(axes)]


def repeated_axes(state: Inference, record, out_axes: list) -> list:
    """``repeat(b, 1, 1)``, ``repeat_interleave(b, dim)``: the piece of copies of an axis, counted by a size
    read from an axis, takes that axis's name (a copy per entry of it, as ``expand`` grows one): Megatron's
    ``alibi.repeat(batch_size, 1, 1)`` of ``[H, 1, T]`` is ``[B·H, 1, T]``, its ``repeat_interleave`` ``[H·B, 1,
    T]``."""
    if len(out_axes) != 1 or not record.spec.repeats:
        return out_axes
    axes = list(out_axes[0])
    for j, count in _counts(record, len(axes)):
        found = read_axis(state, count)
        if found is None or len(found.atoms) != 1 or not found.atoms[0].whole:
            continue
        atoms = axes[j].atoms
        copies = [k for k, a in enumerate(atoms) if a.root == COPIES and a.size == found.size]
        if len(copies) == 1:
            axes[j] = Axis(atoms[:copies[0]] + found.atoms + atoms[copies[0] + 1:], axes[j].role)
    return [tuple(axes)]


def _counts(record, rank: int) -> list[tuple[int, object]]:
    """``(output axis, its count of copies)`` of a ``repeat`` (one count per axis, from the right) or a
    ``repeat_interleave`` along one ``dim``."""
    args, kwargs = thaw_args(record.frozen)
    rest = list(args[1]) if len(args) == 2 and isinstance(args[1], (tuple, list)) else list(args[1:])
    if len(rest) == rank and all(isinstance(n, int) for n in rest):
        return list(enumerate(rest))   # (repeat)
    count, dim = kwargs.get("repeats", rest[0] if rest else None), kwargs.get("dim", rest[1] if len(rest) > 1 else None)
    return [(dim % rank, count)] if isinstance(count, int) and isinstance(dim, int) else []


def sliced_axes(state: Inference, record, out_axes: list) -> list:
    """``x[..., :n]`` (basic indexing): an unnamed axis cut from position 0 to a size read from an axis
    takes that axis's name (its first ``n`` positions, as ``arange(n)``). So does an axis of batch slots
    (:data:`~.writes.BATCH_CAPACITY`, meta-llama's ``cache_k[:bsz]`` read back after the write into
    ``cache_k[:bsz, s:e]``) cut to a size read from a batch axis: its first ``bsz`` slots are where that
    batch was written. So does a slice of the ``n`` positions after ``c`` (``[c : n + c]``,
    :func:`_counted`). A slice that starts elsewhere (a decode step's ``k - 1 : k``) or steps names
    nothing, nor does a slice of a merge of unnamed axes (:func:`_merged`)."""
    if len(out_axes) != 1 or len(record.ins) != 1:
        return out_axes
    args, _ = thaw_args(record.frozen)
    items = args[1] if len(args) == 2 and isinstance(args[1], tuple) else args[1:]
    placed = _placed_slices(items, len(record.in_raw[0][0]))
    if placed is None:
        return out_axes
    axes, cut = list(out_axes[0]), state.axes_of(record.ins[0])
    for j, i, item in placed:
        found = read_axis(state, _counted(item))
        if found is None or j >= len(axes) or found.size != axes[j].size:
            continue
        if unnamed_or_copies(axes[j]) and not _merged(cut, i) or _batch_slots_of(state, axes[j], found):
            axes[j] = found
        elif i < len(cut) and _features_cut_to_tokens(state, cut[i], found):
            axes[j] = unknown_axis(found.size)
    return [tuple(axes)]


#: a name counted in several of another (``2*d_k``)
_MULTIPLE = re.compile(r"\d+\*")


def _features_cut_to_tokens(state: Inference, cut: Axis, found: Axis) -> bool:
    """Is a features axis cut to a count of tokens (``dense[..., :T]`` with ``T`` read from the input)? The
    code reads its entries as positions, the names as features: the name came from a width equal to a
    declared one (the Synthesizer's ``Linear(D, H * max_len)`` at ``max_len = D / H``), which this use
    contradicts, so the cut axis takes neither name."""
    role = state.namer.role
    if len(cut.atoms) != 1 or len(found.atoms) != 1 or _MULTIPLE.match(cut.atoms[0].root):
        return False   # (a piece ``2*d_k`` cut off its parts unnames its whole width: widths.py)
    return role(cut.atoms[0].root) in ("features", "head_features") and role(found.atoms[0].root) == "tokens"


def _batch_slots_of(state: Inference, axis: Axis, found: Axis) -> bool:
    """Is ``axis`` the first slots of a buffer's batch capacity, cut to the size of the batch ``found``?"""
    return len(axis.atoms) == 1 and axis.atoms[0].root in (BATCH_CAPACITY, f"{BATCH_CAPACITY}[0:{axis.size}]") and \
        len(found.atoms) == 1 and state.namer.role(found.atoms[0].root) == "batch"


def note_sizes_against_names(state: Inference, record, out_axes: list) -> None:
    """A reshape whose size argument was read from one named axis and lands where the elements carry
    another declared name of the same size (fairseq's ``view(num_heads, bsz, T, S)`` of its batch-major
    fold ``[B·H, T, S]`` at B = H: ``bsz`` stands where the elements are heads). The code and the
    elements disagree, which only equal sizes let run: which name holds is a choice between them
    (``state.size_choices``), so the names resting on it are not proven."""
    sizes = _reshape_sizes(record, out_axes)
    if sizes is None:
        return
    label = state.namer.label
    for size, axis in zip(sizes, out_axes[0]):
        read = read_axis(state, size)
        if read is not None and label(read) != label(axis):
            state.size_choices.update(pair for pair in state.namer.coinciding_sizes()
                                      if set(pair) == {label(read), label(axis)})


def regrouped_one(state: Inference, record, in_axes: list, out_axes: list) -> tuple[str, tuple[str, ...]] | None:
    """A reshape given a size read from a named axis of one entry (``bsz`` at B = 1) that places that entry
    on the other side of other axes' elements than memory holds it: ``(its name, the names it crossed)``,
    else None. A view moves no element, so at every size its axes keep the memory order of the pieces they
    are cut from; an axis of one entry can stand anywhere among them and hold the same elements, so the
    run cannot show where it belongs. BART's scores ``[bsz·H, T, S]`` (batch-major) viewed ``(H, bsz, T,
    S)``: at B = 1 the same elements as ``(bsz, H, T, S)``, at B = 2 each "batch" is half the heads of one
    sequence. The size's read says where the code puts the batch; the fold's pieces say where memory has it."""
    sizes = _reshape_sizes(record, out_axes)
    if sizes is None or not in_axes:
        return None
    for size, axis in zip(sizes, out_axes[0]):
        read = _read_one(state, size) if type(size) in (SizeOf, SizeQuot) and size == 1 else None
        if read is None or axis.atoms != read.atoms:
            continue
        held, placed = _sides(in_axes[0], read.atoms[0]), _sides(out_axes[0], read.atoms[0])
        if held is None or placed is None:
            continue
        crossed = [p for p, side in placed if all(s != side for a, s in held if _overlap(a, p))
                   and any(_overlap(a, p) for a, _ in held)]
        if crossed:
            return state.namer.label(read), tuple(dict.fromkeys(state.namer.label(Axis((p,))) for p in crossed))
    return None


def _read_one(state: Inference, size) -> Axis | None:
    """The axis a size of one entry was read from: ``x.size(0)``, or a fold divided by the size of all its
    other pieces (Bloom's ``batch_size_and_num_heads // num_heads`` at B = 1): its one named piece of one
    entry, the piece that grows with the fold while the divisor stays, wherever the fold holds it."""
    if type(size) is SizeOf:
        return read_axis(state, size)
    if type(size) is not SizeQuot:
        return None
    fold = read_axis(state, size.of)
    if fold is None or math.prod(a.size for a in fold.atoms if a.size != 1) != size.by:
        return None
    ones = [a for a in fold.atoms if a.size == 1 and a.root not in (UNKNOWN, COPIES)]
    return Axis((ones[0],)) if len(ones) == 1 else None


def _sides(axes, one) -> list[tuple[Atom, bool]] | None:
    """``(piece, before one?)`` for each named piece of more than one entry, in memory (logical) order; None
    where ``one`` is not among the pieces."""
    atoms = [a for axis in axes for a in axis.atoms]
    if one not in atoms:
        return None
    where = atoms.index(one)
    return [(a, k < where) for k, a in enumerate(atoms) if a.size != 1 and a.root not in (UNKNOWN, COPIES)]


def _overlap(a: Atom, b: Atom) -> bool:
    """Do two pieces of one root share elements (the same positions of the root, cut another way)?"""
    return a.root == b.root and max(a.stride, b.stride) < min(a.stride * a.size, b.stride * b.size)


def _reshape_sizes(record, out_axes: list) -> list | None:
    """The size arguments of a ``view``/``reshape`` to one output, one per output axis, or None."""
    return _size_args(record, out_axes, "shape")


def _size_args(record, out_axes: list, keyword: str) -> list | None:
    """The sizes a call to one output was given (``x.view(2, 3)``, ``x.view((2, 3))``, ``x.expand(size=...)``),
    one per output axis, or None."""
    if len(out_axes) != 1:
        return None
    args, kwargs = thaw_args(record.frozen)
    sizes = list(args[1]) if len(args) == 2 and isinstance(args[1], (tuple, list)) else \
        list(args[1:]) or list(kwargs.get(keyword, ()))
    return sizes if len(sizes) == len(out_axes[0]) else None


def _placed_slices(items, rank: int) -> list[tuple[int, int, slice]] | None:
    """``(output axis, input axis, slice)`` for each slice of a basic index (ints, slices, ``None``, one
    ``...``); None for any other index (advanced indexing moves axes)."""
    if any(not (i is None or i is Ellipsis or type(i) is int or isinstance(i, slice)) for i in items) or \
            sum(i is Ellipsis for i in items) > 1:
        return None
    spanned = sum(1 for i in items if i is not None and i is not Ellipsis)
    placed, out, inp = [], 0, 0
    for item in items:
        if item is Ellipsis:
            out, inp = out + rank - spanned, inp + rank - spanned
        elif isinstance(item, slice):
            placed.append((out, inp, item))
            out, inp = out + 1, inp + 1
        elif item is None:
            out += 1
        else:
            inp += 1
    return placed


def _from_start(item: slice) -> bool:
    return item.start in (None, 0) and item.step in (None, 1) and type(item.stop) is SizeOf


def _counted(item: slice):
    """The size a slice counts: ``n`` for ``[:n]``, and for ``[c : n + c]`` (BERT's ``position_ids[:,
    cache_length : seq_length + cache_length]``, its table's ``n`` positions after ``c`` cached ones, as
    ``arange(c, c + n)`` counts them); None for any other slice."""
    if _from_start(item):
        return item.stop
    if item.step not in (None, 1) or type(item.stop) is not SizeSum:
        return None
    return other_term(item.stop, 0 if item.start is None else item.start)


def _count(args, kwargs) -> list:
    """``arange(n)``, ``arange(0, n)``, ``arange(0, n, 1)``: n positions along the axis n was read from;
    ``arange(past, past + n)`` (HF's ``cache_position``, a decode step's new tokens after ``past`` cached
    ones) likewise: n positions, counted from ``past``."""
    values = list(args) + [kwargs[k] for k in ("start", "end", "step") if k in kwargs]
    if len(values) == 1:
        return values
    if len(values) in (2, 3) and (len(values) == 2 or values[2] == 1):
        length = other_term(values[1], values[0])   # (of a sum: only a term read from an axis counts)
        return [] if length is None or type(values[1]) is SizeSum and type(length) is not SizeOf else [length]
    return []


def read_axis(state: Inference, size) -> Axis | None:
    """The named axis a size was read from in this capture (``x.size(1)``), or None."""
    if type(size) is not SizeOf or size.stamp != state.capture.size_read.stamp:
        return None   # (a size another capture read, handed back by a library's cache: another node's)
    axes = state.axes_of(size.node)
    if not 0 <= size.axis < len(axes):
        return None
    axis = axes[size.axis]
    return None if unnamed_or_copies(axis) or axis.size != int(size) else axis


def _read_sum(state: Inference, size) -> Axis | None:
    """A size that adds two sizes both read from axes (wenet's ``torch.ones(n_batch, 1, cache.size(2) + chunk)``,
    a mask over the cached frames and the chunk's): the axis a ``cat`` of those two axes makes (``T+T``), as the
    keys joined from the cache and the chunk are named; None where a term was not read from a named axis."""
    if type(size) is not SizeSum:
        return None
    parts = [read_axis(state, term) for term in size.terms]
    if any(part is None for part in parts):
        return None
    joined = cat_axes([[part] for part in parts], 0, state.namer)[0]
    return None if unnamed_or_copies(joined) else joined


def unnamed_or_copies(axis: Axis) -> bool:
    return not axis.atoms or all(a.root in (UNKNOWN, COPIES) for a in axis.atoms)


def _merged(axes, i: int) -> bool:
    """Is axis ``i`` of ``axes`` a merge of several unnamed axes (``positions.reshape(-1)`` of a ``[3, T]``
    grid)? Its first ``n`` entries are the grid's first elements in memory order, no count of ``n``
    positions along one axis."""
    return 0 <= i < len(axes) and sum(a.root == UNKNOWN for a in axes[i].atoms) > 1
