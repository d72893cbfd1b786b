"""Axis names through ops that read memory again: ``view``/``reshape`` (atoms regrouped, or cut into
an opaque mix) and ``as_strided`` (axes read off the operand's own layout). Pure Python.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from shapetrace.engine.axes import (
    MIXED_PREFIX,
    UNKNOWN,
    Atom,
    Axis,
    _root_of_label,
    base_names,
    coalesce,
    unknown_axes,
    unknown_axis,
)
from shapetrace.engine.layout import row_major
from shapetrace.engine.vocabulary import OWN_WIDTHS

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.namer import Namer


# ---------------------------------------------------------------------------
# view / reshape / flatten / unflatten
# ---------------------------------------------------------------------------

def reshape_axes(axes: Sequence[Axis], out_shape: Sequence[int],
                 namer: Namer | None = None, alone: frozenset[int] = frozenset()) -> tuple[Axis, ...]:
    """Names after ``view``/``reshape`` to ``out_shape`` (sizes must multiply out).

    Groups input and output axes whose sizes multiply to the same product, then
    re-cuts each group's atoms at the output boundaries. ``alone``: the output axes whose size the
    code read from one axis (no piece of one entry is put there).

    >>> t, d = root_axis("T", 6), root_axis("D", 512)
    >>> [a.size for a in reshape_axes([t, d], [6, 8, 64])]
    [6, 8, 64]
    """
    in_sizes = [a.size for a in axes]
    out_sizes = list(out_shape)
    if math.prod(in_sizes) != math.prod(out_sizes):
        raise ValueError(f"cannot reshape {in_sizes} to {out_sizes}")
    result: list[Axis | None] = [None] * len(out_sizes)
    in_idx = [i for i, s in enumerate(in_sizes) if s != 1]
    out_idx = [j for j, s in enumerate(out_sizes) if s != 1]
    for gi, gj in _groups([in_sizes[i] for i in in_idx], [out_sizes[j] for j in out_idx]):
        group_in = [axes[in_idx[i]] for i in gi]
        new = _recut([a.atoms for a in group_in], [out_sizes[out_idx[j]] for j in gj], namer)
        for j, atoms in zip(gj, new):
            role = _carried_role(group_in, atoms)
            result[out_idx[j]] = Axis(atoms, role)
    # size-1 axes that carry a name (a decode step's T[-1:], B = 1): kept in order, into an output
    # axis of size 1, else inside the merged axis that holds their neighbour (view(-1, D) on
    # [B, T[-1:], D] is [B*T[-1:], D]), from where a later split takes them out again
    carried_ones = [Axis((atom,)) for a in axes for atom in a.atoms if atom.size == 1 and a.size != 1] + \
        [a for a in axes if a.size == 1 and a.atoms]
    slots = [j for j, s in enumerate(out_sizes) if result[j] is None and s == 1]
    for j in range(len(out_sizes)):
        if result[j] is None:
            result[j] = carried_ones.pop(0) if (j in slots and carried_ones) else Axis()
    if carried_ones and not slots:
        _merge_ones(result, axes, carried_ones, alone)
    return tuple(result)  # type: ignore[arg-type]


def _merge_ones(result: list, axes: Sequence[Axis], ones: list[Axis], alone: frozenset[int] = frozenset()) -> None:
    """Put named size-1 axes beside a neighbour in memory: inside the output axis that holds the piece just
    before them (``view(-1, D)`` on ``[B, T[-1:], D]`` is ``[B·T[-1:], D]``), or the piece just after them
    where none is before (``[B, H, T, d]`` at B = 1 viewed ``(B * H, T, d)`` is ``[B·H, T, d]``, batch-major
    as at every B) or where the code gave the axis before a size read from one axis alone (``alone``:
    fairseq's ``view(tgt_len, bsz * H, d)`` of ``[T, B, D]`` at B = 1 is ``[T, B·H, d]``, not ``[T·B,
    H, d]``). A piece inside a merged axis stays beside the pieces of that axis (its first: beside the
    piece after it)."""
    flat = [(k, atom) for k, a in enumerate(axes) for atom in a.atoms]
    for one in ones:
        where = next((i for i, (_, atom) in enumerate(flat) if atom == one.atoms[0]), None)
        if where is None:
            continue
        host = flat[where][0]
        before = next(((k, a) for k, a in reversed(flat[:where]) if a.size != 1), None)
        after = next(((k, a) for k, a in flat[where + 1:] if a.size != 1), None)
        j_before = _holder(result, before[1], last=True) if before else None
        j_after = _holder(result, after[1], last=False) if after else None
        inside_after = after is not None and after[0] == host and (before is None or before[0] != host)
        if j_before is not None and not inside_after and j_before not in alone:
            result[j_before] = _inserted(result[j_before], one.atoms, before[1], after_it=True)
        elif j_after is not None:
            result[j_after] = _inserted(result[j_after], one.atoms, after[1], after_it=False)


def _holder(result: list, atom: Atom, last: bool) -> int | None:
    """The output axis holding a piece of ``atom``'s root where it sits (its last piece, or its first)."""
    found = [j for j, out in enumerate(result) if out is not None and any(_piece_of(p, atom) for p in out.atoms)]
    return (found[-1] if last else found[0]) if found else None


