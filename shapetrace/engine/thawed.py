"""Arguments as captured (frozen at call time: shapes, never values), read back as plain stand-ins that
name rules can call ``.ndim`` or ``.shape`` on. Shared by the forward inference and the backward passes."""

from __future__ import annotations

from shapetrace.engine.events import DictOf, ListOf, ShapeOf, SliceOf


class _Device:
    type = "frozen"


class TensorStub:
    """A tensor argument as captured: its shape, dtype and kind, never its values. Name rules read
    these (an index tensor's rank, a weight that is a parameter); a rule that needs more fails and
    leaves the axis unnamed."""

    __slots__ = ("shape", "dtype", "requires_grad", "kind")
    device = _Device()

    def __init__(self, frozen: ShapeOf):
        self.shape, self.dtype, self.requires_grad, self.kind = frozen

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    def __index__(self) -> int:
        raise TypeError("a captured tensor has no value")

    @property
    def is_parameter(self) -> bool:
        return self.kind.__name__ == "Parameter"


def thaw(value):
    kind = type(value)
    if kind is ShapeOf:
        return TensorStub(value)
    if kind is SliceOf:
        return slice(*(thaw(v) for v in value))
    if kind is ListOf:
        return [thaw(v) for v in value]
    if kind is DictOf:
        return {k: thaw(v) for k, v in value}
    if kind is tuple:
        return tuple(thaw(v) for v in value)
    return value


def thaw_args(frozen: tuple) -> tuple[tuple, dict]:
    args, kwargs = frozen
    return tuple(thaw(a) for a in args), ({k: thaw(v) for k, v in kwargs} if kwargs else {})


def map_operands(args: tuple, kwargs: dict, put) -> tuple[tuple, dict]:
    """Thawed arguments with each tensor operand (a :class:`TensorStub`, at the top level or inside a
    top-level list or tuple, where torch's ops take them) replaced by ``put(stub)``, in order."""

    def walk(value, depth=0):
        if isinstance(value, TensorStub):
            return put(value)
        if depth == 0 and isinstance(value, (list, tuple)):
            return type(value)(walk(v, 1) for v in value)
        return value

    return tuple(walk(a) for a in args), {k: walk(v) for k, v in kwargs.items()}
