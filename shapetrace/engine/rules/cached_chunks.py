"""Several new queries scored against a growing KV cache with no mask at all (Mikyx-1/TinyLLM issue #17, PR #18:
the causal mask applied only ``if cache is None``, and ``generate()`` attaches the caches before the prefill, so
the whole prompt was scored unmasked and each prompt token saw the tokens after it).

A KV cache is proven by the keys' provenance, not by a size: the scores' keys are read back through one-operand
ops to a join along the keys' axis whose last part has as many entries as there are queries (the chunk's own
keys, after the cached ones), and that join grows a cache: its output is the first part of a later join, or its
first part is an earlier join's output. A cache that grows is read by an autoregressive decoder, whose chunk of
several queries needs a causal mask. The scores reach their softmax through one-operand ops only (a scale), with
no other tensor combined into them by a call without a row (:mod:`..mask_parts`: LongT5's local-and-global bias
``scores + position_bias``), so no mask was laid on them; a fused kernel is called with neither ``attn_mask``
nor ``is_causal``. A warning, not an error: a prefix-LM's bidirectional prefill (every prompt token sees every
other) is built the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic
    from shapetrace.engine.events import Event

#: one-operand ops followed back (from a softmax to its product, from keys to their join)
MAX_BACK = 12


def chunk_unmasked(analysis: Analysis) -> list[Diagnostic]:
    """A warning for each softmax over several queries' scores against a growing cache, with no mask on them,
    and each fused kernel called so."""
    out = []
    for e in analysis.events_of(Family.SOFTMAX):
        if len(analysis.mask_parts.get(e.index, {}).get(0, ())) > 1:
            continue   # (another tensor was combined into the scores by a call without a row: a bias, a mask)
        product = _back_to(analysis, _source(analysis, e, 0), Family.PRODUCT)
        if product is None or len(product.sources) < 2 or not e.outputs:
            continue
        join = _cache_join(analysis, product, 1, e.outputs[0].shape)
        if join is not None:
            out.append(_finding(analysis, e, e.outputs[0], join))
    for e in analysis.events_of(Family.FUSED_ATTENTION):
        if len(e.inputs) < 3 or len(e.inputs) > 3 or e.params.get("is_causal") or e.error or not e.outputs:
            continue
        q, k = e.inputs[0], e.inputs[1]
        if len(q.shape) < 2 or len(k.shape) < 2:
            continue
        join = _cache_join(analysis, e, 1, (*q.shape[:-1], k.shape[-2]))
        if join is not None:
            out.append(_finding(analysis, e, e.outputs[0], join))
    return out


def _cache_join(analysis: Analysis, e: Event, operand: int, scores_shape) -> Event | None:
    """The join that grows a cache and made operand ``operand`` of ``e`` (the keys, or ``k`` of SDPA), where
    the scores ``scores_shape`` hold several queries, as many as the join's last part; else None."""
    if len(scores_shape) < 2 or scores_shape[-2] < 2:
        return None
    join = _back_to(analysis, _source(analysis, e, operand), Family.JOIN)
    if join is None or not join.outputs or len(join.inputs) < 2:
        return None
    dim = join.params.get("dim", 0)
    if type(dim) is not int:
        return None
    dim %= len(join.outputs[0].shape)
    if join.outputs[0].shape[dim] != scores_shape[-1] or join.inputs[-1].shape[dim] != scores_shape[-2]:
        return None
    return join if _grows(analysis, join) else None


def _grows(analysis: Analysis, join: Event) -> bool:
    """Is ``join`` one of a chain of joins (a cache): fed by an earlier one, or feeding a later one first?"""
    first = join.sources[0] if join.sources else None
    if first is not None and analysis.events[first[0]].spec.family is Family.JOIN:
        return True
    return any(later.sources and later.sources[0] is not None and later.sources[0][0] == join.index
               for later in analysis.events_of(Family.JOIN) if later.index > join.index)


def _back_to(analysis: Analysis, event: Event | None, family: Family) -> Event | None:
    """The first event of ``family`` reached from ``event`` back through one-operand ops; None past another."""
    for _ in range(MAX_BACK):
        if event is None or event.spec.family is family:
            return event
        if len(event.sources) != 1:
            return None
        event = _source(analysis, event, 0)
    return None


def _source(analysis: Analysis, e: Event, operand: int) -> Event | None:
    source = e.sources[operand] if operand < len(e.sources) else None
    return analysis.events[source[0]] if source is not None and source[0] < len(analysis.events) else None


def _finding(analysis: Analysis, e: Event, scores, join: Event) -> Diagnostic:
    dim = join.params.get("dim", 0) % len(join.outputs[0].shape)
    n_new, n_keys = join.inputs[-1].shape[dim], join.outputs[0].shape[dim]
    return Kind.CACHED_CHUNK_UNMASKED.found(e.index, (
        f"{e.op} #{e.index} weighs {n_new} new queries against {n_keys} keys with no mask: {join.op} "
        f"#{join.index} put their own keys after {n_keys - n_new} cached ones, in a cache that grows from call "
        f"to call, so each new query sees the new tokens after it ({fmt_named(scores.dims, scores.shape)})."),
        "Mask the chunk causally, offset by the cache's length: torch.ones(T, past + T, dtype=torch.bool)"
        ".tril(past) (True = attend), whether or not a cache is attached.")
