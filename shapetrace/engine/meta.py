"""Outputs of compute ops on the meta device, worked out without torch's Python meta kernels.

On ``meta`` tensors torch runs views in C++, but the first elementwise or matmul op
goes through a meta kernel written in Python whose wrappers import ``torch._dynamo``
and ``sympy`` (about 800 modules and a second or more). Views never need them, and a
compute op only needs its output's shape, dtype and strides. This module computes
those with torch's own rules (broadcasting, TensorIterator's stride order, matmul
batching) and returns ``torch.empty_strided(..., device="meta")``, which loads
nothing. Anything it does not know goes back to torch (correct, just slower).

The rules are tested against real CPU execution at small sizes (tests/engine/test_meta.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from shapetrace.engine.layout import row_major
from shapetrace.engine.ops import spec_for
from shapetrace.engine.opspec import OpSpec, ReduceDtype

NOT_HANDLED = object()

# ---------------------------------------------------------------------------
# shape and stride rules (pure Python: torch.broadcast_shapes itself imports sympy)
# ---------------------------------------------------------------------------

def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """NumPy broadcasting, with torch's error message when sizes disagree."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, size in enumerate(s, start=ndim - len(s)):
            if size == out[i] or size == 1:
                continue
            if out[i] != 1:
                raise RuntimeError(f"The size of tensor a ({out[i]}) must match the size of tensor b "
                                   f"({size}) at non-singleton dimension {i}")
            out[i] = size
    return tuple(out)


def _is_contiguous(shape: Sequence[int], stride: Sequence[int]) -> bool:
    expected = 1
    for size, st in zip(reversed(shape), reversed(stride)):
        if size == 1:
            continue
        if st != expected:
            return False
        expected *= size
    return True


def _channels_last(shape: Sequence[int], stride: Sequence[int]) -> bool:
    """``is_contiguous(memory_format=torch.channels_last)`` for 4-d tensors (N, C, H, W)."""
    if len(shape) != 4:
        return False
    expected = 1
    for d in (1, 3, 2, 0):
        if shape[d] != 1:
            if stride[d] != expected:
                return False
            expected *= shape[d]
    return True


def channels_last_strides(shape: Sequence[int]) -> tuple[int, ...]:
    n, c, h, w = shape
    return (h * w * c, 1, w * c, c)


def _dense_non_overlapping(shape: Sequence[int], stride: Sequence[int]) -> bool:
    dims = sorted((st, size) for size, st in zip(shape, stride) if size != 1)
    expected = 1
    for st, size in dims:
        if st != expected:
            return False
        expected *= size
    return True


def elementwise_strides(shape: Sequence[int], operands: Sequence[tuple[Sequence[int], Sequence[int]]]
                        ) -> tuple[int, ...]:
    """Output strides of a TensorIterator op (``a + b``, ``softmax``...) given its operands' layouts.

    Mirrors ``TensorIteratorBase::compute_fast_setup_type`` and ``reorder_dimensions``:
    same-shape contiguous operands give a contiguous output, channels-last ones a channels-last
    output, same-shape dense operands with equal strides keep them, otherwise dimensions are ordered
    by the operands' strides.
    """
    shape = tuple(shape)
    ndim = len(shape)
    if ndim == 0:
        return ()
    same = [(tuple(s), tuple(st)) for s, st in operands if len(s) == ndim]
    if operands and len(same) == len(operands) and all(s == shape for s, _ in same):
        if all(_is_contiguous(s, st) for s, st in same):
            return row_major(shape)
        if all(_channels_last(s, st) for s, st in same):
            return channels_last_strides(shape)
        first = same[0][1]
        if all(st == first for _, st in same) and _dense_non_overlapping(shape, first):
            return first
    full = []
    for s, st in operands:
        pad = ndim - len(s)
        full.append([0] * pad + [0 if (size == 1 and shape[pad + i] != 1) else x
                                 for i, (size, x) in enumerate(zip(s, st))])
    perm = list(range(ndim - 1, -1, -1))  # fastest first

    def should_swap(d0: int, d1: int) -> int:
        for strides in full:
            s0, s1 = strides[d0], strides[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 < s1:
                return -1
            if s0 > s1:
                return 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    for i in range(1, ndim):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            cmp = should_swap(perm[d0], perm[d1])
            if cmp > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif cmp < 0:
                break
    strides = [0] * ndim
    acc = 1
    for d in perm:
        strides[d] = acc
        acc *= max(shape[d], 1)
    return tuple(strides)


def matmul_shape(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """``torch.matmul``'s output shape, raising torch's message on a mismatch."""
    if not a or not b:
        raise RuntimeError("both arguments to matmul need to be at least 1D, but they are "
                           f"{len(a)}D and {len(b)}D")
    a2 = (1,) + tuple(a) if len(a) == 1 else tuple(a)
    b2 = tuple(b) + (1,) if len(b) == 1 else tuple(b)
    if a2[-1] != b2[-2]:
        if len(a) <= 2 and len(b) <= 2:
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a2[0]}x{a2[1]} and "
                               f"{b2[0]}x{b2[1]})")
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{math.prod(a2[:-2]) or 1}, {a2[-1]}] but got: "
                           f"[{math.prod(b2[:-2]) or 1}, {b2[-2]}].")
    batch = broadcast_shapes(a2[:-2], b2[:-2])
    out = batch + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


