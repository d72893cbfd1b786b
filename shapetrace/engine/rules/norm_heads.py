"""A norm whose normalised axes take the heads in with their features: ``F.rms_norm(q, q.shape[-2:])`` on
``[B, T, H, d_k]`` (KellerJordan/modded-nanogpt's q/k norm is one per head, ``(d_k,)``; the normalised shape taken
as the last two sizes normalises each token across all of its heads). The same numbers come from a norm over
``D`` before the heads are split (OLMo 2's q/k norm, allenai/OLMo), so the names cannot call it a slip: a note
that leaves ``?`` (the verdict says the norm was not proven), never an error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family
from shapetrace.engine.reductions import axes_along

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic


def norm_across_heads(analysis: Analysis) -> list[Diagnostic]:
    """A note for each norm along a named heads axis of more than one entry and the axes after it."""
    out = []
    for e in analysis.events_of(Family.NORMALISE):
        if not e.inputs:
            continue
        t = e.inputs[0]
        along = axes_along(Family.NORMALISE.value, e.params, len(t.shape)) or ()
        heads = [k for k in along if t.shape[k] > 1 and analysis.namer.plain_role(t.dims[k]) == "heads"]
        if not heads or len(along) < 2:
            continue
        out.append(Kind.NORM_ACROSS_HEADS.found(e.index, (
            f"{e.op} #{e.index} normalises {fmt_named(t.dims, t.shape)} along "
            f"{', '.join(str(t.dims[k]) for k in along)} together: one norm across the {t.shape[heads[0]]} heads "
            "of each token, not one per head. A norm over D before the split computes the same (OLMo 2's q/k "
            "norm); a per-head norm takes the last axis alone.")))
    return out


def norm_one_sided(analysis: Analysis) -> list[Diagnostic]:
    """A note for each scores product whose queries and keys (the projections' operands, ``q`` and ``k``) come
    normalised on one path and not on the other: a qk-norm (OLMo, Gemma 3, ViT-22B) takes both; one on the keys
    alone, or on the keys and the values with the queries left raw (kyegomez/MegaVIT issue #17), has the names,
    shapes and layout of the right one. Said as a note that leaves ``?``, never an error: one side by design
    cannot be ruled out."""
    out = []
    for e in analysis.events_of(Family.PRODUCT):
        if sorted(p for p in e.projections if p) != ["k", "q"] or len(e.sources) != len(e.projections):
            continue
        normed = {p: _normalised(analysis.events, s, p) for s, p in zip(e.sources, e.projections) if p}
        if len(set(normed.values())) != 2:
            continue
        side, raw = ("keys", "queries") if normed["k"] else ("queries", "keys")
        out.append(Kind.QK_NORM_ONE_SIDED.found(e.index, (
            f"{e.op} #{e.index} scores queries against keys with the {side} normalised on their way from the "
            f"projection and the {raw} not: a qk-norm normalises both (a norm given to another operand leaves "
            "the same shapes and names). Not proven right or wrong.")))
    return out


def _normalised(events, source, letter: str) -> bool:
    """Does a norm lie on the path of the ``letter`` operand (``q``, ``k``) back to where it was split or
    projected (the events that carry that projection's operand, :attr:`.events.Event.projections`)?"""
    seen, todo = set(), [source]
    while todo:
        src = todo.pop()
        if src is None or src[0] in seen or src[0] >= len(events):
            continue
        seen.add(src[0])
        e = events[src[0]]
        if letter not in e.projections:
            continue
        if e.spec is not None and e.spec.family is Family.NORMALISE:
            return True
        todo.extend(s for s, p in zip(e.sources, e.projections) if p == letter)
    return False
