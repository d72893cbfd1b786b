"""The scale of attention's scores, read against the width their product sums over (``1/√d_k``): scores
scaled by the model width, by the head count, twice, or by a number that changes from call to call. Moved
out of :mod:`.masks` (lib15) when it reached the engine's 600-line limit."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic


def scale(analysis: Analysis) -> list[Diagnostic]:
    """Scores scaled by 1/√D (the model width) or by 1/√H (the head count, timm's ``Attention2d``) instead of
    1/√d_k (one head's width), or queries scaled by 1/√d_k before an SDPA that scales them again: warnings."""
    return _scale_by_model_width(analysis) or _scale_by_head_count(analysis) or _scaled_twice(analysis) or \
        _scores_scaled_twice(analysis) or _scale_that_changes(analysis)


def _scores_scaled_twice(analysis: Analysis) -> list[Diagnostic]:
    """A plain product's scores scaled by 1/√w (w: the width the product sums over) when they, or the queries
    on their way into the product, were already scaled by 1/√w (``scores * self.scale * self.scale``; the
    queries scaled and their scores again): 1/w in all. One scaling by another number (Gemma 2's
    ``query_pre_attn_scalar``, which is 1/w at some sizes) is a choice of scale, not read here; nor the
    queries and keys each scaled by 1/w^¼ (Nystromformer): neither factor is 1/√w."""
    rows = {e.index: e for e in analysis.events}
    for n, s in enumerate(analysis.scalings):
        w = _contracted_width(analysis, s) if s["on"] == "scores" else None
        if not w or abs(s["factor"] * math.sqrt(w) - 1) > 1e-3 or s["event"] not in rows:
            continue
        way = {s["event"]} | _queries_way(rows, rows[s["event"]])   # (a scaling is kept at the last row before it)
        before = [t for t in analysis.scalings[:n] if t["event"] in way
                  and t["on"] in ("scores", "q") and abs(t["factor"] * math.sqrt(w) - 1) < 1e-3]
        if before:
            earlier = "twice" if before[0]["on"] == "scores" else \
                f"after their queries were scaled by it (after #{before[0]['event']})"
            return [Kind.SCALE_NOT_HEAD_DIM.found(s["event"], (
                f"the scores of #{s['event']} are scaled by 1/√{w} = {s['factor']:.4g} ({w}: the width their "
                f"product sums over) {earlier}: 1/{w} in all, and the softmax is sharper than intended by √{w}."),
                "Scale once: scores * head_dim ** -0.5.")]
    return []


#: rows that only move or regroup the queries on their way into the scores' product
_MOVES = frozenset({Family.RESHAPE, Family.AXIS_ORDER, Family.CONTIGUOUS, Family.SIZE_ONE_AXIS})


def _queries_way(rows: dict, product) -> set[int]:
    """The rows the queries of a scores product came through while only moved (views, transposes), and the row
    that made them (their projection: a scaling of the queries is kept at it). Empty where ``product`` is not a
    product; never further back (a decode step's queries come from the step before, through its projections)."""
    seen: set[int] = set()
    if not product.spec.matrix_product or not product.sources or product.sources[0] is None:
        return seen
    made = rows.get(product.sources[0][0])
    while made is not None and len(seen) < 8:
        seen.add(made.index)
        if made.spec.family not in _MOVES or not made.sources or made.sources[0] is None:
            break
        made = rows.get(made.sources[0][0])
    return seen


def _scale_that_changes(analysis: Analysis) -> list[Diagnostic]:
    """One line of one module's code scaling its scores by numbers that differ from one call to the next
    (FlagGems issue #409: ``qk_scale *= 1.44269504`` written back inside the loop over blocks of keys, so each
    later block's logits are scaled once more). Each call's scalings are compared whole, in order (a softcap's
    ``/ 30`` then ``* 30`` are the same every call); layers that scale differently on purpose (GPT-2's
    ``scale_attn_by_inverse_layer_idx``) are other modules, and are not compared."""
    calls: dict[int, list[dict]] = {}
    for s in analysis.scalings:
        if s["on"] == "scores":
            calls.setdefault(s["event"], []).append(s)
    first: dict[tuple[str, str], list[dict]] = {}
    rows = {e.index: e for e in analysis.events}   # (a trace kept to one module holds only some rows)
    for index, found in calls.items():
        e = rows.get(index)
        if e is None:
            continue
        seen = first.setdefault((e.source, e.module), found)
        if len(seen) != len(found):
            continue
        for a, b in zip(seen, found):
            if abs(b["factor"] - a["factor"]) > 1e-6 * max(abs(a["factor"]), 1e-12):
                return [Kind.SCALE_NOT_HEAD_DIM.found(b["event"], (
                    f"the scores made at {e.source} are scaled by {a['factor']:.4g} after #{a['event']} and by "
                    f"{b['factor']:.4g} after #{b['event']}: one line of code, a scale that changes from call to "
                    "call (a scale written back inside a loop over blocks of keys scales each later block once "
                    "more)."), "Compute the scale once, outside the loop, and do not assign the scaled value back.")]
    return []


def _scale_by_head_count(analysis: Analysis) -> list[Diagnostic]:
    """A plain product's scores, summed over d_k, scaled by 1/√H where H != d_k (pytorch-image-models issue
    #2385: ``self.scale = num_heads ** -0.5``)."""
    H, d_k = analysis.dims.get("H"), analysis.dims.get("d_k")
    if not H or not d_k or H == d_k:
        return []
    for s in analysis.scalings:
        if abs(s["factor"] * math.sqrt(H) - 1) < 1e-3 and _contracted_width(analysis, s) == d_k:
            return [Kind.SCALE_NOT_HEAD_DIM.found(s["event"], (
                f"the scores are scaled by 1/√{H} = {s['factor']:.4g}, the number of heads H; attention divides "
                f"by √d_k = √{d_k} (the width each query and key is summed over), {1 / math.sqrt(d_k):.4g}."),
                "Use head_dim ** -0.5 (scores / math.sqrt(d_k)).")]
    return []


def _scaled_twice(analysis: Analysis) -> list[Diagnostic]:
    """Queries multiplied by 1/√w (w: their own width) on their way into an ``F.scaled_dot_product_attention``
    called without ``scale``, which divides by √w again (maxtext issue #3138: MLA's pre-scaled queries handed
    to a fused kernel): the scores are scaled by 1/w. The way in is followed through ops that only move or
    regroup the queries (one operand, the same number of entries)."""
    on_q = [s for s in analysis.scalings if s["on"] == "q"]
    if not on_q:
        return []
    for e in analysis.events_of(Family.FUSED_ATTENTION):
        if e.params.get("scale") is not None or not e.inputs or not e.inputs[0].shape:
            continue
        width = e.inputs[0].shape[-1]
        way_in = _way_in(analysis, e)
        for s in on_q:
            if s["event"] in way_in and abs(s["factor"] * math.sqrt(width) - 1) < 1e-3:
                return [Kind.SCALE_NOT_HEAD_DIM.found(e.index, (
                    f"the queries of {e.op} #{e.index} were already multiplied by 1/√{width} = {s['factor']:.4g} "
                    f"(after #{s['event']}), and {e.op} called without scale= divides by √{width} again: the "
                    f"scores are scaled by 1/{width}, and the softmax is sharper than intended by √{width}."),
                    "Drop the queries' own scaling, or pass scale=1.0 to scaled_dot_product_attention.")]
    return []


def _way_in(analysis: Analysis, event, depth: int = 8) -> set[int]:
    """The rows the first operand of ``event`` came through: each source back while it only moved or regrouped
    one operand's entries (views, transposes, copies), the first row that computed it included."""
    seen: set[int] = set()
    rows = {e.index: e for e in analysis.events}   # (a trace kept to one module holds only some rows)
    source = event.sources[0] if event.sources else None
    while source is not None and depth and source[0] in rows:
        made = rows[source[0]]
        seen.add(made.index)
        depth -= 1
        if len(made.inputs) != 1 or not made.outputs or \
                math.prod(made.inputs[0].shape) != math.prod(made.outputs[0].shape):
            break
        source = made.sources[0] if made.sources else None
    return seen


def _scale_by_model_width(analysis: Analysis) -> list[Diagnostic]:
    """Scores scaled by 1/√D (the model width) instead of 1/√d_k (one head's width)."""
    D, d_k = analysis.dims.get("D"), analysis.dims.get("d_k")
    if not D or not d_k or D == d_k:
        return []
    for s in analysis.scalings:
        if abs(s["factor"] * math.sqrt(D) - 1) < 1e-3 and _contracted_width(analysis, s) in (None, d_k):
            return [Kind.SCALE_NOT_HEAD_DIM.found(s["event"], (
                f"the {'scores are' if s['on'] == 'scores' else s['on'] + ' is'} scaled by 1/√{D} = "
                f"{s['factor']:.4g}, the model width D; attention divides by √d_k = √{d_k} (one head's width), "
                f"{1 / math.sqrt(d_k):.4g}. With √D the softmax is flatter than intended by a factor "
                f"√H = {math.sqrt(D / d_k):.3g}."), "Use scores / math.sqrt(d_k).")]
    return _fused_scale_by_model_width(analysis, D, d_k)


def _fused_scale_by_model_width(analysis: Analysis, D: int, d_k: int) -> list[Diagnostic]:
    """A fused attention given ``scale=1/√D`` for queries one head (d_k) wide: uni2ts-style
    ``scaled_dot_product_attention(q, k, v, scale=dim ** -0.5)``. Heads as wide as the model keep it."""
    for e in analysis.events_of(Family.FUSED_ATTENTION):
        given = e.params.get("scale")
        if not isinstance(given, (int, float)) or not e.inputs or not e.inputs[0].shape or \
                e.inputs[0].shape[-1] != d_k or abs(given * math.sqrt(D) - 1) >= 1e-3:
            continue
        return [Kind.SCALE_NOT_HEAD_DIM.found(e.index, (
            f"{e.op} #{e.index} is given scale={given:.4g}, 1/√{D} (the model width D), for queries and keys "
            f"{d_k} wide (one head, d_k); attention divides by √d_k, {1 / math.sqrt(d_k):.4g}. With √D the "
            f"softmax is flatter than intended by a factor √H = {math.sqrt(D / d_k):.3g}."),
            "Leave scale= out (it defaults to 1/√d_k) or pass head_dim ** -0.5.")]
    return []


def _contracted_width(analysis: Analysis, scaling: dict) -> int | None:
    """The width the scaled scores' product summed over (``q @ k.transpose(-2, -1)``: q's last axis), or None
    where the scaling is not on a plain product's scores. Heads as wide as the model (MEGABYTE's global model,
    ``P·D`` split into H heads of ``P·D/H``, which is D where P = H) are rightly scaled by 1/√D. Scores masked
    before they are scaled (``masked_fill_`` then ``/ keys.shape[-1] ** 0.5``, the LLMs-from-scratch book's
    ``CausalAttention``) are read back through the fill to their product."""
    rows = {e.index: e for e in analysis.events}
    e = rows.get(scaling["event"])
    for _ in range(4):   # back through fills and adds that keep the scores' shape
        if e is None or e.spec.matrix_product or e.spec.family not in (Family.MASK_FILL, Family.ELEMENTWISE) or \
                not e.sources or not e.sources[0] or not e.outputs or e.inputs[0].shape != e.outputs[0].shape:
            break
        e = rows.get(e.sources[0][0])
    if e is None or scaling["on"] != "scores" or not e.spec.matrix_product or len(e.inputs) != 2:
        return None
    a, b = e.inputs[0].shape, e.inputs[1].shape
    return a[-1] if len(a) >= 2 and len(b) >= 2 and a[-1] == b[-2] else None
