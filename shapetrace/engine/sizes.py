"""Sizes that carry where they were read: ``x.size(1)`` is the size of that node's axis 1.

While a trace records, ``Tensor.size(dim)`` returns a :class:`SizeOf`: an ``int`` in every way that
also remembers the node and axis it was read from, so a tensor built from it (``torch.arange(n)``,
``torch.zeros(n, m)``) or an axis grown to it (``cls_token.expand(x.size(0), -1, -1)``) can be given
that axis's name. Nothing here compares values: an int that was not read from an axis carries nothing,
and arithmetic on a :class:`SizeOf` (``n + 1``) gives a plain ``int``. ``x.shape[i]`` and unpacking
``x.size()`` return torch's own ``torch.Size`` (it cannot be subclassed), so they carry nothing.
"""

from __future__ import annotations


class SizeOf(int):
    """An axis size read from a traced tensor: ``node`` and ``axis`` say which."""

    node: int
    axis: int

    def __reduce__(self):   # pickled, copied or sent elsewhere: a plain int
        return int, (int(self),)


def size_of(value: int, node: int, axis: int) -> SizeOf:
    out = SizeOf(value)
    out.node, out.axis = node, axis
    return out


def carries_sizes(args, kwargs) -> bool:
    """Does any argument (or any item of a list or tuple argument) carry where it was read?"""
    for value in (*args, *kwargs.values()) if kwargs else args:
        if type(value) is SizeOf:
            return True
        if type(value) in (tuple, list) and any(type(v) is SizeOf for v in value):
            return True
    return False
