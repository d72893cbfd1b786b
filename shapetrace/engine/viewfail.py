"""Why a ``view`` failed, worked out from the input's strides (plain text, no Rich, no torch).

torch's message ("view size is not compatible with input tensor's size and
stride") says *that* a view is impossible. :func:`explain_view_error` says
*why*: which input axes the new shape has to merge, the pairs whose strides do
not chain (``stride(a) == size(b) * stride(b)`` fails), what the two fixes cost,
and, when the axis names are known, whether the fixes would silently mix axes.

>>> from shapetrace.engine.events import TensorInfo
>>> t = TensorInfo((2, 6, 8, 64), (3072, 64, 384, 1), 0, "float32", False, ("B", "T", "H", "d_k"), nbytes=24576)
>>> [(b.outer, b.inner) for b in view_breaks(t, (2, 6, 512))]
[('H', 'd_k')]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from shapetrace.engine import axes as ax
from shapetrace.engine import axis_reshape
from shapetrace.engine.formatting import fmt_bytes, fmt_names

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import TensorInfo
    from shapetrace.engine.namer import Namer


@dataclass(frozen=True)
class StrideBreak:
    """Two neighbouring input axes a view must merge whose strides do not chain."""

    outer: str
    inner: str
    outer_stride: int
    inner_size: int
    inner_stride: int

    @property
    def needed(self) -> int:
        return self.inner_size * self.inner_stride

    def text(self) -> str:
        return (f"{self.outer} → {self.inner}: stride({self.outer}) = {self.outer_stride:,}, but "
                f"size({self.inner}) × stride({self.inner}) = {self.inner_size:,} × {self.inner_stride:,} "
                f"= {self.needed:,}")


@dataclass(frozen=True)
class Group:
    """Input axes and output sizes that cover the same elements (a minimal group)."""

    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


def resolve_shape(numel: int, target: Sequence[int]) -> tuple[int, ...] | None:
    """``target`` with one ``-1`` filled in; None when the sizes cannot match ``numel``."""
    target = tuple(int(s) for s in target)
    if target.count(-1) > 1 or any(s < -1 for s in target):
        return None
    if -1 in target:
        known = math.prod(s for s in target if s != -1)
        if known == 0 or numel % known:
            return None
        target = tuple(numel // known if s == -1 else s for s in target)
    return target if math.prod(target) == numel else None


def requested_shape(event) -> tuple[int, ...] | None:
    """The shape a recorded ``view``/``reshape`` asked for (``-1`` kept), from its recorded parameters;
    for ``view_as(other)``, other's shape (its second operand)."""
    shape = event.params.get("shape")
    if shape:
        return tuple(shape)
    from shapetrace.engine.ops import takes_shape_of_other

    if takes_shape_of_other(event.spec) and len(event.inputs) == 2:
        return tuple(event.inputs[1].shape)
    return None


def view_groups(shape: Sequence[int], target: Sequence[int]) -> list[Group]:
    """Minimal groups of input axes and output axes with equal products (size-1 axes skipped)."""
    ins = [i for i, s in enumerate(shape) if s != 1]
    outs = [j for j, s in enumerate(target) if s != 1]
    groups, i, j = [], 0, 0
    while i < len(ins) and j < len(outs):
        gi, gj = [ins[i]], [outs[j]]
        pi, pj = shape[ins[i]], target[outs[j]]
        while pi != pj:
            if pi < pj:
                i += 1
                gi.append(ins[i])
                pi *= shape[ins[i]]
            else:
                j += 1
                gj.append(outs[j])
                pj *= target[outs[j]]
        groups.append(Group(tuple(gi), tuple(gj)))
        i, j = i + 1, j + 1
    return groups


def view_breaks(info: TensorInfo, target: Sequence[int]) -> list[StrideBreak]:
    """The neighbouring axes a view to ``target`` must merge but cannot (empty: the view works)."""
    resolved = resolve_shape(math.prod(info.shape), target)
    if resolved is None:
        return []
    names = _names(info)
    out = []
    for group in view_groups(info.shape, resolved):
        for a, b in zip(group.inputs, group.inputs[1:]):
            if info.stride[a] != info.shape[b] * info.stride[b]:
                out.append(StrideBreak(names[a], names[b], info.stride[a], info.shape[b], info.stride[b]))
    return out


def _names(info: TensorInfo) -> list[str]:
    return [(n or f"dim{i}").replace("*", "·") for i, n in enumerate(info.dims)]


def _merged_groups(info: TensorInfo, target: Sequence[int]) -> list[Group]:
    groups = view_groups(info.shape, target)
    return [g for g in groups if len(g.inputs) > 1 and any(
        info.stride[a] != info.shape[b] * info.stride[b] for a, b in zip(g.inputs, g.inputs[1:]))]


