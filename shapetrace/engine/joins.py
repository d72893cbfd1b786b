"""Joins whose parts disagree (part of ``diagnose.RULES``): ``torch.cat`` lines its parts up along
every axis but the one it joins, and torch checks only that the sizes agree. When two parts hold
different named axes there (a cached key stored ``[B, H, T, d_k]`` joined with a new key laid out
``[B, H, d_k, 1]``, equal sizes T == d_k), the result mixes them: a contradiction between two
facts, reported with what each part says. Only declared names count (never sizes alone)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.diagnostic import Diagnostic
from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.ops import Family, family_of

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.tracer import Trace


def _plain(label: str | None, trace: Trace) -> bool:
    return bool(label) and (label in trace.dims or label in trace.namer.decompositions)


def joined_parts_disagree(trace: Trace) -> list[Diagnostic]:
    out = []
    for e in trace.events:
        if family_of(e.op) is not Family.JOIN or len(e.inputs) < 2 or not e.outputs:
            continue
        rank = len(e.inputs[0].shape)
        if rank == 0 or any(len(t.shape) != rank for t in e.inputs):
            continue
        dim = e.params.get("dim", 0)
        dim = dim % rank if isinstance(dim, int) else None
        clash = _first_clash(trace, e.inputs, dim)
        if clash is None:
            continue
        axis, (a, la), (b, lb) = clash
        out.append(Diagnostic("error", "join-mismatch", e.index, (
            f"{e.op} #{e.index} joins {fmt_named(a.dims, a.shape)} with {fmt_named(b.dims, b.shape)}: along "
            f"axis {axis - rank} the first holds {la} and the second {lb}. They have the same size, so torch "
            f"joins them without complaint, but the result lines {la} of one part up with {lb} of the other."),
            f"Lay both parts out alike before the {e.op} (a transpose of one of them)."))
    return out


def _first_clash(trace: Trace, inputs, dim: int | None):
    for axis in range(len(inputs[0].shape)):
        if axis == dim:
            continue
        named = [(t, t.dims[axis]) for t in inputs if _plain(t.dims[axis], trace)]
        for t, label in named[1:]:
            if label != named[0][1]:
                return axis, named[0], (t, label)
    return None
