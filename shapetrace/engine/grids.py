"""Coordinate grids: ``torch.meshgrid`` names each output axis after the vector it walks.

``torch.meshgrid(a, b, indexing="ij")`` gives two tensors of shape ``(len(a), len(b))``: in the first, entry
(i, j) is ``a[i]``; in the second, ``b[j]``. Both walk ``a``'s axis along axis 0 and ``b``'s along axis 1,
so both carry ``(a's axis, b's axis)``. ``indexing="xy"`` swaps the first two output axes (shape
``(len(b), len(a), ...)``). A scalar operand adds no axis; an operand that is not a vector leaves the grids
unnamed. Where the vectors are ``arange``\\ s of sizes read from a feature map (RT-DETR's 2-D sin-cos position
table, ``meshgrid(arange(w), arange(h), indexing="ij")``), the grid's flattened axis is ``Wp·Hp``: which order
the positions are laid out in is then a name, not a guess from the sizes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine import axes as ax

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.op_args import Call


def meshgrid(c: Call) -> list:
    """One axis per vector operand, in the operands' order (``"xy"``: the first two swapped), for every
    output; unnamed where an operand has more than one axis or the shapes do not line up."""
    walked = [axes[0] for axes in c.in_axes if len(axes) == 1]
    if any(len(axes) > 1 for axes in c.in_axes):
        return [ax.unknown_axes(shape) for shape in c.shapes]
    if c.params.get("indexing") == "xy" and len(walked) >= 2:
        walked[0], walked[1] = walked[1], walked[0]
    if any(tuple(shape) != tuple(a.size for a in walked) for shape in c.shapes):
        return [ax.unknown_axes(shape) for shape in c.shapes]
    return [tuple(walked) for _ in c.shapes]


def meshgrid_params(args: tuple, kwargs: dict) -> dict:
    """The grid's ``indexing`` (``"ij"`` where not given: torch's default)."""
    return {"indexing": kwargs.get("indexing") or "ij"}