# ---------------------------------------------------------------------------
# the dispatcher
# ---------------------------------------------------------------------------

def on_meta(args, kwargs) -> bool:
    """True when every tensor argument is on the meta device (and there is one)."""
    seen = False
    for v in (*args, *kwargs.values()) if kwargs else args:
        for t in (v,) if isinstance(v, torch.Tensor) else v if isinstance(v, (list, tuple)) else ():
            if isinstance(t, torch.Tensor):
                if not t.is_meta:
                    return False
                seen = True
    return seen


def _empty(shape, strides, dtype) -> torch.Tensor:
    return torch.empty_strided(tuple(shape), tuple(strides), dtype=dtype, device="meta")


def _like_layout(shape, operands: Sequence[Any], dtype) -> torch.Tensor:
    """Elementwise output; Python numbers count as 0-dim operands, as in TensorIterator."""
    layouts = [(tuple(t.shape), tuple(t.stride())) if isinstance(t, torch.Tensor) else ((), ())
               for t in operands]
    return _empty(shape, elementwise_strides(shape, layouts), dtype)


def _binary(spec: OpSpec, args, kwargs) -> torch.Tensor:
    a = args[0]
    b = args[1] if len(args) > 1 else kwargs.get("other", kwargs.get("exponent"))
    operands = [x for x in (a, b) if isinstance(x, torch.Tensor)]
    shape = broadcast_shapes(*[tuple(t.shape) for t in operands])
    if len(operands) == 1:
        operands.append(b if operands[0] is a else a)
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        dtype = torch.result_type(a, b)
    else:
        t, s = (a, b) if isinstance(a, torch.Tensor) else (b, a)
        dtype = torch.result_type(t, s)
    if spec.true_division and kwargs.get("rounding_mode") is None \
            and not (dtype.is_floating_point or dtype.is_complex):
        dtype = torch.get_default_dtype()
    return _like_layout(shape, operands, dtype)


def _unary(spec: OpSpec, args, kwargs) -> torch.Tensor:
    x = args[0]
    dtype = x.dtype
    if spec.meta == "compare":
        return _compare(spec, args, kwargs)
    if spec.meta == "float_unary" and not (dtype.is_floating_point or dtype.is_complex):
        dtype = torch.get_default_dtype()
    return _like_layout(tuple(x.shape), [x], dtype)


def _compare(spec: OpSpec, args, kwargs) -> torch.Tensor:
    operands = [v for v in list(args) + list(kwargs.values()) if isinstance(v, torch.Tensor)]
    shape = broadcast_shapes(*[tuple(t.shape) for t in operands])
    return _like_layout(shape, operands, torch.bool)


def _softmax(spec: OpSpec, args, kwargs) -> torch.Tensor:
    x = args[0]
    dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
    if dim is not None and not -x.dim() <= dim < max(x.dim(), 1):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-x.dim()}, "
                         f"{x.dim() - 1}], but got {dim})")
    dtype = kwargs.get("dtype") or next((a for a in args[2:] if isinstance(a, torch.dtype)), None)
    return _empty(tuple(x.shape), row_major(tuple(x.shape)), dtype or x.dtype)


