"""Which features of a rotary table are equal: the table kept when a product ran, compared later
(issue 33 item 4).

A rotary table gives each feature (its last axis) an angle; two features that share an angle hold equal
columns at every position. :func:`kept_table` keeps, for a two-tensor multiplication that broadcasts, a
copy of its smaller operand (on the CPU only, up to :data:`READ_LIMIT` elements, never a device sync, as
:mod:`.directions` reads masks); :func:`feature_classes` compares its columns, only for the tables
:mod:`.rotary` finds multiplying a rotation (so a product that is no rotary costs one small copy).
Nothing here imports torch: a tensor is read through its own methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shapetrace.engine.directions import READ_LIMIT, TIED
from shapetrace.engine.op_args import _is_tensor

#: elements compared at most (features × features × rows): a table up to 64 features × 256 positions
COMPARE_LIMIT = 1 << 20

__all__ = ["COMPARE_LIMIT", "READ_LIMIT", "TIED", "feature_classes", "kept_bytes", "kept_table", "same_shape_table"]


def same_shape_table(args: tuple) -> bool:
    """Two tensors of one shape whose last two axes have more than one entry each (``scores * mask``,
    ``[B, H, T, S]`` both): a product the analysis may read as a table weighing the scores.

    >>> import torch
    >>> same_shape_table((torch.ones(2, 3, 3), torch.ones(2, 3, 3))), same_shape_table((torch.ones(3), torch.ones(3)))
    (True, False)
    """
    if len(args) < 2 or not (_is_tensor(args[0]) and _is_tensor(args[1])):
        return False
    shape = args[0].shape
    return len(shape) >= 2 and shape == args[1].shape and shape[-1] > 1 and shape[-2] > 1


def kept_table(args: tuple, budget: int) -> tuple[int, Any] | None:
    """``(operand position, a copy)`` of the smaller of two multiplied tensors, when it may be a position
    table and fits ``budget`` bytes; None for another device, the meta device, over the bound, a
    table of one feature, a tensor neither float nor boolean (a boolean mask is kept as its 0/1 floats: it
    weighs what it multiplies so), or a learnt parameter (which is no position table).
    Two operands of one shape: ``(TIED, (a copy of each))`` (a boolean mask too), or None.

    >>> import torch
    >>> kept_table((torch.ones(2, 5, 4), torch.ones(5, 4)), 1 << 20)[0]
    1
    >>> kept_table((torch.ones(2, 5, 4), torch.ones(2, 5, 4)), 1 << 20)[0]
    -1
    """
    tensors = [a for a in args[:2] if _is_tensor(a)]
    if len(tensors) != 2:
        return None
    if tensors[0].shape == tensors[1].shape:
        copies = [_copy(t, budget // 2, boolean=True) for t in tensors]
        return None if None in copies else (TIED, tuple(copies))
    position = 0 if tensors[0].numel() < tensors[1].numel() else 1
    table = _copy(tensors[position], budget, boolean=True)
    if table is not None and str(table.dtype).endswith("bool"):   # (a boolean mask weighs by its 0/1 values)
        table = table.float()
    return None if table is None else (position, table)


def _copy(table: Any, budget: int, boolean: bool = False) -> Any:
    """A copy of ``table`` on the CPU (see :func:`kept_table`), or None."""
    if (table.requires_grad and table.is_leaf) or table.is_meta or table.device.type != "cpu" \
            or not (table.is_floating_point() or boolean and str(table.dtype).endswith("bool")) \
            or table.dim() < 1 or not 2 <= table.shape[-1] <= table.numel() \
            or table.numel() > READ_LIMIT or table.numel() * table.element_size() > budget:
        return None
    return table.detach().clone()


def kept_bytes(kept: tuple[int, Any]) -> int:
    """The bytes a kept table (or a tie's two copies) holds."""
    copies = kept[1] if kept[0] == TIED else (kept[1],)
    return sum(c.numel() * c.element_size() for c in copies)


def feature_classes(table: Any) -> tuple[int, ...] | None:
    """For each feature i (the last axis), the first feature whose column (its values at every other
    index) equals column i, compared exactly; None over :data:`COMPARE_LIMIT`.

    >>> import torch
    >>> f = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> feature_classes(torch.cat((f, f), -1)), feature_classes(f.repeat_interleave(2, -1))
    ((0, 1, 0, 1), (0, 0, 2, 2))
    """
    d = table.shape[-1]
    if table.numel() * d > COMPARE_LIMIT:
        return None
    columns = table.reshape(-1, d).T                                        # (features, rows)
    equal = (columns[:, None, :] == columns[None, :, :]).all(-1)            # (features, features)
    return tuple(equal.int().argmax(1).tolist())                            # the first equal column of each


def changing_axes(tables: Sequence, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The axes of a tensor of ``shape`` (all but the last, the features) along which one of ``tables``,
    broadcast against it from the right, holds different values; None where a table does not line up.

    >>> import torch
    >>> angles = torch.arange(3.0)[:, None] * torch.ones(4)            # (T, d): angle t at token t
    >>> changing_axes([angles.cos()], (2, 5, 3, 4)), changing_axes([angles[:1].expand(3, 4)], (2, 5, 3, 4))
    ((2,), ())
    """
    found = set()
    for table in tables:
        lead = len(shape) - table.dim()
        if lead < 0 or any(n not in (1, m) for n, m in zip(table.shape, shape[lead:])):
            return None
        for axis in range(table.dim() - 1):
            if table.shape[axis] > 1 and not bool((table == table.narrow(axis, 0, 1)).all()):
                found.add(lead + axis)
    return tuple(sorted(found))
