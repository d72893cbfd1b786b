"""One batch entry picked where every entry needs its own output (``x[0]`` written for ``x[:, 0]``): a note
that leaves ``?``.

A classifier head that pools the class token with ``x[0]`` takes the first batch entry's tokens and drops
every other entry: each op that follows is right on what it gets, and the names follow too (``[T, D]``),
so no layout rule fires; the batch contract cannot be measured either, because the output has no batch
axis left. What shows it is where the batch went: an op that drops a batch axis of more than one entry by
picking into it, after which nothing made from the pick has a batch axis again (a loop over the entries
that stacks them back, ``torch.stack([f(x[i]) for i in range(B)])``, restores it and is not meant). A
reduction over the batch (a loss's mean) is no pick and is not meant either, nor a pick outside every
module (a script printing ``out[0]``, the first entry's result, after the forward).

A mean (or sum, max...) over the batch that keeps each token's or feature's axis (``x.mean(0)`` written for
``x.mean(1)``: pooling over the batch instead of the tokens) loses the batch the same way, averaged, not
picked: a batch-reduced note. A loss's ``mean()`` keeps nothing per token or per feature and is not meant;
nor a batch statistic that broadcasts back onto the batch (``x - x.mean(0)``: the batch is there again).
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
    from shapetrace.engine.events import Event


def batch_picked(analysis: Analysis) -> list[Diagnostic]:
    """A note for each pick that drops a batch of more than one entry for good."""
    out = []
    for e in analysis.events_of(Family.SLICE):
        k = _batch_lost(analysis, e, range(len(e.inputs[0].shape)) if e.inputs else ())
        if k is not None:
            source, picked = e.inputs[0], e.outputs[0]
            out.append(Kind.BATCH_PICKED.found(e.index, (
                f"{e.op} #{e.index} picks one entry of {fmt_named(source.dims, source.shape)}'s batch "
                f"{source.dims[k]} ({source.shape[k]} entries) and drops the others: "
                f"{fmt_named(picked.dims, picked.shape)} goes on without a batch axis, and nothing made from it "
                "has one again, so one entry's result stands for all of them."),
                "Index past the batch to keep every entry: x[:, 0] (each entry's first token), not x[0]."))
    return out


def batch_reduced(analysis: Analysis) -> list[Diagnostic]:
    """A note for each reduction over a batch of more than one entry that keeps per-token or per-feature
    axes, after which nothing made from it has a batch axis again."""
    out = []
    for e in analysis.events_of(Family.REDUCE):
        along = (axes_along(Family.REDUCE.value, e.params, len(e.inputs[0].shape)) or ()) if e.inputs else ()
        k = _batch_lost(analysis, e, along)
        kept = [label for label in e.outputs[0].dims
                if analysis.namer.plain_role(label) in ("tokens", "features")] if k is not None else []
        if kept:
            source, result = e.inputs[0], e.outputs[0]
            out.append(Kind.BATCH_REDUCED.found(e.index, (
                f"{e.op} #{e.index} reduces {fmt_named(source.dims, source.shape)} over its batch "
                f"{source.dims[k]} ({source.shape[k]} entries) and keeps {', '.join(kept)}: "
                f"{fmt_named(result.dims, result.shape)} mixes every entry into one, and nothing made from it has "
                "a batch axis again."),
                "Reduce over the axis meant (the tokens: dim=1 of [B, T, D]), not the batch."))
    return out


def _batch_lost(analysis: Analysis, e: Event, along) -> int | None:
    """The batch axis (of more than one entry, among the input axes ``along``) that op ``e``, inside a
    module, drops for good: its result has one axis fewer (a pick's int index; a reduction without keepdim,
    which keeps a statistic to broadcast back) and no batch, and nothing made from it has a batch again."""
    if e.index not in analysis.in_modules or not e.inputs or not e.outputs \
            or len(e.outputs[0].shape) >= len(e.inputs[0].shape) or _has_batch(analysis, e.outputs[0].dims):
        return None   # (a script's own out[0] after the forward shows one entry: outside every module)
    source = e.inputs[0]
    k = next((k for k in along if source.shape[k] > 1 and analysis.namer.plain_role(source.dims[k]) == "batch"),
             None)
    return None if k is None or _batch_again(analysis, e, source.shape[k]) else k


def _has_batch(analysis: Analysis, labels) -> bool:
    return any(analysis.namer.plain_role(label) == "batch" for label in labels)


def _batch_again(analysis: Analysis, start: Event, entries: int) -> bool:
    """Does any result made (through rows) from ``start``'s output have a batch axis again, or join at least
    as many parts as the batch had entries (a loop's results stacked back, whose new axis has no name)? Or
    does the model's output have its batch (``h - h.mean(0)``: elementwise math has no row to follow)?"""
    if analysis.output_dims is not None and _has_batch(analysis, analysis.output_dims):
        return True
    made = {start.index}
    for e in analysis.events[start.index + 1:]:
        if any(s is not None and s[0] in made for s in e.sources):
            made.add(e.index)
            if any(_has_batch(analysis, o.dims) for o in e.outputs) \
                    or ((e.spec.family is Family.JOIN or e.spec.stacks) and len(e.inputs) >= entries):
                return True
    return False
