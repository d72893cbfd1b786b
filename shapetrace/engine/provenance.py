"""Element provenance: where each element of a data-moving op's result came from.

One generic way for every op that moves or selects elements (indexing, ``gather``, ``cat``, ``split``,
``roll``, ``flip``, ``repeat``, ``expand``, ``unfold``, ``as_strided``, ``pad``, einops' reshapes and
permutes, and chains of them): the call is *replayed* with each data operand replaced by a
coordinate tensor (element ``i`` of operand ``k`` holds ``offset_k + i + 1``; ``0`` is a value the op
filled in, such as padding), and each output axis is read off the coordinates it holds:

- **walk**: moving along the axis steps through the operand's row-major coordinates by a fixed
  mixed radix of digits (``(b h)`` is two digits: ``h`` minor, ``b`` major). A digit of stride 0 is a
  copy (``expand``, ``repeat``); a negative stride walks backwards (``flip``);
- **rolled**: a walk that starts part way and wraps around (``roll``);
- **selected**: the source position along some operand axis depends on an index operand's values
  (``x[ids]``, ``gather``, a block table): replayed twice with different random indices, an operand
  axis whose coordinates change between the two replays is *indexed*, and an output axis along which
  an indexed coordinate moves selects along it;
- **joined**: the axis runs across operands (``cat``); **padded**: it runs into filled-in values;
- **unknown**: none of these (a sort, a value-dependent result).

Sizes never enter the answer: only the coordinates do, so T = H = B = 4 reads exactly as 2, 3, 5.
This module names nothing; :mod:`.elements` turns sources into axis names. It is pure: given a
callable and its arguments with :class:`Data` and :class:`Index` placeholders, it returns plain data.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch

WALK, ROLLED, SELECTED, JOINED, PADDED, UNKNOWN = "walk", "rolled", "selected", "joined", "padded", "unknown"
#: elements a replay may hold (a coordinate tensor beyond it is not replayed)
MAX_ELEMENTS = 1 << 20


class Data(NamedTuple):
    """A data operand: replaced by a coordinate tensor of ``shape``; laid out in memory as ``layout`` says
    (``(strides, storage offset)``) where the op addresses memory (``as_strided``), else contiguous."""

    shape: tuple
    layout: tuple | None = None


class Index(NamedTuple):
    """An index operand: replaced by random indices of ``shape`` and ``dtype`` (valid on any axis), or by its
    ``values`` where the trace made them (a count: :mod:`.infer.counted`), in every replay."""

    shape: tuple
    dtype: Any = torch.int64
    values: Any = None


@dataclass(frozen=True)
class Digit:
    """One mixed-radix digit of an output axis: ``size`` steps of ``stride`` in an operand's row-major
    coordinates (0: copies of one element; negative: backwards)."""

    stride: int
    size: int


@dataclass(frozen=True)
class AxisSource:
    """Where one output axis's elements came from.

    ``walks``: for each operand the axis walks, ``(operand, digits major first)``; ``along``: the
    ``(operand, axis)`` an index selects along; ``shift``: how far a rolled axis is rotated."""

    kind: str
    walks: tuple[tuple[int, tuple[Digit, ...]], ...] = ()
    along: tuple[tuple[int, int], ...] = ()
    shift: int = 0


def sources(fn: Callable, args: Sequence, kwargs: dict | None = None) -> list[tuple[AxisSource, ...]] | None:
    """Per result tensor of ``fn(*args, **kwargs)``, the source of each of its axes; None when the call
    cannot be replayed (it raises, or its operands are too large)."""
    kwargs = kwargs or {}
    shapes = [tuple(d.shape) for d in _placeholders((args, kwargs), Data)]
    if not shapes or 0 in (n for s in shapes for n in s) or sum(math.prod(s) for s in shapes) > MAX_ELEMENTS:
        return None   # (an empty operand has no elements to follow)
    replayed = _replayed_twice(fn, args, kwargs, shapes)
    if replayed is None:
        return None
    first, second = replayed
    if len(first) != len(second) or any(a.shape != b.shape or 0 in a.shape for a, b in zip(first, second)):
        return None
    if sum(a.numel() for a in first) > MAX_ELEMENTS:
        return None   # (a view can be far larger than its operands: reading it would allocate it whole)
    return [_read(a, b, shapes) for a, b in zip(first, second)]


def index_walks(fn: Callable, args: Sequence, kwargs: dict | None = None) -> list[dict[int, list]] | None:
    """Per result tensor, ``{output axis: [(index operand, its axis), ...]}`` for each output axis along
    which the picks follow axes of index operands (``table[position_ids]``: the result's token axis walks
    ``position_ids``' own; ``hidden[arange(B), eot]``: the result's first axis walks both indices' own).
    Replayed once with every index 0, then once per index axis with that index counting along it (modulo
    the smallest data size): an output axis whose picks change between the two follows that index axis.
    None when the call cannot be replayed so."""
    kwargs = kwargs or {}
    shapes = [tuple(d.shape) for d in _placeholders((args, kwargs), Data)]
    indices = _placeholders((args, kwargs), Index)
    high = _least_size(shapes)
    if not indices or high < 2 or sum(math.prod(s) for s in shapes) > MAX_ELEMENTS:
        return None
    try:
        base = _replay(fn, args, kwargs, shapes, high, seed=0, counting=(-1, -1))
        found: list[dict[int, list[tuple[int, int]]]] = [{} for _ in base]
        for m, index in enumerate(indices):
            for a, n in enumerate(index.shape):
                if n < 2:
                    continue
                marked = _replay(fn, args, kwargs, shapes, high, seed=0, counting=(m, a))
                for k, (x, y) in enumerate(zip(base, marked)):
                    moved = (x != y).numpy()
                    for j in range(moved.ndim):
                        if moved.shape[j] > 1 and bool(_varies(moved, j).any()):
                            found[k].setdefault(j, []).append((m, a))
    except Exception:
        return None
    return found


def coordinates(shapes: Sequence[tuple]) -> list[torch.Tensor]:
    """One coordinate tensor per operand shape: element ``i`` of operand ``k`` holds ``offset_k + i + 1``."""
    out, offset = [], 0
    for shape in shapes:
        n = math.prod(shape)
        out.append(torch.arange(offset + 1, offset + n + 1, dtype=torch.float64).reshape(shape))
        offset += n
    return out


def _least_size(shapes: Sequence[tuple]) -> int:
    """The bound of the random indices: the least size over 1 of any operand's axes (every index below it
    is valid along each axis it could pick along). An axis of one entry (a batch of one) is left out: it
    would make every index 0, and two replays could not tell a pick from a copy."""
    return min((n for s in shapes for n in s if n > 1), default=1)


def _replayed_twice(fn, args, kwargs, shapes) -> tuple[list, list] | None:
    """Two replays with different random indices (one where there are none), bounded by
    :func:`_least_size`; where that raises (the pick runs along an axis of one entry), bounded by the
    least size of all, as every index must be then. None when both raise."""
    for high in dict.fromkeys((_least_size(shapes), max(1, min((n for s in shapes for n in s), default=1)))):
        try:
            first = _replay(fn, args, kwargs, shapes, high, seed=1)
            indexed = bool(_placeholders((args, kwargs), Index))
            return first, (_replay(fn, args, kwargs, shapes, high, seed=2) if indexed else first)
        except Exception:
            continue
    return None


# -- replaying ----------------------------------------------------------------------------------------

def _placeholders(value, kind) -> list:
    if isinstance(value, kind):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)) and not isinstance(value, (Data, Index)):
        return [p for v in value for p in _placeholders(v, kind)]
    if isinstance(value, slice):
        return _placeholders([value.start, value.stop, value.step], kind)
    return []


def laid_out(coords: torch.Tensor, layout: tuple) -> torch.Tensor:
    """``coords`` at the strides and storage offset of ``layout`` in a memory of its own, every other element of
    that memory 0 (no element's coordinate): what an op that addresses memory (``as_strided``) reads as the real
    operand's memory. A layout that overlaps itself (stride 0) or runs backwards is left contiguous (such a
    tensor's memory does not hold each element once)."""
    strides, offset = (tuple(int(s) for s in layout[0]), int(layout[1]))
    shape = tuple(coords.shape)
    if any(s < 0 or s == 0 and n > 1 for n, s in zip(shape, strides)):
        return coords
    span = offset + 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if coords.numel() else offset
    memory = torch.zeros(span, dtype=coords.dtype)
    placed = memory.as_strided(shape, strides, offset)
    try:
        placed.copy_(coords)
    except RuntimeError:   # (torch refuses a write where two elements share a place)
        return coords
    return placed if placed.flatten().unique().numel() == coords.numel() else coords   # (each element once)


def _replay(fn, args, kwargs, shapes, high: int, seed: int,
            counting: tuple[int, int] | None = None) -> list[torch.Tensor]:
    """``fn`` on coordinate tensors, with random indices below ``high``; or, given ``counting`` ``(m, a)``,
    index operand ``m`` counting along its axis ``a`` (modulo ``high``) and every other index 0."""
    coords = iter(coordinates(shapes))
    generator = torch.Generator().manual_seed(seed)
    seen = iter(range(1 << 30))

    def fill(value):
        if isinstance(value, Data):
            return laid_out(next(coords), value.layout) if value.layout is not None else next(coords)
        if isinstance(value, Index) and value.values is not None:
            return value.values
        if isinstance(value, Index) and counting is not None:
            return _counting(value, counting[1] if next(seen) == counting[0] else -1, high)
        if isinstance(value, Index):
            return torch.randint(0, high, tuple(value.shape), generator=generator).to(value.dtype)
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, slice):
            return slice(fill(value.start), fill(value.stop), fill(value.step))
        if isinstance(value, (list, tuple)) and type(value) not in (torch.Size,):
            return type(value)(map(fill, value)) if type(value) in (list, tuple) else tuple(map(fill, value))
        return value

    filled_args, filled_kwargs = fill(list(args)), fill(dict(kwargs))
    with torch._C.DisableTorchFunction():   # a replay is never recorded, even while a trace records
        result = fn(*filled_args, **filled_kwargs)
    return _tensors(result)


