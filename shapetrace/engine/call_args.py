"""A call's arguments as the capture keeps them: frozen as plain, hashable values (a tensor as its shape,
dtype and kind, never its values, and never kept alive).
"""

from __future__ import annotations

import torch

from shapetrace.engine.events import DictOf, ListOf, ShapeOf, SliceOf


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


_PARAMETER = torch.nn.Parameter
_TENSOR = torch.Tensor
_new_tuple = tuple.__new__   # a tuple subclass made without its Python-level constructor call
#: types kept as they are (hashable, and read by name rules only as values); bool is an int
_PLAIN = frozenset({int, float, bool, str, type(None), type(Ellipsis), torch.dtype, torch.device, torch.Size,
                    torch.memory_format, torch.layout})
