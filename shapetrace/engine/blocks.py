"""Names through ``F.unfold`` and ``F.fold`` (im2col and its inverse): the ``names`` functions of their registry
entries (see :mod:`.propagate`). VOLO's outlook attention unfolds its values into each position's ``k x k``
neighbourhood, weights them, and folds the result back onto the grid."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from shapetrace.engine import axes as ax
from shapetrace.engine.axes import Axis
from shapetrace.engine.propagate import _per_axis

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.op_args import Call

Axes = tuple[Axis, ...]


def _same_grid(sizes, kernel, stride, padding, dilation) -> bool:
    """Do blocks of these kernels, one per position, keep every spatial size (stride 1, padding that centres
    each block on its position: ``2·p == d·(k - 1)``)?"""
    return all(s == 1 and 2 * p == d * (k - 1) for k, s, p, d in zip(kernel, stride, padding, dilation)) \
        and all(size > 0 for size in sizes)


def _block_args(c: Call, n: int, at: int) -> tuple | None:
    """(kernel, stride, padding, dilation) per spatial axis of ``F.unfold``/``F.fold`` (``at``: the index of
    ``kernel_size``), or None where one cannot be read."""
    kernel = _per_axis(c.arg(at, "kernel_size"), n)
    dilation, padding, stride = (_per_axis(c.arg(at + i, key, d), n) for i, key, d in
                                 ((1, "dilation", 1), (2, "padding", 0), (3, "stride", 1)))
    return None if None in (kernel, stride, padding, dilation) else (kernel, stride, padding, dilation)


def im2col(c: Call) -> Axes:
    """``F.unfold(x, kernel_size, dilation, padding, stride)`` of ``[N, C, *grid]`` into ``[N, C·∏k, L]``: the
    batch kept. Where one block sits on each position in order (stride 1, centring padding: VOLO's outlook
    values) the ``L`` blocks are the grid flattened (``Hp·Wp``), as :func:`~.propagate.windows` names one window
    per token, and the columns each channel's block (``C`` outer, the kernel's offsets inner, unnamed). Other
    blocks (NAT's unpadded neighbourhoods, strided ones) are another grid: blocks and columns unnamed, as
    ``windows`` leaves other overlapping windows (their keys' heads, named alone, would be judged against
    tokens no name follows)."""
    x, out = c.in_axes[0], c.shapes[0]
    n = len(x) - 2
    args = _block_args(c, n, 1) if n > 0 and len(c.shapes) == 1 and len(out) == 3 else None
    if args is None or x[1].size * math.prod(args[0]) != out[1]:
        return ax.unknown_axes(out)
    if not _same_grid([a.size for a in x[2:]], *args) or math.prod(a.size for a in x[2:]) != out[2]:
        return x[0], ax.unknown_axis(out[1]), ax.unknown_axis(out[2])
    offsets = ax.unknown_axis(math.prod(args[0])).atoms
    return x[0], Axis(x[1].atoms + offsets), Axis(tuple(a for axis in x[2:] for a in axis.atoms))


def col2im(c: Call) -> Axes:
    """``F.fold(cols, output_size, kernel_size, dilation, padding, stride)``, :func:`im2col`'s inverse: the batch
    kept; the channels are the columns' outer atoms where the inner ones are one unnamed piece of ``∏k``; the grid
    where the ``L`` blocks are its positions in order (stride 1, centring padding), each axis the atoms its size
    takes off ``L`` from the outside; else unnamed."""
    cols, out = c.in_axes[0], c.shapes[0]
    n = len(out) - 2
    args = _block_args(c, n, 2) if n > 0 and len(c.shapes) == 1 and len(cols) == 3 else None
    if args is None:
        return ax.unknown_axes(out)
    atoms, kk = cols[1].atoms, math.prod(args[0])
    channels = Axis(atoms[:-1]) if atoms and atoms[-1].root == ax.UNKNOWN and atoms[-1].size == kk \
        and Axis(atoms[:-1]).size == out[1] else ax.unknown_axis(out[1])
    grid, rest = [], list(cols[2].atoms)
    for size in out[2:]:
        take = next((i for i in range(1, len(rest) + 1) if math.prod(a.size for a in rest[:i]) == size), None)
        grid.append(Axis(tuple(rest[:take])) if take and _same_grid(out[2:], *args) else ax.unknown_axis(size))
        rest = rest[take:] if take else []
    unknown = any(a.root == ax.UNKNOWN for g in grid for a in g.atoms) or rest
    return (cols[0], channels, *(ax.unknown_axes(out[2:]) if unknown else grid))
