"""A hand-written normalisation along an axis of one entry: ``e / e.sum(dim, keepdim=True)`` where ``dim``
has one entry.

A reduction along axes that all have one entry computes nothing: the sum or mean of one entry is that
entry. Kept (``keepdim=True``) and combined back with the values it came from through calls without a row
(the division of a softmax written by hand: ``exp(s) / exp(s).sum(dim, keepdim=True)``), it makes every
weight ``e / e`` = 1 (or 0/0 where ``e`` was masked to 0), so the weighted sum that follows is a plain sum
(keras-team/keras-io pull request #1904: the guide's ``TemporalSoftmax`` summed its exponentials over
``axis=-1`` of ``Dense(1)``'s ``(B, T, 1)`` scores, not over the time axis). It is
:func:`~.weights.softmax_weights`'s one-entry finding for a softmax that ``F.softmax`` did not compute.

What each op computes decides, never sizes alone: the reduction's own axes have one entry (the code's
reduction, not the data's length: a token axis of one entry, a step's one key, is not judged), its input
holds a named token axis of more than one entry beside them, and its result enters a later row through
calls without a row (``Event.joined``): a reduction whose result is only read on its own (a squeeze
written as a sum) is left alone, and so is a maximum (a softmax's stabiliser: ``s - s.amax(-1,
keepdim=True)`` shifts, it does not normalise; lucidrains' chunked attention takes the maximum over the
key chunks, one where a query chunk meets one key chunk: tests/corpus/public25/chunked_memory_efficient.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family
from shapetrace.engine.reductions import axes_along
from shapetrace.engine.rules.weights import TOKEN_ROLES, over_the_tokens, token_axes
from shapetrace.engine.vocabulary import Role

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic


def _combined_later(analysis: Analysis, index: int) -> int | None:
    """The first later row whose input took the result of row ``index`` in through calls without a row
    (a division, a product with the values); None where none did."""
    for later in analysis.events[index + 1:]:
        if any(index in joined for joined in later.joined):
            return later.index
    return None


def _fix(namer, t, k: int) -> str:
    """Reduce along the token axis ``k`` (a merged ``T·B``: as :func:`~.weights.over_the_tokens` says)."""
    if namer.plain_role(t.dims[k]) == Role.TOKENS:
        return (f"Normalise over the tokens: reduce along dim={k - len(t.shape)}, the axis the weighted sum runs "
                "over (or call softmax(dim=...) there).")
    return over_the_tokens(namer, t, k)


def normalised_over_one_entry(analysis: Analysis) -> list[Diagnostic]:
    """A kept reduction along axes of one entry beside a token axis, combined back into the values."""
    namer, out = analysis.namer, []
    for e in analysis.events_of(Family.REDUCE):
        if not e.inputs or not e.outputs or not e.params.get("keepdim") or e.params.get("elementwise"):
            continue
        if e.spec is not None and e.spec.maximum:
            continue   # (a stabiliser: ``s - s.amax(-1, keepdim=True)`` shifts, it does not normalise)
        t = e.inputs[0]
        along = axes_along(Family.REDUCE.value, e.params, len(t.shape))
        if not along or any(t.shape[d] != 1 for d in along):
            continue
        if any(namer.plain_role(t.dims[d]) in TOKEN_ROLES for d in along):
            continue
        tokens = token_axes(namer, t)
        later = _combined_later(analysis, e.index) if tokens else None
        if later is None:
            continue
        dim, k = along[0], tokens[0]
        shown = t.dims[k].replace("*", "·")
        out.append(Kind.SOFTMAX_OVER_ONE_ENTRY.found(e.index, (
            f"{e.op} #{e.index} reduces along axis {dim} ({t.dims[dim] or 'no name'}, one entry) of "
            f"{fmt_named(t.dims, t.shape)}, and its result is combined back with the values it came from "
            f"(#{later} reads it): a normalisation over one entry makes every weight 1, so the {t.shape[k]} "
            f"tokens ({shown}) are summed, not weighed."),
            _fix(namer, t, k), blame=((0, dim),)))
    return out
