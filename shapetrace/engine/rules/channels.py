"""Attention over channels: a feature-by-feature product that sums over the tokens (``q [B, H, d, N] @ kᵀ
[B, H, N, d]``), a softmax over its features, and weights that then mix each token's features of the values
(``attn [B, H, d, d] @ v [B, H, d, N]``): cross-covariance attention (timm's ``XCA``, El-Nouby et al. 2021,
"XCiT"), whose cosine step normalises each channel's row over the tokens, the axis its product sums over.

A softmax over a feature axis of a ``d x d`` product that weighs no values that way is a slip (the scores of
``[B, H, d, T]`` tensors permuted one step too far): ``attends-over-features``, an error. Where the weights do
mix the values' features per token, the same layout is the published design, or q, k and v all permuted by one
slip; nothing torch records tells the two apart, so it is a note that leaves the verdict unproven
(``attends-over-channels``), never an error on XCiT and never a ``✓``.

Reads: softmax and product events, their recorded ``dim``, the labels and roles of their operands, and which
later rows read each result (``Event.sources``). Adds: ``attends-over-features`` errors and
``attends-over-channels`` notes; :func:`sums_over` tells the normalisation rule what a product sums over.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from shapetrace.engine.axis_compute import einsum_contracted
from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family, contracts_by_subscripts, family_of, is_matrix_product

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic
    from shapetrace.engine.events import Event

FEATURE_ROLES = ("head_features", "features")


def contracted_pairs(e: Event) -> list[tuple[str | None, str | None]]:
    """The labels of the axes a matrix product or a two-operand einsum sums over, one pair per summed axis."""
    if is_matrix_product(e.spec) and len(e.inputs) == 2:
        a, b = e.inputs
        la = a.dims[-1] if a.dims else None
        lb = b.dims[-2] if len(b.dims) > 1 else (b.dims[0] if b.dims else None)
        return [(la, lb)]
    parsed = e.params.get("subscripts")
    if contracts_by_subscripts(e.spec) and len(e.inputs) == 2 and parsed and len(parsed["inputs"]) == 2:
        lhs = parsed["inputs"]
        if any(len(term) != len(t.dims) for term, t in zip(lhs, e.inputs)):
            return []
        return [(e.inputs[0].dims[lhs[0].index(c)], e.inputs[1].dims[lhs[1].index(c)])
                for c in einsum_contracted(parsed) if c in lhs[0] and c in lhs[1]]
    return []


def readers(events) -> dict[int, list[tuple[Event, int]]]:
    """Event index -> ``(event, operand position)`` of each later row that reads one of its results."""
    found: dict[int, list[tuple[Event, int]]] = {}
    for e in events:
        for position, source in enumerate(e.sources):
            if source is not None:
                found.setdefault(source[0], []).append((e, position))
    return found


def first_product(start: Event, reading) -> tuple[Event, int] | None:
    """The first matrix product or einsum that reads what ``start`` made, directly or through other rows
    (views, scaling), and the operand it reads it as."""
    seen, queue = {start.index}, deque([start.index])
    while queue:
        for e, position in reading.get(queue.popleft(), ()):
            if family_of(e.op) is Family.PRODUCT and contracted_pairs(e):
                return e, position
            if e.index not in seen:
                seen.add(e.index)
                queue.append(e.index)
    return None


def sums_over(start: Event, reading) -> set[str]:
    """The labels the first product reading ``start`` sums over (empty where none is found)."""
    found = first_product(start, reading)
    return {lab for pair in contracted_pairs(found[0]) for lab in pair if lab} if found else set()


def weighs_channels(analysis: Analysis, e: Event, label: str, reading) -> Event | None:
    """The product with which the weights ``e`` made (normalised over ``label``, a feature axis) mix the
    values' features: it sums ``label`` against a feature axis of the other operand, and its result keeps a
    token axis."""
    found = first_product(e, reading)
    if found is None:
        return None
    product, _ = found
    role = analysis.namer.plain_role
    pairs = contracted_pairs(product)
    summed = any(label in (la, lb) and {role(la), role(lb)} <= set(FEATURE_ROLES) for la, lb in pairs)
    keeps_tokens = any(role(lab) == "tokens" for o in product.outputs[:1] for lab in o.dims if lab)
    return product if summed and keeps_tokens else None


def attention_over_features(analysis: Analysis) -> list[Diagnostic]:
    """A softmax over a feature axis of a feature-by-feature product (``qᵀ @ q`` after a permute): an error
    where the weights mix no values' features per token, a note where they do (attention over channels)."""
    out = []
    reading = readers(analysis.events)
    for e in analysis.events_of(Family.SOFTMAX):
        if not e.inputs or e.params.get("dim") is None:
            continue
        t = e.inputs[0]
        dim = e.params["dim"] % len(t.shape)
        roles = [analysis.namer.role(lab) if lab else None for lab in t.dims]
        if roles[dim] not in FEATURE_ROLES or roles.count(roles[dim]) < 2:
            continue
        product = weighs_channels(analysis, e, t.dims[dim], reading)
        if product is not None:
            o = product.outputs[0]
            out.append(Kind.ATTENDS_OVER_CHANNELS.found(e.index, (
                f"{e.op} #{e.index} normalises {fmt_named(t.dims, t.shape)} over {t.dims[dim]}, a feature axis of "
                f"a {t.dims[dim]} × {t.dims[dim]} product that summed over the tokens, and {product.op} "
                f"#{product.index} mixes each token's features of the values with the weights "
                f"({fmt_named(o.dims, o.shape)}): attention over channels (cross-covariance attention, XCiT), by "
                "design or by one slip in the layout of q, k and v; the run cannot say which."),
                "Nothing to change for cross-covariance attention; for attention over tokens, lay q, k and v out "
                "[B, H, T, d_k] and multiply q @ k.transpose(-2, -1)."))
            continue
        out.append(Kind.ATTENDS_OVER_FEATURES.found(e.index, (
            f"{e.op} #{e.index} normalises {fmt_named(t.dims, t.shape)} over {t.dims[dim]}, a feature axis "
            f"of a {t.dims[dim]} × {t.dims[dim]} product: the tokens were summed away, so each weight row "
            "mixes features, not tokens."),
            "Attention scores are [.., T, T]: q @ k.transpose(-2, -1) on [B, H, T, d_k] tensors.",
            blame=((0, dim),)))
    return out
