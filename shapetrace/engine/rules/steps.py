"""A decoding step's mask that hides the step's own key (tinygrad PR #15949, hyprstream PR #1521: the causal
mask of a cached forward built ``ones(T, P + T).tril()``, not ``tril(P)``).

With a KV cache the step's keys are the cached ones joined with its own: ``torch.cat([cache_k, k], dim=...)``
puts the step's key last, so the step's one query is the newest of the keys it reads (every KV cache's
alignment, and torch's: the last query is the last key). A mask read at its call (:mod:`..directions`:
``hides_newest``) that hides that last key in every slice hides each step's query from itself, and
``tril()`` unshifted does exactly that, keeping key 0 alone. The proof is the keys' provenance, not a size:
the product's keys are read back through one-operand ops to a join along the keys' axis whose last part
has as many entries as the queries (one), and the keys' axis is named tokens. A cross-attention's keys
(another sequence, no such join) are never judged so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family
from shapetrace.engine.rules.directions import _hides
from shapetrace.engine.rules.indices import told_by_size

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic
    from shapetrace.engine.events import Event

#: one-operand ops followed back from the product's keys to the join that made them
MAX_BACK = 12


def step_hides_itself(analysis: Analysis) -> list[Diagnostic]:
    """An error for each mask on one query's scores that hides its newest key, the query's own."""
    out = []
    for e in (*analysis.events_of(Family.MASK_FILL), *analysis.events_of(Family.ELEMENTWISE)):
        if not e.params.get("hides_newest") or not _hides(e) or not e.outputs:
            continue
        scores = e.outputs[0]
        if len(scores.shape) < 2 or scores.shape[-2] != 1 or analysis.namer.plain_role(scores.dims[-1]) != "tokens":
            continue
        join = _keys_join(analysis, e)
        if join is not None:
            out.append(_hides_newest(analysis, e, join))
    return out


def _keys_join(analysis: Analysis, e: Event) -> Event | None:
    """The join that made the keys of the product ``e``'s scores come from, where its last part along the
    keys is one entry (the step's own key); else None."""
    n_keys = e.outputs[0].shape[-1]
    product = _source(analysis, e, next((i for i, t in enumerate(e.inputs) if t.shape == e.outputs[0].shape), 0))
    if product is None or product.spec.family is not Family.PRODUCT or len(product.sources) < 2:
        return None
    event = _source(analysis, product, 1)
    for _ in range(MAX_BACK):
        if event is None:
            return None
        if event.spec.family is Family.JOIN:
            return event if _last_part_is_one(event, n_keys) else None
        if len(event.sources) != 1:
            return None
        event = _source(analysis, event, 0)
    return None


def _source(analysis: Analysis, e: Event, operand: int) -> Event | None:
    source = e.sources[operand] if operand < len(e.sources) else None
    return analysis.events[source[0]] if source is not None and source[0] < len(analysis.events) else None


def _last_part_is_one(join: Event, n_keys: int) -> bool:
    dim = join.params.get("dim", 0)
    if type(dim) is not int or not join.inputs or not join.outputs:
        return False
    rank = len(join.outputs[0].shape)
    dim %= rank
    return join.outputs[0].shape[dim] == n_keys and len(join.inputs) >= 2 and join.inputs[-1].shape[dim] == 1


def _hides_newest(analysis: Analysis, e: Event, join: Event) -> Diagnostic:
    scores = e.outputs[0]
    mask = next((t for t in e.inputs if t.shape != scores.shape), e.inputs[-1])
    key = scores.dims[-1]
    return Kind.CAUSAL_MASK_HIDES_ITSELF.found(e.index, (
        f"{e.op} #{e.index} hides, from the one query of the scores {fmt_named(scores.dims, scores.shape)}, its "
        f"newest key, the last of {key}: {join.op} #{join.index} put the step's own key there, after "
        f"{scores.shape[-1] - 1} cached ones, so the step does not attend to itself "
        f"({fmt_named(mask.dims, mask.shape)}; a causal mask built for the cached keys without the cache's offset, "
        "tril() for tril(past), keeps the first keys instead of the newest)."),
        "Offset the causal mask by the cache's length: torch.ones(T, past + T).tril(past), so query i sees the "
        "keys up to past + i.")


def positions_restart(analysis: Analysis) -> list[Diagnostic]:
    """An error for each position table a decode step reads again from the sequence's first position while its
    keys are appended after a cache (:func:`~shapetrace.engine.lookups.restarted_positions`), where the join's
    axis is named tokens (by a use, not by sizes alone)."""
    out = []
    for earlier, later, join, dim, before in analysis.restarted_positions:
        joined = analysis.events[join].outputs[0] if join < len(analysis.events) and analysis.events[join].outputs \
            else None
        label = joined.dims[dim] if joined is not None and dim < len(joined.dims) else None
        if label is None or analysis.namer.plain_role(label) != "tokens" or told_by_size(analysis, label):
            continue
        first, step, cat = analysis.events[earlier], analysis.events[later], analysis.events[join]
        out.append(Kind.POSITIONS_RESTART.found(later, (
            f"{step.op} #{later} looks up the position table at the same first position as {first.op} #{earlier} "
            f"did for the sequence's first tokens, and {cat.op} #{join} then appends this step's keys along {label} "
            f"after {before} cached ones: the step's tokens are embedded as if they were the sequence's first "
            f"again, so their positions say nothing of the {before} tokens before them."),
            "Offset the step's positions by the cache's length: torch.arange(past, past + T) with past = the "
            "cached keys' length (transformers' past_key_values_length, cache_position)."))
    return out