def _masked_fill(spec: OpSpec, args, kwargs) -> torch.Tensor:
    x = args[0]
    mask = args[1] if len(args) > 1 else kwargs["mask"]
    if broadcast_shapes(tuple(x.shape), tuple(mask.shape)) != tuple(x.shape):
        raise RuntimeError(f"The size of tensor a ({tuple(x.shape)}) must match the size of tensor b "
                           f"({tuple(mask.shape)}) for masked_fill")
    if spec.writes_in_place:
        return x
    return _like_layout(tuple(x.shape), [x, mask], x.dtype)


def _where(spec: OpSpec, args, kwargs) -> Any:
    if len(args) == 1 and not kwargs:
        return NOT_HANDLED
    cond, a, b = (list(args) + [kwargs.get("input"), kwargs.get("other")])[:3]
    operands = [v for v in (cond, a, b) if isinstance(v, torch.Tensor)]
    shape = broadcast_shapes(*[tuple(t.shape) for t in operands])
    values = [v for v in (a, b) if v is not None]
    ts = [v for v in values if isinstance(v, torch.Tensor)]
    if len(ts) == 2:
        dtype = torch.result_type(ts[0], ts[1])
    elif ts:
        dtype = torch.result_type(ts[0], [v for v in values if v is not ts[0]][0])
    else:
        return NOT_HANDLED
    return _like_layout(shape, operands, dtype)


def _dropout(spec: OpSpec, args, kwargs) -> Any:
    training = kwargs.get("training", kwargs.get("train", args[2] if len(args) > 2 else True))
    if not training:
        return NOT_HANDLED  # returns the input itself: cheap in torch
    x = args[0]
    return _like_layout(tuple(x.shape), [x], x.dtype)


def _norm(spec: OpSpec, args, kwargs) -> torch.Tensor:
    x = args[0]
    return _empty(tuple(x.shape), row_major(tuple(x.shape)), x.dtype)


def _tri(spec: OpSpec, args, kwargs) -> torch.Tensor:
    x = args[0]
    return _empty(tuple(x.shape), row_major(tuple(x.shape)), x.dtype)


def _reduce(spec: OpSpec, args, kwargs) -> Any:
    x = args[0]
    dim = kwargs.get("dim", args[1] if len(args) > 1 and not isinstance(args[1], torch.dtype) else None)
    keepdim = kwargs.get("keepdim", args[2] if len(args) > 2 and isinstance(args[2], bool) else False)
    if getattr(spec.params, "dim_second", False) or isinstance(dim, str):   # (norm(p, dim): not a dim)
        return NOT_HANDLED
    n = x.dim()
    dims = range(n) if dim is None or dim == [] or dim == () else ([dim] if isinstance(dim, int) else dim)
    dims = {d % max(n, 1) for d in dims}
    shape = tuple(1 if i in dims else s for i, s in enumerate(x.shape)) if keepdim else \
        tuple(s for i, s in enumerate(x.shape) if i not in dims)
    dtype = kwargs.get("dtype") or x.dtype
    rule = spec.reduces_to
    if rule is ReduceDtype.INDEX:
        dtype = torch.int64
    elif rule is ReduceDtype.BOOL:
        dtype = torch.bool
    elif rule is ReduceDtype.INTEGERS_WIDEN and not (dtype.is_floating_point or dtype.is_complex) \
            and "dtype" not in kwargs:
        dtype = torch.int64
    return _empty(shape, row_major(shape), dtype)


def _max_min(spec: OpSpec, args, kwargs) -> Any:
    """``x.max()``, ``x.max(dim)`` (values and indices) and ``torch.max(a, b)`` (elementwise)."""
    other = args[1] if len(args) > 1 else kwargs.get("other", kwargs.get("dim"))
    if isinstance(other, torch.Tensor):
        return _binary(spec, args, kwargs)   # (torch.max(a, b): elementwise, as maximum)
    if other is None:
        return _empty((), (), args[0].dtype)
    values = _reduce(spec, args, kwargs)
    indices = _empty(tuple(values.shape), tuple(values.stride()), torch.int64)
    return getattr(torch.return_types, spec.name)((values, indices))   # (max, min: torch's own type names)