def explain_view_error(info: TensorInfo, target_shape: Sequence[int], namer: Namer | None = None) -> str:
    """Plain-English explanation of a failed ``view(target_shape)`` on a tensor described by ``info``.

    Args:
        info: the input tensor (shape, stride, names) as the tracer recorded it.
        target_shape: the sizes passed to ``view`` (one ``-1`` allowed).
        namer: the trace's :class:`~shapetrace.engine.namer.Namer`; with it, the fixes are
            checked for silently mixing axes (the ``reshape`` trap).

    Returns:
        several lines of text (no trailing newline): why, then the fixes; '' if the view works.
    """
    return "\n".join(part for part in view_error_parts(info, target_shape, namer) if part)


def view_error_parts(info: TensorInfo, target_shape: Sequence[int], namer: Namer | None = None) -> tuple[str, str]:
    """:func:`explain_view_error` in two parts: why the view fails, and the fixes (with the reshape trap).

    Returns:
        (why, fixes), each of one or more lines; ('', '') if the view works, and no fixes when the
        sizes do not even match.
    """
    numel = math.prod(info.shape)
    target = resolve_shape(numel, target_shape)
    shown = ", ".join(str(s) for s in target_shape)
    if target is None:
        return (f"view({shown}) asks for a different number of elements than the {numel:,} the tensor "
                f"has: the sizes must multiply to {numel:,}"), ""
    breaks = view_breaks(info, target)
    if not breaks:
        return "", ""
    names = _names(info)
    lines = []
    for g in _merged_groups(info, target):
        axes = [names[i] for i in g.inputs]
        sizes = " × ".join(f"{info.shape[i]:,}" for i in g.inputs)
        into = ", ".join(f"{target[j]:,}" for j in g.outputs)
        lines.append(f"view({shown}) has to merge {_join(axes)} ({sizes} = "
                     f"{math.prod(info.shape[i] for i in g.inputs):,} elements) and cut them into [{into}].")
    lines.append("Merged axes must follow each other in memory: each one's stride must equal the next "
                 "one's size × stride, so that one stride can step through them all. Here:")
    lines += [f"  {b.text()}" for b in breaks]
    first = breaks[0]
    lines.append(f"The strides do not chain ({first.outer_stride:,} ≠ {first.needed:,}): {first.outer} and "
                 f"{first.inner} are not neighbours in memory ({_why_apart(info, first)}).")
    namer = namer if namer is not None else getattr(info, "namer", None)
    return "\n".join(lines), "\n".join(verified_fixes(info, target, shown, namer))


def _why_apart(info: TensorInfo, b: StrideBreak) -> str:
    """A reordering (a transpose or permute) or a gap (a slice of a wider tensor: chunk, split, narrow)."""
    strides = [st for st, n in zip(info.stride, info.shape) if n > 1]
    if b.outer_stride > b.needed and strides == sorted(strides, reverse=True):
        return (f"the axes are in memory order, but each step of {b.outer} skips {b.outer_stride - b.needed:,} "
                "values that are not part of this tensor: it is a slice of a wider one, as chunk, split, narrow "
                "and indexing make")
    return "a transpose or permute reordered the axes without moving any data"


# ---------------------------------------------------------------------------
# fixes, each applied to the captured layout before it is offered
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Mix:
    """An axis a reshape would fill with pieces of several input axes."""

    axis: int
    parts: tuple[str, ...]
    result: str   # the result's shape, with names where known
    named: bool   # judged by the input's axis names (else by sizes alone)


def verified_fixes(info: TensorInfo, target: Sequence[int], shown: str, namer: Namer | None) -> list[str]:
    """The copying fixes (``.contiguous().view``, ``.reshape``) when the result they give mixes no axes;
    otherwise why they would be wrong, and the step that must come first."""
    numel = math.prod(info.shape)
    nbytes = info.nbytes or numel * 4
    mix = reshape_mix(info, target, namer)
    if mix is None:
        return [f"fix 1: .contiguous().view({shown})  copies {fmt_bytes(nbytes)} ({numel:,} elements) into "
                "a new buffer in the current axis order, then views it",
                f"fix 2: .reshape({shown})  makes the same {fmt_bytes(nbytes)} copy, silently"]
    verdict = ("The shape is right but the contents are in the wrong order" if mix.named else
               "If each axis should keep one meaning, that is wrong")
    lines = [f"not a fix: .contiguous().view({shown}) and .reshape({shown}) would run, but they give {mix.result}: "
             f"axis {mix.axis} takes pieces of {_join(mix.parts)}. {verdict}; no error will tell you."]
    first = split_then_move(info, target, namer) or move_then_merge(info, target, namer)
    lines.append(first or "Move the axes into the order you want first (transpose/permute), then merge.")
    return lines


