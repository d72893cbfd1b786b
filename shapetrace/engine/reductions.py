"""What an op computes along: the axes a reduction, a normalisation, a softmax or a scan runs along.

One home for two pieces of knowledge the registry (:mod:`.ops`) builds its entries from and the rules
read back:

* how the ``dim`` of each op that reduces or normalises along axes (``sum``, ``mean``, ``max``,
  ``norm``, ``F.normalize``, ``logsumexp``...; their entries are in :mod:`.op_table`) is read
  from its arguments (``Tensor.norm(p, dim)`` and ``F.normalize(x, p, dim=1)`` take it second; a
  ``max(a, b)`` of two tensors is elementwise, not a reduction);
* :func:`axes_along`: for one recorded call, which axes of its input it computes along, from its
  recorded parameters (an int, a negative one, a tuple, None for every axis, ``normalized_shape``'s
  trailing axes). A rule then reads each axis's name and role; equal sizes never decide one.

Nothing here imports torch or the registry.

>>> axes_along("reduce", {"dim": [-1, 1]}, 4)
(1, 3)
>>> axes_along("reduce", {"keepdim": False}, 3), axes_along("normalise", {"normalised": 2}, 4)
((0, 1, 2), (2, 3))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shapetrace.engine import propagate as pr
from shapetrace.engine.op_args import Call, _is_tensor, _reduce_params, arg


def _dim_list(dim: Any) -> list[int] | int | None:
    return list(dim) if isinstance(dim, (list, tuple)) else dim


def second_dim_params(default: int | None = None) -> Callable[[tuple, dict], dict]:
    """``Tensor.norm(p, dim, keepdim)``, ``linalg.vector_norm(x, ord, dim, keepdim)``,
    ``F.normalize(x, p, dim=1)``: the dim is the third argument (the tensor is the first)."""
    def read(args: tuple, kwargs: dict) -> dict:
        return {"dim": _dim_list(arg(args, kwargs, 2, "dim", default)),
                "keepdim": bool(arg(args, kwargs, 3, "keepdim", False))}
    read.dim_second = True   # type: ignore[attr-defined]
    return read


def extreme_params(args: tuple, kwargs: dict) -> dict:
    """``max(x, dim)`` reduces; ``max(a, b)`` of two tensors is elementwise (``maximum``)."""
    other = arg(args, kwargs, 1, "other")
    if _is_tensor(other) or hasattr(other, "shape"):   # (a tensor, or the recorded stub of one)
        return {"elementwise": True}
    return _reduce_params(args, kwargs)


def spread_params(args: tuple, kwargs: dict) -> dict:
    """``std``/``var``: ``x.var(1)`` or ``x.var(dim=1, keepdim=True)`` (the second positional may be
    the old ``unbiased`` flag, a bool, which is not a dim)."""
    dim = arg(args, kwargs, 1, "dim")
    return {"dim": None if isinstance(dim, bool) else _dim_list(dim), "keepdim": bool(kwargs.get("keepdim", False))}


def reduce_each(c: Call) -> list:
    """A reduction's names, for each of its results (``max(x, dim)`` gives the values and the indices,
    both over the axes that remain); a ``max(a, b)`` of two tensors broadcasts its operands."""
    if c.params.get("elementwise"):
        return [pr.broadcast(c)]
    return [pr.reduce(c)] * len(c.shapes)


def same_shape(c: Call) -> list:
    return [pr.same(c)]


def axes_along(how: str, params: dict, rank: int) -> tuple[int, ...] | None:
    """The input axes (as non-negative positions) a call computes along, or None when its parameters do
    not say (an elementwise ``max(a, b)``, a dim in a form not read).

    Args:
        how: the op's family, by value: ``"reduce"`` (a ``dim`` that may be a list, or none for every
            axis), ``"normalise"`` (``normalized_shape``'s trailing axes), or any other (``"softmax"``,
            ``"scan"``) for one ``dim``.
        params: the call's recorded parameters.
        rank: the number of axes of its input.
    """
    if rank == 0 or params.get("elementwise"):
        return None
    if how == "normalise":
        count = params.get("normalised")
        return tuple(range(rank - count, rank)) if isinstance(count, int) and 0 < count <= rank else None
    dim = params.get("dim")
    if dim is None:   # (a reduction's reader records keepdim always, and a dim of None not at all: every axis)
        return tuple(range(rank)) if how == "reduce" and "keepdim" in params else None
    dims = dim if isinstance(dim, list) and how == "reduce" else [dim]
    if not all(type(d) is int and -rank <= d < rank for d in dims):
        return None
    return tuple(sorted({d % rank for d in dims}))


#: the families (by value) whose ops compute along axes :func:`axes_along` reads
ALONG = frozenset({"reduce", "normalise", "softmax", "scan"})
