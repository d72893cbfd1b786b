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

from typing import Any

from shapetrace.engine.directions import READ_LIMIT
from shapetrace.engine.op_args import _is_tensor

#: elements compared at most (features × features × rows): a table up to 64 features × 256 positions
COMPARE_LIMIT = 1 << 20

__all__ = ["COMPARE_LIMIT", "READ_LIMIT", "feature_classes", "kept_table"]


def kept_table(args: tuple, budget: int) -> tuple[int, Any] | None:
    """``(operand position, a copy)`` of the smaller of two multiplied tensors, when it may be a position
    table and fits ``budget`` bytes; None for another device, the meta device, over the bound, a
    table of one feature, a tensor that is not float, or a learnt parameter (which is no position table).

    >>> import torch
    >>> kept_table((torch.ones(2, 5, 4), torch.ones(5, 4)), 1 << 20)[0]
    1
    """
    tensors = [a for a in args[:2] if _is_tensor(a)]
    if len(tensors) != 2:
        return None
    position = 0 if tensors[0].numel() < tensors[1].numel() else 1
    table = tensors[position]
    if (table.requires_grad and table.is_leaf) or table.is_meta or table.device.type != "cpu" \
            or not table.is_floating_point() or table.dim() < 1 or not 2 <= table.shape[-1] <= table.numel() \
            or table.numel() > READ_LIMIT or table.numel() * table.element_size() > budget:
        return None
    return position, table.detach().clone()


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