def _counting(index: Index, axis: int, high: int) -> torch.Tensor:
    """Indices of ``index``'s shape that count along ``axis`` modulo ``high`` (all 0 for ``axis`` -1)."""
    shape = tuple(index.shape)
    if axis < 0:
        return torch.zeros(shape, dtype=index.dtype)
    steps = (torch.arange(shape[axis]) % high).reshape([-1 if i == axis else 1 for i in range(len(shape))])
    return steps.expand(shape).to(index.dtype).contiguous()


def _tensors(result) -> list[torch.Tensor]:
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (list, tuple)):
        return [t for r in result for t in _tensors(r)]
    return []


# -- reading the coordinates ------------------------------------------------------------------------------
# (in numpy: the arrays are small, and a numpy op on them costs a tenth of a torch op's dispatch)

class _Decoded(NamedTuple):
    operand: np.ndarray          # which operand each element came from (-1: filled in)
    local: np.ndarray            # its row-major position in that operand
    axes: list[np.ndarray]       # per operand, the coordinate along each of its axes (stacked)


def _decode(values: np.ndarray, shapes: Sequence[tuple]) -> _Decoded:
    whole = (values == np.round(values)) & (values >= 1)
    flat = np.where(whole, values, 0).astype(np.int64) - 1
    sizes = [math.prod(s) for s in shapes]
    ends = np.cumsum(sizes)
    operand = np.searchsorted(ends, flat, side="right")
    operand = np.where((flat < 0) | (operand >= len(shapes)), -1, operand)
    starts = np.concatenate([[0], ends[:-1]])
    local = flat - starts[np.clip(operand, 0, None)]
    return _Decoded(operand, np.where(operand < 0, 0, local), [_unravel(local, s) for s in shapes])


