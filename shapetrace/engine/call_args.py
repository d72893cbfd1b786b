"""A call's arguments as the capture keeps them: frozen as plain, hashable values (a tensor as its shape,
dtype and kind, never its values, and never kept alive).
"""

from __future__ import annotations

import torch

from shapetrace.engine.events import DictOf, ListOf, ShapeOf, SliceOf
from shapetrace.engine.sizes import SizeOf


def zero_d_argument(frozen: tuple) -> bool:
    """Is a 0-d tensor among the frozen arguments (a number given as a tensor: parameters that read
    values)?"""
    for a in frozen[0]:
        if type(a) is ShapeOf and not a[0]:
            return True
    return frozen[1] is not None and any(type(v) is ShapeOf and not v[0] for _, v in frozen[1])


def freeze_args(args, kwargs, operands=(), raws=()) -> tuple:
    """The call's arguments as hashable values (``(args, kwargs)``): a tensor as its shape, dtype and
    kind, never its values, and never kept alive. The name memo's key and the table's argument text.
    (It runs on every recorded call: plain values and tensors are handled inline; the shape and dtype
    of a tensor among ``operands`` are taken from its layout in ``raws``, already read.)"""
    out = []
    append = out.append
    n = 0   # operands mostly come in argument order: the next one is tried first
    for a in args:
        kind = type(a)
        if kind is _TENSOR or kind is _PARAMETER:
            if n < len(operands) and operands[n] is a:
                raw = raws[n]
                n += 1
                append(_new_tuple(ShapeOf, (raw[0], raw[3], a.requires_grad, kind)))
                continue
            for t, raw in zip(operands, raws):
                if t is a:
                    append(_new_tuple(ShapeOf, (raw[0], raw[3], a.requires_grad, kind)))
                    break
            else:
                append(_new_tuple(ShapeOf, (a.shape, a.dtype, a.requires_grad, kind)))
        elif kind in _PLAIN:
            append(a)
        else:
            append(freeze(a))
    if not kwargs:
        return tuple(out), None
    return tuple(out), DictOf([(key, value if type(value) in _PLAIN else freeze(value))
                               for key, value in kwargs.items()])


def freeze(a):
    kind = type(a)
    if kind in _PLAIN:
        return a
    if isinstance(a, torch.Tensor):
        return ShapeOf((a.shape, a.dtype, a.requires_grad, kind))
    if kind is tuple:
        return tuple(map(freeze, a))
    if kind is list:
        return ListOf(map(freeze, a))
    if isinstance(a, dict):
        return DictOf((k, freeze(v)) for k, v in a.items())
    if kind is slice:
        return SliceOf((freeze(a.start), freeze(a.stop), freeze(a.step)))
    if isinstance(a, tuple):
        return tuple(map(freeze, a))
    return a


class OnePass:
    """A call's operands and frozen arguments read in one pass over its arguments
    (:meth:`.capture.Capture._read_in_one_pass`): each operand's node (``node_of``), layout and frozen
    form are read together, in the order :func:`~.op_args.all_operands` finds them, and every argument
    is frozen as :func:`freeze_args` freezes it. ``first_only``: only the first argument is an operand
    (:func:`~.op_args.first_operand`: ``F.linear``'s weight and bias are arguments, not operands)."""

    __slots__ = ("node_of", "first_only", "inputs", "nodes", "in_raw", "zero_d")

    def __init__(self, node_of, first_only: bool = False) -> None:
        self.node_of, self.first_only = node_of, first_only
        self.inputs, self.nodes, self.in_raw, self.zero_d = [], [], [], False

    def values(self, values) -> tuple | None:
        """The frozen form of each of ``values``, or None when one is not a tensor, a plain value or a
        flat list or tuple of them. A 0-d tensor among them (not inside a list) is noted in ``zero_d``,
        as :func:`zero_d_argument` finds it."""
        frozen = []
        for a in values:
            kind = type(a)
            if kind is _TENSOR or kind is _PARAMETER:
                shown = self.operand(a, kind) if not self.first_only or not self.inputs and not frozen else \
                    _new_tuple(ShapeOf, (a.shape, a.dtype, a.requires_grad, kind))
                if not shown[0]:
                    self.zero_d = True
                frozen.append(shown)
            elif kind in _PLAIN:
                frozen.append(a)
            elif (kind is list or kind is tuple) and not self.first_only:
                items = self.items(a)
                if items is None:
                    return None
                frozen.append(ListOf(items) if kind is list else items)
            else:
                return None
        return tuple(frozen)

    def items(self, sequence) -> tuple | None:
        frozen = []
        for a in sequence:
            kind = type(a)
            if kind is _TENSOR or kind is _PARAMETER:
                frozen.append(self.operand(a, kind))
            elif kind in _PLAIN:
                frozen.append(a)
            else:
                return None
        return tuple(frozen)

    def operand(self, t: torch.Tensor, kind: type) -> ShapeOf:
        self.nodes.append(self.node_of(t))
        shape, dtype = t.shape, t.dtype
        self.in_raw.append((shape, t.stride(), t.storage_offset(), dtype))
        self.inputs.append(t)
        return _new_tuple(ShapeOf, (shape, dtype, t.requires_grad, kind))


_PARAMETER = torch.nn.Parameter
_TENSOR = torch.Tensor
_new_tuple = tuple.__new__   # a tuple subclass made without its Python-level constructor call
#: types kept as they are (hashable, and read by name rules only as values); bool is an int, and a size
#: read from an axis (:class:`~.sizes.SizeOf`) is an int that remembers where it was read
_PLAIN = frozenset({int, float, bool, str, type(None), type(Ellipsis), torch.dtype, torch.device, torch.Size,
                            torch.memory_format, torch.layout, SizeOf})
