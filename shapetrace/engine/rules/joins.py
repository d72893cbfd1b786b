"""Joins whose parts disagree (part of ``diagnose.RULES``): ``torch.cat`` lines its parts up along
every axis but the one it joins, and torch checks only that the sizes agree. When two parts hold
different named axes there (a cached key stored ``[B, H, T, d_k]`` joined with a new key laid out
``[B, H, d_k, 1]``, equal sizes T == d_k), the result mixes them: a contradiction between two
facts, reported with what each part says. Only declared names count (never sizes alone)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.diagnostic import Diagnostic
from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis


def _plain(label: str | None, analysis: Analysis) -> bool:
    return bool(label) and (label in analysis.dims or label in analysis.namer.decompositions)


def joined_parts_disagree(analysis: Analysis) -> list[Diagnostic]:
    out = []
    for e in analysis.events_of(Family.JOIN):
        if len(e.inputs) < 2 or not e.outputs:
            continue
        rank = len(e.inputs[0].shape)
        if rank == 0 or any(len(t.shape) != rank for t in e.inputs):
            continue
        dim = e.params.get("dim", 0)
        dim = dim % rank if isinstance(dim, int) else None
        clash = _first_clash(analysis, e.inputs, dim)
        if clash is None:
            continue
        axis, (a, la), (b, lb) = clash
        out.append(Kind.JOIN_MISMATCH.found(e.index, (
            f"{e.op} #{e.index} joins {fmt_named(a.dims, a.shape)} with {fmt_named(b.dims, b.shape)}: along "
            f"axis {axis - rank} the first holds {la} and the second {lb}. They have the same size, so torch "
            f"joins them without complaint, but the result lines {la} of one part up with {lb} of the other."),
            f"Lay both parts out alike before the {e.op} (a transpose of one of them)."))
    return out


def _first_clash(analysis: Analysis, inputs, dim: int | None):
    for axis in range(len(inputs[0].shape)):
        if axis == dim:
            continue
        named = [(t, t.dims[axis]) for t in inputs if _plain(t.dims[axis], analysis)]
        for t, label in named[1:]:
            if label != named[0][1]:
                return axis, named[0], (t, label)
    return None


def cat_sizes(analysis: Analysis) -> list[Diagnostic]:
    """A join that raised because two parts differ in size on an axis it does not join."""
    out = []
    for e in analysis.events_of(Family.JOIN):
        if not e.error or len(e.inputs) < 2:
            continue
        rank = len(e.inputs[0].shape)
        dim = e.params.get("dim", 0)
        if rank == 0 or any(len(t.shape) != rank for t in e.inputs) or not isinstance(dim, int):
            continue
        dim %= rank
        found = _size_clash(e.inputs, dim)
        if found is not None:
            out.append(_cat_sizes_diagnostic(e, analysis, dim, *found))
    return out


def _size_clash(inputs, dim: int):
    """``(axis, a, b)``: the first axis other than ``dim`` where parts ``a`` and ``b`` differ in size."""
    for axis in range(len(inputs[0].shape)):
        if axis != dim:
            for t in inputs[1:]:
                if t.shape[axis] != inputs[0].shape[axis]:
                    return axis, inputs[0], t
    return None


def _axis_text(t, axis: int) -> str:
    label = t.dims[axis]
    return f"{label}={t.shape[axis]}" if label else f"size {t.shape[axis]}"


def _cat_sizes_diagnostic(e, analysis: Analysis, dim: int, axis: int, a, b) -> Diagnostic:
    rank = len(a.shape)
    joined = next((t.dims[dim] for t in e.inputs if t.dims[dim]), None)
    along = f"axis {dim}" + (f" ({joined})" if joined else "")
    roles = {analysis.namer.role(t.dims[axis]) for t in (a, b) if t.dims[axis]}
    text = (f"{e.op} #{e.index} raised: it joins {fmt_named(a.dims, a.shape)} and {fmt_named(b.dims, b.shape)} "
            f"along {along}, so every other axis must have the same size in each part, but axis {axis} holds "
            f"{_axis_text(a, axis)} in the first and {_axis_text(b, axis)} in the second.")
    if "tokens" in roles and joined and analysis.namer.role(joined) != "tokens":
        text += (f" The parts differ in their tokens, and tokens are what a join like this adds up (a cache "
                 f"growing by one token, a class token in front of the patches); {joined} is not.")
    fix = (f"Join along the axis that grows: {e.op}([...], dim={axis}) (or dim={axis - rank}), which gives "
           f"{a.shape[axis]}+{b.shape[axis]} there; check that every other axis means the same in each part.")
    return Kind.CAT_SIZES_MISMATCH.found(e.index, text, fix)


def projections_joined(analysis: Analysis) -> list[Diagnostic]:
    """A warning on each ``cat`` along the tokens whose parts were made by two of the q, k and v projections
    (:attr:`.events.Event.projections`): facebookresearch/dinov3's rotated patch keys written ``rope_apply(q[:, :,
    prefix:], ...)`` join the keys' prefix tokens to the queries' patches, so the keys are partly queries. A join
    of one projection's parts (a prefix kept apart from the rotated tokens), or along another axis (q, k and v
    stacked for a fused kernel), says nothing."""
    out = []
    for e in analysis.events_of(Family.JOIN):
        letters = {p for p in e.projections if p}
        if len(letters & {"q", "k", "v"}) < 2 or e.spec.stacks or len(e.inputs) != len(e.projections):
            continue
        rank = len(e.inputs[0].shape)
        dim = e.params.get("dim", 0)
        if not rank or not isinstance(dim, int) or any(len(t.axes) != rank for t in e.inputs):
            continue
        roots = {a.root for t in e.inputs for a in t.axes[dim % rank].atoms}
        if not roots or any(analysis.namer.plain_role(r) != "tokens" for r in roots):
            continue
        parts = ", ".join(f"{fmt_named(t.dims, t.shape)} from the {p} projection"
                          for t, p in zip(e.inputs, e.projections) if p)
        out.append(Kind.PROJECTIONS_JOINED.found(e.index, (
            f"{e.op} #{e.index} joins along the tokens {parts}: one tensor's tokens come from two projections, so "
            "some of its keys (or queries, or values) are another projection's. Names and shapes are those of a "
            "right join; only where each element came from tells."),
            "Take every part from one projection (a line copied from the queries' one: k[:, :, prefix:], not "
            "q[:, :, prefix:])."))
    return out
