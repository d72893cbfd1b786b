"""Turn one torch call into an axis-name computation from :mod:`shapetrace.engine.axes`.

The tracer calls :func:`propagate` after torch has run the op, so output shapes
are torch's own; this module only decides which names the output axes carry.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from shapetrace.engine import axes as ax
from shapetrace.engine.axes import Axis, Namer

Axes = tuple[Axis, ...]


def propagate(op: str, inputs: Sequence[torch.Tensor], in_axes: Sequence[Axes],
              outs: Sequence[torch.Tensor], args, kwargs, namer: Namer) -> list[Axes]:
    """Names of each output of ``op`` (one tuple of axes per output tensor)."""
    handler = _HANDLERS.get(op)
    shapes = [tuple(o.shape) for o in outs]
    if handler is None:
        return [ax.broadcast_axes(in_axes, s) for s in shapes]
    result = handler(inputs, in_axes, shapes, args, kwargs, namer)
    result = result if isinstance(result, list) else [result]
    return [_fit(axes, shape, namer) for axes, shape in zip(result, shapes)]


def _fit(axes: Axes, shape: tuple[int, ...], namer: Namer) -> Axes:
    """Slices and uneven pieces keep their names at torch's sizes."""
    if len(axes) != len(shape):
        return axes
    return tuple(a if a.size == s else ax.resized(a, s, namer) for a, s in zip(axes, shape))


def _arg(args, kwargs, pos: int, name: str, default=None):
    if name in kwargs:
        return kwargs[name]
    return args[pos] if len(args) > pos else default


def _reshape(inputs, in_axes, shapes, args, kwargs, namer):
    return ax.reshape_axes(in_axes[0], shapes[0], namer)


def _transpose(inputs, in_axes, shapes, args, kwargs, namer):
    a = in_axes[0]
    d0, d1 = _arg(args, kwargs, 1, "dim0"), _arg(args, kwargs, 2, "dim1")
    return ax.permute_axes(a, ax.transpose_order(len(a), d0, d1))


def _swap_last(inputs, in_axes, shapes, args, kwargs, namer):
    a = in_axes[0]
    if len(a) < 2:
        return tuple(a)
    return ax.permute_axes(a, ax.transpose_order(len(a), -2, -1))


def _t(inputs, in_axes, shapes, args, kwargs, namer):
    a = in_axes[0]
    return tuple(reversed(a)) if len(a) == 2 else tuple(a)


def _reverse_all(inputs, in_axes, shapes, args, kwargs, namer):
    """``x.T`` reverses every axis (deprecated beyond 2-D, still run by learners)."""
    return tuple(reversed(in_axes[0]))


def _permute(inputs, in_axes, shapes, args, kwargs, namer):
    a = in_axes[0]
    dims = args[1:] if len(args) > 1 else kwargs.get("dims")
    if len(dims) == 1 and isinstance(dims[0], (list, tuple, torch.Size)):
        dims = dims[0]
    return ax.permute_axes(a, [d % len(a) for d in dims])


def _movedim(inputs, in_axes, shapes, args, kwargs, namer):
    a = list(in_axes[0])
    src, dst = _arg(args, kwargs, 1, "source"), _arg(args, kwargs, 2, "destination")
    src = [src] if isinstance(src, int) else list(src)
    dst = [dst] if isinstance(dst, int) else list(dst)
    n = len(a)
    src, dst = [s % n for s in src], [d % n for d in dst]
    order: list[int | None] = [None] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(n) if i not in src)
    return ax.permute_axes(a, [o if o is not None else next(rest) for o in order])


def _same(inputs, in_axes, shapes, args, kwargs, namer):
    return tuple(in_axes[0])


def _expand(inputs, in_axes, shapes, args, kwargs, namer):
    return ax.expand_axes(in_axes[0], shapes[0], namer)


def _unsqueeze(inputs, in_axes, shapes, args, kwargs, namer):
    return ax.unsqueeze_axes(in_axes[0], _arg(args, kwargs, 1, "dim"))


def _squeeze(inputs, in_axes, shapes, args, kwargs, namer):
    return ax.squeeze_axes(in_axes[0], shapes[0])


def _split(inputs, in_axes, shapes, args, kwargs, namer):
    dim = _arg(args, kwargs, 2, "dim", 0)
    return ax.split_axes(in_axes[0], dim, [s[dim] for s in shapes], namer)


def _unbind(inputs, in_axes, shapes, args, kwargs, namer):
    dim = _arg(args, kwargs, 1, "dim", 0)
    return [ax.unbind_axes(in_axes[0], dim)] * len(shapes)


def _narrow(inputs, in_axes, shapes, args, kwargs, namer):
    return tuple(in_axes[0])