def _matmul(spec: OpSpec, args, kwargs) -> torch.Tensor:
    a, b = args[0], args[1] if len(args) > 1 else kwargs.get("other", kwargs.get("mat2"))
    if spec.reversed:
        a, b = b, a
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return NOT_HANDLED
    rank = spec.rank
    if rank == 3 and (a.dim() != 3 or b.dim() != 3 or a.shape[0] != b.shape[0]):
        raise RuntimeError(f"batch1 and batch2 must be 3D tensors with the same batch size, got "
                           f"{list(a.shape)} and {list(b.shape)}")
    if rank == 2 and (a.dim() != 2 or b.dim() != 2):
        raise RuntimeError("self and mat2 must be matrices")
    shape = matmul_shape(tuple(a.shape), tuple(b.shape))
    _check_dtypes(a, b)
    return _empty(shape, row_major(shape), a.dtype)


def _check_dtypes(a: torch.Tensor, b: torch.Tensor) -> None:
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {a.dtype} != {b.dtype}")


def _linear(spec: OpSpec, args, kwargs) -> torch.Tensor:
    x = args[0] if args else kwargs["input"]
    w = args[1] if len(args) > 1 else kwargs["weight"]
    bias = args[2] if len(args) > 2 else kwargs.get("bias")
    if x.dim() == 0 or x.shape[-1] != w.shape[-1]:
        rows = math.prod(x.shape[:-1]) if x.dim() else 1
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x"
                           f"{x.shape[-1] if x.dim() else 1} and {w.shape[-1]}x{w.shape[0]})")
    _check_dtypes(x, w)
    shape = tuple(x.shape[:-1]) + ((w.shape[0],) if w.dim() == 2 else ())
    if bias is not None:
        broadcast_shapes(shape, tuple(bias.shape))
    return _empty(shape, row_major(shape), x.dtype)


def _sdpa(spec: OpSpec, args, kwargs) -> torch.Tensor:
    """Shape from q and v; strides from torch's own kernel on a miniature CPU copy (the CPU flash
    kernel returns [B, H, T, d_k] laid out as [B, T, H, d_k] when q is a transposed view)."""
    q, k, v = args[:3]
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: shapes do not fit: query {list(q.shape)}, "
                           f"key {list(k.shape)}, value {list(v.shape)}")
    if kwargs.get("enable_gqa"):
        k, v = _gqa_repeat(q, k), _gqa_repeat(q, v)
    batch = broadcast_shapes(tuple(q.shape[:-2]), tuple(k.shape[:-2]), tuple(v.shape[:-2]))
    shape = batch + (q.shape[-2], v.shape[-1])
    rest = {key: value for key, value in kwargs.items() if key not in ("attn_mask", "enable_gqa")}
    mask = kwargs.get("attn_mask", args[3] if len(args) > 3 else None)
    tensors = [q, k, v] + ([mask] if isinstance(mask, torch.Tensor) else [])
    minis = miniatures(tensors)
    mini_out = torch.nn.functional.scaled_dot_product_attention(
        *minis[:3], **({"attn_mask": minis[3]} if len(minis) > 3 else {}), **rest)
    return _empty(shape, strides_in_order_of(mini_out, shape), q.dtype)


