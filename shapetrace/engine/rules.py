"""Diagnostic rules for masks, NaN rows and failed views (part of ``diagnose.RULES``).

``mask-wrong-axis`` and ``view-incompatible`` read the recorded events (the latter explained by
issue 3's :mod:`shapetrace.engine.viewfail`);
``nan-rows`` reads ``trace.nan_rows``, which the session fills from real values
(it is ``None``, with ``trace.value_note`` saying why, on the meta device).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.diagnostic import Diagnostic
from shapetrace.engine.formatting import fmt_named

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.tracer import Trace

ATTENTION_OPS = ("softmax", "scaled_dot_product_attention", "multi_head_attention_forward")
#: a fill at or below this hides a score from softmax (-1e9, -10000, finfo.min, -inf all do)
HIDING_FILL = -1e4


def hides(value) -> bool:
    """Does filling a score with ``value`` remove it from the softmax?"""
    return isinstance(value, (int, float)) and value <= HIDING_FILL


def mask_axis(trace: Trace) -> list[Diagnostic]:
    """A mask that varies along the queries and is broadcast over the keys (a padding mask put on
    the wrong axis): it hides whole query rows instead of key columns."""

    out = []
    for e in trace.events:
        if e.op not in ("masked_fill", "masked_fill_") or len(e.inputs) < 2 or not hides(e.params.get("value")):
            continue  # only masks that hide scores (a large negative); zeroing whole rows afterwards is on purpose
        scores, mask = e.inputs[0], e.inputs[1]
        roles = [a.role for a in scores.axes]
        if "query" not in roles or "key" not in roles:
            continue
        lead = len(scores.shape) - len(mask.shape)
        q, k = roles.index("query") - lead, roles.index("key") - lead
        q_label = (mask.dims[q] if 0 <= q < len(mask.dims) else None) or scores.dims[q + lead] or "query"
        q_size = mask.shape[q] if 0 <= q < len(mask.shape) else 1
        k_size = mask.shape[k] if 0 <= k < len(mask.shape) else 1
        if q_size > 1 and k_size == 1:
            out.append(Diagnostic("error", "mask-wrong-axis", e.index, (
                f"masked_fill #{e.index} broadcasts the mask {fmt_named(mask.dims, mask.shape)} against the scores "
                f"{fmt_named(scores.dims, scores.shape)}: its {q_label} axis lines up with the queries and it is "
                "broadcast over the keys, so it hides whole query rows while every query still attends to "
                "the padding keys. A key-padding mask [B, T] goes to [B, 1, 1, T]: mask[:, None, None, :].")))
    return out


def nan_rows(trace: Trace) -> list[Diagnostic]:
    """Attention rows that came out NaN: a query with every key masked."""

    rows = getattr(trace, "nan_rows", None)
    note = getattr(trace, "value_note", None)
    where = getattr(trace, "nan_event", None)
    if where is None:
        where = next((e.index for e in trace.events if e.op in ATTENTION_OPS), None)
    if rows is None:
        if note:
            return [Diagnostic("note", "nan-rows-skipped", None, note)]
        return []
    if not rows:
        return []
    by_seq: dict[int, list[int]] = {}
    for b, q in sorted({(b, q) for b, _h, q in rows}):
        by_seq.setdefault(b, []).append(q)
    which = "; ".join(f"sequence {b}: queries {', '.join(map(str, qs))}" for b, qs in by_seq.items())
    heads = {h for _b, h, _q in rows}
    what = (f"{len(rows)} rows of the attention weights are NaN ({which}, in {len(heads)} head"
            f"{'s' if len(heads) != 1 else ''})" if None not in heads else
            f"{len(rows)} output rows are NaN ({which})")
    return [Diagnostic("error", "nan-rows", where, (
        f"{what}. Every key of these queries is "
        "masked, so softmax computes exp(-inf) / sum(exp(-inf)) = 0 / 0. The NaN then spreads into "
        "the output and, in training, into every gradient. Fix: give every query one visible key "
        "(pad on the right with a causal mask), or zero the fully masked rows after softmax "
        "(--safe-softmax shows it; F.scaled_dot_product_attention in this torch returns zeros for such rows).")
    )]


def view_incompatible(trace: Trace) -> list[Diagnostic]:
    """A view that raised because the strides cannot express the merge (explained by
    :func:`shapetrace.engine.viewfail.explain_view_error`, from the input's recorded strides)."""
    from shapetrace.engine.viewfail import explain_view_error, requested_shape

    out = []
    for e in trace.events:
        if e.op != "view" or not e.error or VIEW_ERROR not in e.error or not e.inputs:
            continue
        target = requested_shape(e)
        text = explain_view_error(e.inputs[0], target, trace.namer) if target else ""
        out.append(Diagnostic("error", "view-incompatible", e.index,
                              f"view #{e.index} raised: " + (text or "these strides cannot express the new "
                                                             "shape; call .contiguous() first or use .reshape(...).")))
    return out


VIEW_ERROR = "view size is not compatible"


VARIANT_RULES = [mask_axis, nan_rows, view_incompatible]
