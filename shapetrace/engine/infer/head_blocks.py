"""Head blocks picked apart: which heads the parts of a width cut ``(m, H/m, d_k)`` hold is not known.

Reads: a call that takes one entry of an axis away (``kv[0]``, ``select``, ``unbind``) and the names of its
operand and results. Adds: nothing to the state; it unnames the results' axes whose heads depend on the entry
taken.

A projection's width cut into ``(2, H/2, d_k)`` (Shunted attention's ``kv1(x).reshape(B, -1, 2, H // 2, d_k)``)
reads as ``[H/2, H%2, d_k]`` where the width is heads side by side: the major piece ``H/2`` says which block
of heads, the minor one ``H%2`` which head in the block. Once an integer index takes one entry of ``H/2``
away (``kv[0]``, ``kv[1]``), the kept ``H%2`` axis holds the heads ``H[0:2]`` or ``H[2:4]`` of that width, if
it is heads side by side; or the own heads of one part of a stack of two (keys, then values, each of half
the heads), if the leading factor is a stack. Every size fits both readings (equal sizes never decide a
name), and the two give different heads: the axis gets no name. A kept axis that holds the heads whole (a
fused ``[qkv, B, H, T, d_k]`` picked by ``[0]``) is not touched; nor is a pick along any other axis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine import axes as ax
from shapetrace.engine.capture import OpRecord
from shapetrace.engine.ops import separated_axis
from shapetrace.engine.thawed import thaw_args
from shapetrace.engine.vocabulary import Role

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.infer.state import Inference


def picked_head_blocks(state: Inference, record: OpRecord, in_axes, out_axes: list) -> list:
    """``out_axes`` with every axis that holds a minor piece of heads unnamed, where ``record`` took one entry
    of the major piece of those heads away (the axis it separates is gone from each result)."""
    if not record.spec.separates or not in_axes or not out_axes:
        return out_axes
    axes = in_axes[0]
    args, kwargs = thaw_args(record.frozen)
    dim = separated_axis(record.spec, args, kwargs, len(axes))
    if dim is None or not -len(axes) <= dim < len(axes):
        return out_axes
    if any(len(out) != len(axes) - 1 for out in out_axes):
        return out_axes   # (a chunk or split keeps the axis it cuts: nothing was picked)
    label, role = state.namer.label, state.namer.role
    major = label(axes[dim])
    if not major or not ax.is_piece_label(major) or "%" in major or "/" not in major:
        return out_axes   # (not the major piece of a cut axis: which block)
    root = major.partition("/")[0]
    if role(root) != Role.HEADS:
        return out_axes
    return [tuple(ax.unknown_axis(a.size) if _piece_of(label(a), root) else a for a in out) for out in out_axes]


def _piece_of(label: str | None, root: str) -> bool:
    """Is ``label`` another piece of the heads ``root`` (``H%2``, ``H/2%2``), not the heads whole?"""
    return bool(label) and ax.is_piece_label(label) and label.partition("/")[0].partition("%")[0] == root