def _piece_of(piece: Atom, atom: Atom) -> bool:
    return piece.root == atom.root and piece.size != 1 and atom.stride <= piece.stride < atom.stride * atom.size


def _inserted(out: Axis, atoms: tuple[Atom, ...], neighbour: Atom, after_it: bool) -> Axis:
    """``out`` with ``atoms`` put right after the last piece of ``neighbour`` (or right before its first)."""
    places = [i for i, p in enumerate(out.atoms) if _piece_of(p, neighbour)]
    at = places[-1] + 1 if after_it else places[0]
    return Axis(out.atoms[:at] + atoms + out.atoms[at:], out.role)


def _carried_role(group_in: Sequence[Axis], atoms: tuple[Atom, ...]) -> str | None:
    """The role of the input axis the output axis is, atoms of one entry aside (at B = 1 fairseq's
    ``view(T, B * H, d)`` leaves the batch's one entry beside the tokens, ``T·B``, and a later view
    ``(B, H, T, S)`` takes it out: the queries stay the queries)."""
    wanted = _without_ones(atoms)
    for axis in group_in:
        if _without_ones(axis.atoms) == wanted:
            return axis.role
    return None


def _without_ones(atoms: Sequence[Atom]) -> tuple[Atom, ...]:
    return tuple(a for a in atoms if a.size != 1)


def _groups(ins: list[int], outs: list[int]) -> list[tuple[list[int], list[int]]]:
    groups = []
    i = j = 0
    while i < len(ins) and j < len(outs):
        gi, gj = [i], [j]
        pi, pj = ins[i], outs[j]
        while pi != pj:
            if pi < pj:
                i += 1
                gi.append(i)
                pi *= ins[i]
            else:
                j += 1
                gj.append(j)
                pj *= outs[j]
        groups.append((gi, gj))
        i += 1
        j += 1
    return groups


def _recut(in_atom_lists: Sequence[tuple[Atom, ...]], out_sizes: list[int],
           namer: Namer | None) -> list[tuple[Atom, ...]]:
    # pieces of one root that sit next to each other in memory are read as one (a window grid merged
    # back, ``(y w2)``, and cut again another way, ``(w2 y)``: MaxViT's grid after its blocks)
    atoms = list(coalesce([a for lst in in_atom_lists for a in lst if a.size != 1]))
    atom_strides = row_major([a.size for a in atoms])
    out_strides = row_major(out_sizes)
    total = math.prod(out_sizes)
    bounds = sorted({*atom_strides, *out_strides, total})
    if all(b2 % b1 == 0 for b1, b2 in zip(bounds, bounds[1:])):
        return _recut_chain(atoms, atom_strides, out_sizes, out_strides, bounds)
    if namer is not None:  # name the finest known parts in what gets mixed (T*H, not T*D)
        atoms = [leaf for a in atoms for leaf in namer.leaves(a)]
        atom_strides = row_major([a.size for a in atoms])
    return [_opaque(atoms, atom_strides, s, n, namer) for s, n in zip(out_strides, out_sizes)]


