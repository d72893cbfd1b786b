"""Why a ``view`` failed, worked out from the input's strides (plain text, no Rich, no torch).

torch's message ("view size is not compatible with input tensor's size and
stride") says *that* a view is impossible. :func:`explain_view_error` says
*why*: which input axes the new shape has to merge, the pairs whose strides do
not chain (``stride(a) == size(b) * stride(b)`` fails), what the two fixes cost,
and, when the axis names are known, whether the fixes would silently mix axes.

>>> from shapetrace.engine.tracer import TensorInfo
>>> t = TensorInfo((2, 6, 8, 64), (3072, 64, 384, 1), 0, "float32", False, ("B", "T", "H", "d_k"), nbytes=24576)
>>> [(b.outer, b.inner) for b in view_breaks(t, (2, 6, 512))]
[('H', 'd_k')]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from shapetrace.engine.formatting import fmt_bytes, fmt_names

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.axes import Namer
    from shapetrace.engine.tracer import TensorInfo


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
    """The shape a recorded ``view``/``reshape`` asked for (``-1`` kept), from its recorded parameters."""
    shape = event.params.get("shape")
    return tuple(shape) if shape else None


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
        namer: the trace's :class:`~shapetrace.engine.axes.Namer`; with it, the fixes are
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
                 f"{first.inner} are not neighbours in memory (a transpose or permute reordered the axes "
                 "without moving any data).")
    nbytes = info.nbytes or numel * 4
    fixes = [f"fix 1: .contiguous().view({shown})  copies {fmt_bytes(nbytes)} ({numel:,} elements) into "
             "a new buffer in the current axis order, then views it",
             f"fix 2: .reshape({shown})  makes the same {fmt_bytes(nbytes)} copy, silently"]
    trap = reshape_trap(info, target, namer)
    if trap:
        fixes.append(trap)
    return "\n".join(lines), "\n".join(fixes)


def reshape_trap(info: TensorInfo, target: Sequence[int], namer: Namer | None) -> str:
    """A warning when ``reshape(target)`` would succeed but mix axes that must stay apart."""
    if namer is None or not info.axes or len(info.axes) != len(info.shape):
        return ""
    from shapetrace.engine import axes as ax

    try:
        out_axes = ax.reshape_axes(info.axes, target, namer)
    except ValueError:
        return ""
    labels = [namer.label(a) for a in out_axes]
    mixed = [(j, lab) for j, lab in enumerate(labels) if lab and lab.startswith(ax.MIXED_PREFIX)]
    if not mixed:
        return ""
    j, lab = mixed[0]
    parts = lab[1:].split("*")
    result = fmt_names(labels, target)
    return (f"careful: both fixes give {result}: axis {j} mixes {_join(parts)}. The shape is right but "
            f"the contents are in the wrong order; no error will tell you. Move the axes into the order "
            f"you want first (transpose/permute), then merge.")


def _join(items: Sequence[str]) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