def reshape_mix(info: TensorInfo, target: Sequence[int], namer: Namer | None) -> Mix | None:
    """Apply ``reshape(target)`` to ``info``'s layout: the first result axis holding pieces of several
    input axes (judged by names where the input is named, else by sizes: an axis is clean when it is a
    piece of one input axis or whole input axes merged)."""
    named = _named_result(info, target, namer)
    if named is not None and named[1] is not None:
        labels, mixed = named
        return Mix(mixed, tuple(labels[mixed][1:].split("*")), fmt_names(labels, target), True)
    names = _names(info)
    for group in view_groups(info.shape, target):
        if named is not None and all(info.dims[i] for i in group.inputs):
            continue   # named axes: their names said they do not mix
        for j in _straddling(info.shape, target, group):
            return Mix(j, tuple(names[i] for i in group.inputs), fmt_names([None] * len(target), target), False)
    return None


def _named_result(info: TensorInfo, target: Sequence[int], namer: Namer | None):
    """``(labels, first mixed axis or None)`` after ``reshape(target)`` by names; None when unnamed."""
    if namer is None or not info.axes or len(info.axes) != len(info.shape) or not any(info.dims):
        return None
    try:
        out_axes = axis_reshape.reshape_axes(info.axes, target, namer)
    except ValueError:
        return None
    labels = [namer.label(a) for a in out_axes]
    mixed = next((j for j, lab in enumerate(labels) if lab and lab.startswith(ax.MIXED_PREFIX)), None)
    return labels, mixed


def _straddling(shape: Sequence[int], target: Sequence[int], group: Group) -> list[int]:
    """Output axes of ``group`` that are neither a piece of one input axis nor whole input axes."""
    bounds, p = [1], 1
    for i in group.inputs:
        p *= shape[i]
        bounds.append(p)
    out, p = [], 1
    for j in group.outputs:
        lo, p = p, p * target[j]
        piece = any(lo % bounds[k] == 0 and bounds[k + 1] % p == 0 for k in range(len(bounds) - 1))
        if not piece and not (lo in bounds and p in bounds):
            out.append(j)
    return out


def _clean(info: TensorInfo, target: Sequence[int], namer: Namer | None) -> bool:
    return reshape_mix(info, target, namer) is None


def split_then_move(info: TensorInfo, target: Sequence[int], namer: Namer | None) -> str:
    """``.view(P).transpose(i, j)``: split the axes where they are (a view these strides allow), then
    swap two axes into the order asked for; '' when no single swap does it."""
    n = len(target)
    for i, j in _pairs(n):
        order = list(target)
        order[i], order[j] = order[j], order[i]
        if view_breaks(info, order) or not _clean(info, order, namer):
            continue
        shown = ", ".join(str(s) for s in order)
        result = _swapped_names(info, order, i, j, namer)
        return (f"What must come first: split the axes where they are, then move them: .view({shown})"
                f".transpose({i}, {j}) gives {result} as a view, no copy.")
    return ""


def move_then_merge(info: TensorInfo, target: Sequence[int], namer: Namer | None) -> str:
    """``.transpose(i, j).reshape(target)``: bring the axes to merge next to each other first."""
    for i, j in _pairs(len(info.shape)):
        moved = _transposed(info, i, j)
        if not _clean(moved, target, namer):
            continue
        shown = ", ".join(str(s) for s in target)
        named = _named_result(moved, target, namer)
        result = fmt_names(named[0], target) if named else fmt_names([None] * len(target), target)
        nbytes = info.nbytes or math.prod(info.shape) * 4
        return (f"What must come first: move the axes next to each other, then merge: .transpose({i}, {j})"
                f".reshape({shown}) gives {result} (a {fmt_bytes(nbytes)} copy, in the right order).")
    return ""


def _pairs(n: int) -> list[tuple[int, int]]:
    """Axis pairs, nearest first: (0, 1), (1, 2), ..., (0, 2), ..."""
    return [(i, i + gap) for gap in range(1, n) for i in range(n - gap)]


def _transposed(info: TensorInfo, i: int, j: int) -> TensorInfo:
    def swap(seq):
        seq = list(seq)
        seq[i], seq[j] = seq[j], seq[i]
        return tuple(seq)

    return replace(info, shape=swap(info.shape), stride=swap(info.stride), dims=swap(info.dims),
                   axes=swap(info.axes) if len(info.axes) == len(info.shape) else info.axes)


def _swapped_names(info: TensorInfo, order: Sequence[int], i: int, j: int, namer: Namer | None) -> str:
    named = _named_result(info, order, namer)
    labels = list(named[0]) if named else [None] * len(order)
    sizes = list(order)
    labels[i], labels[j] = labels[j], labels[i]
    sizes[i], sizes[j] = sizes[j], sizes[i]
    return fmt_names(labels, sizes)


def _join(items: Sequence[str]) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