def _unravel(local: np.ndarray, shape: tuple) -> np.ndarray:
    """``(len(shape), *local.shape)``: the coordinate along each axis of ``shape``."""
    out, rest = [], np.clip(local, 0, None)
    for size in reversed(shape):
        out.append(rest % max(size, 1))
        rest = rest // max(size, 1)
    return np.stack(out[::-1]) if out else np.zeros((0, *local.shape), dtype=np.int64)


def _read(a: torch.Tensor, b: torch.Tensor, shapes: Sequence[tuple]) -> tuple[AxisSource, ...]:
    da, db = _decode(_array(a), shapes), _decode(_array(b), shapes)
    if not np.array_equal(da.operand, db.operand):
        return tuple(AxisSource(UNKNOWN) for _ in a.shape)
    indexed = _indexed(da, db, shapes)
    flat = _flat_without(da, shapes, indexed)
    return tuple(_axis(j, da, db, flat, indexed, shapes) for j in range(a.dim()))


def _array(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float64).resolve_conj().resolve_neg().numpy()   # (numpy refuses either bit)


def _indexed(da: _Decoded, db: _Decoded, shapes) -> set[tuple[int, int]]:
    """The ``(operand, axis)`` pairs whose coordinates change with the index values."""
    found = set()
    for k, shape in enumerate(shapes):
        mine = da.operand == k
        for i in range(len(shape)):
            if not np.array_equal(da.axes[k][i][mine], db.axes[k][i][mine]):
                found.add((k, i))
    return found