def _gqa_repeat(q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
    """``enable_gqa=True``: k or v with each of its H_kv heads repeated to q's H heads, as torch does."""
    if q.dim() < 3 or kv.dim() < 3 or q.shape[-3] % kv.shape[-3]:
        raise RuntimeError(f"scaled_dot_product_attention with enable_gqa: query heads ({q.shape[-3]}) must be "
                           f"a multiple of key/value heads ({kv.shape[-3]})")
    return kv.repeat_interleave(q.shape[-3] // kv.shape[-3], dim=-3)


def miniatures(tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Small CPU stand-ins: equal sizes stay equal, 1 stays 1, same memory order of axes."""
    sizes = sorted({s for t in tensors for s in t.shape if s != 1})
    small = {s: 2 + i for i, s in enumerate(sizes)}
    out = []
    for t in tensors:
        mini = torch.zeros(tuple(small.get(s, 1) for s in t.shape), dtype=t.dtype, device="cpu")
        out.append(_same_order(mini, t).requires_grad_(t.requires_grad and t.dtype.is_floating_point))
    return out


def strides_in_order_of(mini: torch.Tensor, shape: Sequence[int]) -> tuple[int, ...]:
    """Dense strides for ``shape`` with the axes in the memory order of ``mini``."""
    order = sorted(range(len(shape)), key=lambda d: -mini.stride(d))
    strides = [0] * len(shape)
    acc = 1
    for d in reversed(order):
        strides[d] = acc
        acc *= max(shape[d], 1)
    return tuple(strides)


def _einsum(spec: OpSpec, args, kwargs) -> Any:
    """Shape from the equation; strides from torch's own einsum on a miniature CPU copy."""
    if not args or not isinstance(args[0], str):
        return NOT_HANDLED
    equation = args[0].replace(" ", "")
    ops = list(args[1:])
    if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
        ops = list(ops[0])
    if "..." in equation or "->" not in equation:
        return NOT_HANDLED
    lhs, rhs = equation.split("->")
    terms = lhs.split(",")
    if len(terms) != len(ops) or any(len(t) != o.dim() for t, o in zip(terms, ops)):
        raise RuntimeError(f"einsum(): the number of subscripts in the equation does not match the "
                           f"number of dimensions for an operand ({equation})")
    sizes: dict[str, int] = {}
    for term, o in zip(terms, ops):
        for letter, size in zip(term, o.shape):
            if sizes.setdefault(letter, size) != size and 1 not in (size, sizes[letter]):
                raise RuntimeError(f"einsum(): operands do not broadcast with remapped shapes "
                                   f"(original->remapped): subscript {letter} has sizes "
                                   f"{sizes[letter]} and {size}")
            sizes[letter] = max(sizes[letter], size)
    shape = tuple(sizes[c] for c in rhs)
    minis = miniatures(ops)
    mini_out = torch.einsum(equation, *minis)
    return _empty(shape, strides_in_order_of(mini_out, shape), ops[0].dtype)


def _same_order(mini: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``mini`` laid out in memory in the same axis order as ``like``."""
    order = sorted(range(like.dim()), key=lambda d: -like.stride(d))
    return mini.permute(order).contiguous().permute(sorted(range(like.dim()), key=order.__getitem__))


def _embedding(spec: OpSpec, args, kwargs) -> torch.Tensor:
    idx, w = args[0], args[1]
    shape = tuple(idx.shape) + (w.shape[-1],)
    return _empty(shape, row_major(shape), w.dtype)


def _cat(spec: OpSpec, args, kwargs) -> Any:
    tensors = list(args[0]) if args else list(kwargs["tensors"])
    dim = kwargs.get("dim", args[1] if len(args) > 1 else 0)
    tensors = [t for t in tensors if not (not spec.stacks and t.dim() == 1 and t.shape[0] == 0)]
    if not tensors:
        return NOT_HANDLED
    ref = tuple(tensors[0].shape)
    if spec.stacks:
        for i, t in enumerate(tensors):
            if tuple(t.shape) != ref:
                raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(ref)} at "
                                   f"entry 0 and {list(t.shape)} at entry {i}")
        d = dim % (len(ref) + 1)
        shape = ref[:d] + (len(tensors),) + ref[d:]
    else:
        d = dim % len(ref)
        for i, t in enumerate(tensors):
            if t.dim() != len(ref) or any(a != b for j, (a, b) in enumerate(zip(t.shape, ref)) if j != d):
                raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. Expected size "
                                   f"{ref[1 - d] if len(ref) > 1 else ref[0]} but got size "
                                   f"{t.shape[1 - d] if t.dim() > 1 else t.shape[0]} for tensor number {i} "
                                   "in the list.")
        shape = ref[:d] + (sum(t.shape[d] for t in tensors),) + ref[d + 1:]
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = torch.promote_types(dtype, t.dtype)
    return _empty(shape, row_major(shape), dtype)


def _mha(spec: OpSpec, args, kwargs) -> Any:
    query, key = args[0], args[1]
    heads = args[4] if len(args) > 4 else kwargs.get("num_heads")
    need_weights = kwargs.get("need_weights", True)
    average = kwargs.get("average_attn_weights", True)
    out_shape = tuple(query.shape)
    out = _empty(out_shape, row_major(out_shape), query.dtype)
    if not need_weights:
        return out, None
    L, S = query.shape[0], key.shape[0]
    if query.dim() == 3:
        N = query.shape[1]
        w_shape = (N, L, S) if average else (N, heads, L, S)
    else:
        w_shape = (L, S) if average else (heads, L, S)
    return out, _empty(w_shape, row_major(w_shape), query.dtype)


def _inplace(spec: OpSpec, args, kwargs) -> Any:
    x = args[0]
    others = [v for v in list(args[1:]) + list(kwargs.values()) if isinstance(v, torch.Tensor)]
    if others and broadcast_shapes(tuple(x.shape), *[tuple(t.shape) for t in others]) != tuple(x.shape):
        raise RuntimeError(f"output with shape {list(x.shape)} doesn't match the broadcast shape "
                           f"{list(broadcast_shapes(tuple(x.shape), *[tuple(t.shape) for t in others]))}")
    return x


def _factory(spec: OpSpec, args, kwargs) -> Any:
    """``torch.randn(..., device="meta")`` and friends: torch.empty with the same size and dtype."""
    device = kwargs.get("device")
    if device is None:  # torch.set_default_device("meta") sits below the tracer in the mode stack
        device = torch.get_default_device()
    if torch.device(device).type != "meta" or "generator" in kwargs:
        return NOT_HANDLED
    size = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)) else args
    if not all(isinstance(s, int) for s in size):
        return NOT_HANDLED
    dtype = kwargs.get("dtype") or (torch.int64 if spec.integer_result else torch.get_default_dtype())
    return torch.empty(tuple(size), dtype=dtype, device="meta")


#: the function of each meta rule a spec names (:attr:`~.opspec.OpSpec.meta`)
_RULES: dict[str, Callable] = {
    "binary": _binary, "float_unary": _unary, "same_unary": _unary, "compare": _compare, "bitwise": _compare,
    "softmax": _softmax, "norm": _norm, "reduce": _reduce, "inplace": _inplace, "masked_fill": _masked_fill,
    "where": _where, "dropout": _dropout, "tri": _tri, "matmul": _matmul, "linear": _linear, "sdpa": _sdpa,
    "einsum": _einsum, "embedding": _embedding, "cat": _cat, "mha": _mha, "max_min": _max_min,
    "factory": _factory,
}


def compute(spec: OpSpec | str, func: Callable, args, kwargs) -> Any:
    """The result of ``func(*args, **kwargs)`` on meta tensors, or ``NOT_HANDLED`` (``spec``: the op's
    spec, or its name).

    Raises the same kind of error torch would (``RuntimeError`` on mismatched shapes).
    """
    if type(spec) is not OpSpec:
        spec = spec_for(spec)
    kind = spec.meta
    rule = _RULES.get(kind) if kind else None
    if rule is None:
        return NOT_HANDLED
    if rule is _factory:
        return rule(spec, args, kwargs)
    if not on_meta(args, kwargs):
        return NOT_HANDLED
    if kind == "bitwise":
        return _bitwise(spec, args, kwargs)
    if rule in (_unary,) and not isinstance(args[0] if args else None, torch.Tensor):
        return NOT_HANDLED
    return rule(spec, args, kwargs)


def _bitwise(spec: OpSpec, args, kwargs) -> Any:
    operands = [v for v in args if isinstance(v, torch.Tensor)]
    if any(t.dtype != torch.bool for t in operands):
        return NOT_HANDLED
    return _compare(spec, args, kwargs)


def call(spec: OpSpec, func: Callable, args, kwargs, inputs: Sequence = ()):
    """Run ``func``; on meta tensors, compute ops get their result from :func:`compute`.

    (torch's own Python meta kernels would import ``torch._dynamo`` on first use.)
    """
    if inputs and not inputs[0].is_meta:   # a real tensor in: torch computes it (no meta rule can apply)
        return func(*args, **kwargs)
    result = compute(spec, func, args, kwargs)
    return func(*args, **kwargs) if result is NOT_HANDLED else result