def _recut_chain(atoms, atom_strides, out_sizes, out_strides, bounds) -> list[tuple[Atom, ...]]:
    pieces: list[tuple[int, Atom]] = []  # (group stride, sub-atom), major first
    for atom, g in zip(atoms, atom_strides):
        inner = [b for b in bounds if g <= b <= g * atom.size]
        for lo, hi in reversed(list(zip(inner, inner[1:]))):
            sub = Atom(_cut_root(atom, hi // lo), atom.root_size, atom.stride * (lo // g), hi // lo)
            pieces.append((lo, sub))
    pieces.sort(key=lambda p: -p[0])
    out = []
    for stride, size in zip(out_strides, out_sizes):
        out.append(tuple(a for g, a in pieces if stride <= g < stride * size))
    return out


def _cut_root(atom: Atom, size: int) -> str:
    """The root of a piece of ``atom`` of ``size`` entries: its own, except a piece of a width a projection
    made (``F``: :func:`.axis_compute.projected_width`, or a slice of it) or an input's own (``F_in``), which
    says nothing of what the piece holds (heads, q, k and v, or a head's features: the split is the question):
    unnamed, as the whole was before it had a name."""
    return UNKNOWN if size != atom.root_size and any(n in OWN_WIDTHS for n in base_names(atom.root)) else atom.root


def _opaque(atoms, atom_strides, stride: int, size: int, namer: Namer | None) -> tuple[Atom, ...]:
    """One atom naming every input atom that this output axis walks across."""
    touched = [(a, g) for a, g in zip(atoms, atom_strides) if _walks_across(stride, size, g, a.size)]
    if len(touched) == 1 and touched[0][0].size == size and touched[0][1] == stride:
        return (touched[0][0],)
    names: list[str] = []
    for a, _g in touched:
        label = namer.atom_label(a) if namer else a.root
        name = label[1:] if label.startswith(MIXED_PREFIX) else _root_of_label(label)
        for part in name.split("*"):
            if part not in names:
                names.append(part)
    if len([n for n in names if n != UNKNOWN]) >= 2:   # two named parts mixed: a mix whatever the unnamed ones are
        names = [n for n in names if n != UNKNOWN]
    return (Atom(MIXED_PREFIX + "*".join(names), size, 1, size),)


def _walks_across(stride: int, size: int, atom_stride: int, atom_size: int) -> bool:
    """Does stepping ``size`` times by ``stride`` change the digit of this atom?"""
    if size <= 1 or atom_size <= 1:
        return False
    span = atom_stride * atom_size
    r = stride % span
    if r == 0:
        return False
    if r >= atom_stride:
        return True
    return size - 1 >= -(-atom_stride // r)



# ---------------------------------------------------------------------------
# as_strided: output axes read off the operand's own layout
# ---------------------------------------------------------------------------

#: one digit of an operand's memory: (memory stride, size, the piece of a root it walks)
_Digit = tuple[int, int, Atom]


def _digits(axes: Sequence[Axis], strides: Sequence[int]) -> list[_Digit] | None:
    """The operand's memory as digits, finest first: each axis's atoms, with the memory stride each
    one steps by. None when two digits overlap (an expanded or overlapping operand)."""
    out: list[_Digit] = []
    for axis, stride in zip(axes, strides):
        inner = 1
        for atom in reversed(axis.atoms):
            if atom.size > 1:
                if stride <= 0:
                    return None
                out.append((stride * inner, atom.size, atom))
            inner *= atom.size
    out.sort(key=lambda d: d[0])
    if any(a[0] * a[1] > b[0] for a, b in zip(out, out[1:])):
        return None
    return out


def _cut_digits(digits: list[_Digit], cuts: set[int]) -> list[_Digit]:
    """Digits split where an output axis starts or ends inside one (and the pieces nest)."""
    out: list[_Digit] = []
    for g, m, atom in digits:
        edges = [g] + sorted(c for c in cuts if g < c < g * m and c % g == 0 and (g * m) % c == 0) + [g * m]
        if any(hi % lo for lo, hi in zip(edges, edges[1:])):
            edges = [g, g * m]
        for lo, hi in zip(edges, edges[1:]):
            out.append((lo, hi // lo, Atom(atom.root, atom.root_size, atom.stride * (lo // g), hi // lo)))
    return out


def _run(digits: list[_Digit], stride: int, size: int) -> list[int] | None:
    """Indices of the digits one output axis ``(stride, size)`` walks exactly, finest first."""
    start = next((i for i, d in enumerate(digits) if d[0] == stride), None)
    if start is None:
        return None
    run, total = [start], digits[start][1]
    while total < size:
        last = digits[run[-1]]
        nxt = run[-1] + 1
        if nxt >= len(digits) or digits[nxt][0] != last[0] * last[1]:
            return None
        run.append(nxt)
        total *= digits[nxt][1]
    return run if total == size else None


def strided_axes(axes: Sequence[Axis], strides: Sequence[int], out_shape: Sequence[int],
                 out_strides: Sequence[int], namer: Namer) -> tuple[Axis, ...]:
    """``as_strided``: each output axis named by the operand's memory digits it walks exactly.

    An output axis that steps by the memory stride of some piece of the operand and covers whole
    pieces is those pieces (``T`` cut into windows of ``w``: ``T/w``, ``T%w``). One that walks across
    pieces it does not cover whole (overlapping windows) is unnamed, and so is every axis whose pieces
    it crosses; where it crosses pieces of two different named axes (heads and tokens: strides written
    for another layout) it is a mixed axis, named after what it mixes."""
    digits = _digits(axes, strides)
    if digits is None or len(out_shape) != len(out_strides):
        return unknown_axes(tuple(out_shape))
    cuts = {c for s, n in zip(out_strides, out_shape) if n > 1 for c in (s, s * n)}
    digits = _cut_digits(digits, cuts)
    runs = [(_run(digits, s, n) if n > 1 else []) for s, n in zip(out_strides, out_shape)]
    used = [i for run in runs if run for i in run]
    if len(used) != len(set(used)):
        return unknown_axes(tuple(out_shape))
    loose = [(s, n) for (s, n), run in zip(zip(out_strides, out_shape), runs) if n > 1 and run is None]
    out = []
    for (s, n), run in zip(zip(out_strides, out_shape), runs):
        if n == 1:
            out.append(Axis())
        elif run is None:
            out.append(_strided_mix(digits, s, n, namer))
        elif any(_walks_across(ls, ln, digits[i][0], digits[i][1]) for ls, ln in loose for i in run):
            out.append(unknown_axis(n))
        else:
            out.append(Axis(tuple(digits[i][2] for i in reversed(run))))
    return tuple(out)


def _strided_mix(digits: list[_Digit], stride: int, size: int, namer: Namer) -> Axis:
    """An output axis that no run of digits makes: a mixed axis if it crosses pieces of two named
    roots of different roles, else unnamed (a window sliding along one axis)."""
    crossed = [d[2] for d in digits if _walks_across(stride, size, d[0], d[1])]
    names = list(dict.fromkeys(_root_of_label(namer.atom_label(a)) for a in crossed))
    if len(names) < 2 or any(n == UNKNOWN or n.startswith(MIXED_PREFIX) or namer.role(n) is None for n in names):
        return unknown_axis(size)
    return Axis((Atom(MIXED_PREFIX + "*".join(names), size, 1, size),))