def _flat_without(d: _Decoded, shapes, indexed) -> np.ndarray:
    """Each element's row-major position in its operand, counting only the axes no index drives."""
    flat = np.zeros_like(d.local)
    for k, shape in enumerate(shapes):
        mine = d.operand == k
        part = np.zeros_like(d.local)
        for i, stride in enumerate(_row_major(shape)):
            if (k, i) not in indexed:
                part += d.axes[k][i] * stride
        flat = np.where(mine, part, flat)
    return flat


def _row_major(shape: tuple) -> list[int]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return strides[::-1]


def _varies(t: np.ndarray, j: int) -> np.ndarray:
    """Per line along axis ``j``, does ``t`` change along it? (shape: ``t``'s without axis ``j``)"""
    return (t != np.take(t, [0], axis=j)).any(axis=j)


def _axis(j: int, da: _Decoded, db: _Decoded, flat: np.ndarray, indexed, shapes) -> AxisSource:
    n = flat.shape[j]
    if n == 1:
        return AxisSource(WALK)
    filled = da.operand < 0
    if _varies(filled, j).any():
        return AxisSource(PADDED)
    if _varies(da.operand, j).any():
        return AxisSource(JOINED)
    along = tuple(pair for pair in sorted(indexed) if any(_selects(d, pair, j) for d in (da, db)))
    walks, rolled = [], 0
    lines = np.moveaxis(flat, j, 0).reshape(n, -1)
    owners = np.moveaxis(da.operand, j, 0).reshape(n, -1)[0]
    for k in sorted(set(owners.tolist()) - {-1}):
        found = _walk(lines[:, owners == k])
        if found is None:
            return AxisSource(UNKNOWN)
        digits, shift = found
        rolled = rolled or shift
        walks.append((k, digits))
    if along and all(d.stride == 0 for _, digits in walks for d in digits):
        return AxisSource(SELECTED, along=along)
    return AxisSource(ROLLED if rolled else WALK, tuple(walks), along, rolled)


def _selects(d: _Decoded, pair: tuple[int, int], j: int) -> bool:
    """Does the coordinate along operand axis ``pair`` move along output axis ``j`` (on lines of that operand)?"""
    k, i = pair
    owned = np.take(d.operand, 0, axis=j) == k
    return bool(_varies(d.axes[k][i], j)[owned].any())


def _walk(lines: np.ndarray) -> tuple[tuple[Digit, ...], int] | None:
    """Digits (major first) that every column of ``lines`` walks, and the roll that starts them."""
    steps = lines - lines[:1]
    if not bool((steps == steps[:, :1]).all()):
        return None
    delta = steps[:, 0]
    best = _digits(delta), 0
    for shift in dict.fromkeys((int(delta.argmin()), int(delta.argmax()))):
        turned = np.roll(delta, -shift)
        digits = _digits(turned - turned[0]) if shift else None
        if digits is not None and (best[0] is None or len(digits) < len(best[0])):
            best = digits, shift   # a rotation by half is also two digits: the fewer digits say it
    return best if best[0] is not None else None


def _digits(delta: np.ndarray) -> tuple[Digit, ...] | None:
    """The mixed radix ``delta`` is affine in (``delta[a*P + b] == a*s + delta[b]``), major first."""
    n, period, out = len(delta), 1, []
    while period < n:
        stride = int(delta[period])
        for count in _divisors_descending(n // period):
            span = delta[:period * count].reshape(count, period)
            expected = np.arange(count)[:, None] * stride + delta[:period][None, :]
            if np.array_equal(span, expected):
                break
        else:
            return None
        out.append(Digit(stride, count))
        period *= count
    return tuple(reversed(out))


def _divisors_descending(n: int) -> list[int]:
    return [d for d in range(n, 1, -1) if n % d == 0]
