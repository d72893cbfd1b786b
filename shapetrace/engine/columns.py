"""Which features of a table are equal, read from its values when a product ran (issue 33 item 4).

A rotary table gives each feature (its last axis) an angle; two features that share an angle hold
equal columns at every position. :func:`feature_params` reads, for a two-tensor multiplication, which
columns of its smaller operand are equal, so that :mod:`.rotary` can compare them with the pairs the
rotation makes. Read on the CPU only and up to :data:`READ_LIMIT` elements (never a device sync), as
:mod:`.directions` reads masks. Nothing here imports torch: a tensor is read through its own methods.
"""

from __future__ import annotations

from shapetrace.engine.directions import READ_LIMIT
from shapetrace.engine.op_args import _is_tensor

#: the key of a multiplication's params that holds its smaller operand's equal columns
FEATURES = "feature_classes"

__all__ = ["FEATURES", "READ_LIMIT", "feature_params"]


def feature_params(args: tuple, kwargs: dict) -> dict:
    """``{FEATURES: (operand position, class of each feature)}`` for the smaller of two multiplied
    tensors: features with equal columns (equal values at every other index) share a class (numbered
    as the columns sort). Nothing when it is not read (another device, the meta device, over the bound,
    not a float tensor): the rotary rule then says the pairing was not checked.

    >>> import torch
    >>> f = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> feature_params((torch.ones(5, 2, 4), torch.cat((f, f), -1)), {})[FEATURES]
    (1, (0, 1, 0, 1))
    """
    tensors = [a for a in args[:2] if _is_tensor(a)]
    if len(tensors) != 2:
        return {}
    position = 0 if tensors[0].numel() < tensors[1].numel() else 1
    table = tensors[position]
    if table.is_meta or table.device.type != "cpu" or not table.is_floating_point() or table.dim() < 1 \
            or not 2 <= table.shape[-1] <= table.numel() <= READ_LIMIT:
        return {}
    columns = table.detach().reshape(-1, table.shape[-1]).T.contiguous()    # (features, rows)
    _, classes = columns.unique(dim=0, return_inverse=True)
    return {FEATURES: (position, tuple(classes.tolist()))}