def _select(inputs, in_axes, shapes, args, kwargs, namer):
    return ax.unbind_axes(in_axes[0], _arg(args, kwargs, 1, "dim"))


def _getitem(inputs, in_axes, shapes, args, kwargs, namer):
    index = args[1]
    items = index if isinstance(index, tuple) else (index,)
    spec = []
    for item in items:
        if item is None:
            spec.append("none")
        elif item is Ellipsis:
            spec.append("...")
        elif isinstance(item, bool):
            spec.append("adv")
        elif isinstance(item, int):
            spec.append("int")
        elif isinstance(item, slice):
            spec.append("full" if item == slice(None) else "slice")
        else:
            spec.append("adv")
    out = ax.index_axes(in_axes[0], spec)
    return out if out is not None else ax.unknown_axes(shapes[0])


def _cat(inputs, in_axes, shapes, args, kwargs, namer):
    return ax.cat_axes(in_axes, _arg(args, kwargs, 1, "dim", 0), namer)


def _stack(inputs, in_axes, shapes, args, kwargs, namer):
    return ax.stack_axes(in_axes, _arg(args, kwargs, 1, "dim", 0))


def _repeat(inputs, in_axes, shapes, args, kwargs, namer):
    reps = args[1:] if len(args) > 1 else kwargs.get("repeats")
    if len(reps) == 1 and isinstance(reps[0], (list, tuple, torch.Size)):
        reps = reps[0]
    return ax.repeat_axes(in_axes[0], list(reps), namer)


def _repeat_interleave(inputs, in_axes, shapes, args, kwargs, namer):
    reps = _arg(args, kwargs, 1, "repeats")
    if not isinstance(reps, int):
        return ax.unknown_axes(shapes[0])
    return ax.repeat_interleave_axes(in_axes[0], reps, _arg(args, kwargs, 2, "dim"), namer)


def _matmul(inputs, in_axes, shapes, args, kwargs, namer):
    return ax.matmul_axes(in_axes[0], in_axes[1], shapes[0], namer)


def _einsum(inputs, in_axes, shapes, args, kwargs, namer):
    out = ax.einsum_axes(args[0], in_axes, namer)
    return out if out is not None else ax.unknown_axes(shapes[0])


def _linear(inputs, in_axes, shapes, args, kwargs, namer):
    return ax.linear_axes(in_axes[0], shapes[0][-1], namer)


def _sdpa(inputs, in_axes, shapes, args, kwargs, namer):
    return ax.sdpa_axes(in_axes[0], in_axes[2])


def _mha(inputs, in_axes, shapes, args, kwargs, namer):
    first = ax.broadcast_axes(in_axes[:1], shapes[0])
    return [first] + [_mha_weights(in_axes, s, namer) for s in shapes[1:]]


def _mha_weights(in_axes, shape, namer) -> Axes:
    """Weights of a seq-first [L, N, E] query: averaged [N, L, S], or per head [N, H, L, S]."""
    q = in_axes[0]
    k = in_axes[1] if len(in_axes) > 1 else q
    if len(q) != 3 or len(k) != 3:
        return ax.unknown_axes(shape)
    batch, query, key = q[1], q[0].with_role("query"), k[0].with_role("key")
    if tuple(shape) == (q[1].size, q[0].size, k[0].size):
        return (batch, query, key)
    if len(shape) == 4 and (shape[0], shape[2], shape[3]) == (q[1].size, q[0].size, k[0].size):
        heads = ax.root_axis("H", shape[1]) if namer.size_of("H") == shape[1] else ax.unknown_axis(shape[1])
        return (batch, heads, query, key)
    return ax.unknown_axes(shape)


_HANDLERS = {
    "view": _reshape, "view_as": _reshape, "reshape": _reshape, "reshape_as": _reshape,
    "flatten": _reshape, "unflatten": _reshape,
    "transpose": _transpose, "mT": _swap_last, "t": _t, "T": _reverse_all, "permute": _permute,
    "movedim": _movedim, "contiguous": _same, "softmax": _same, "masked_fill": _same,
    "masked_fill_": _same, "expand": _expand, "expand_as": _expand, "unsqueeze": _unsqueeze,
    "squeeze": _squeeze, "split": _split, "chunk": _split, "unbind": _unbind, "narrow": _narrow,
    "select": _select, "__getitem__": _getitem, "cat": _cat, "stack": _stack, "repeat": _repeat,
    "repeat_interleave": _repeat_interleave, "matmul": _matmul, "bmm": _matmul, "einsum": _einsum,
    "linear": _linear, "scaled_dot_product_attention": _sdpa, "multi_head_attention_forward": _mha,
    "dropout": _same,
}
