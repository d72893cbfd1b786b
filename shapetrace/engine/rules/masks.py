"""Diagnostic rules for masks, NaN rows and failed views (part of ``diagnose.RULES``).

``mask-wrong-axis`` and ``view-incompatible`` read the recorded events (the latter explained by
issue 3's :mod:`shapetrace.engine.viewfail`);
``nan-rows`` reads ``analysis.nan_rows``: the rows read from real values after the run (``None``,
with ``analysis.value_note`` saying why, when none could be read: the meta device).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from shapetrace.engine.axes import base_names, coalesce, cut_from
from shapetrace.engine.diagnostic import Diagnostic
from shapetrace.engine.formatting import fmt_named, spelled
from shapetrace.engine.kinds import Kind
from shapetrace.engine.op_args import baddbmm_operands
from shapetrace.engine.ops import ATTENTION_FAMILIES, Family, fails_on_strides
from shapetrace.engine.rules.indices import told_by_size
from shapetrace.engine.rules.scales import scale
from shapetrace.engine.vocabulary import Role

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.events import Event

#: a fill at or below this hides a score from softmax (-1e9, -10000, finfo.min, -inf all do)
HIDING_FILL = -1e4


def hides(value) -> bool:
    """Does filling a score with ``value`` remove it from the softmax?"""
    return isinstance(value, (int, float)) and value <= HIDING_FILL


def mask_axis(analysis: Analysis) -> list[Diagnostic]:
    """A mask that varies along the queries and is broadcast over the keys (a padding mask put on
    the wrong axis): it hides whole query rows instead of key columns."""

    out = []
    for e in analysis.events_of(Family.MASK_FILL, Family.ELEMENTWISE):
        family = e.spec.family
        filled = family is Family.MASK_FILL and hides(e.params.get("value"))
        added = family is Family.ELEMENTWISE and e.params.get("hides")   # an additive mask (ops.SCORE_ADD)
        if not (filled or added) or len(e.inputs) < 2:
            continue  # only masks that hide scores (a large negative); zeroing whole rows afterwards is on purpose
        scores, mask = e.inputs[0], e.inputs[1]
        if added and "key" not in {a.role for a in scores.axes}:
            scores, mask = mask, scores
        roles = [a.role for a in scores.axes]
        if "query" not in roles or "key" not in roles:
            continue
        lead = len(scores.shape) - len(mask.shape)
        q, k = roles.index("query") - lead, roles.index("key") - lead
        q_label = (mask.dims[q] if 0 <= q < len(mask.dims) else None) or scores.dims[q + lead] or "query"
        varies = varying_shape(mask)
        q_size = varies[q] if 0 <= q < len(varies) else 1
        k_size = varies[k] if 0 <= k < len(varies) else 1
        part = _query_only_part(analysis, e, e.inputs.index(mask), q - len(mask.shape), k - len(mask.shape))
        if q_size > 1 and k_size == 1:
            out.append(Kind.MASK_WRONG_AXIS.found(e.index, (
                f"{e.op} #{e.index} broadcasts the mask {fmt_named(mask.dims, mask.shape)} against the scores "
                f"{fmt_named(scores.dims, scores.shape)}: its {q_label} axis lines up with the queries and it is "
                "broadcast over the keys, so it hides whole query rows while every query still attends to "
                "the padding keys."), KEY_PADDING_FIX))
        elif _over_every_key(scores, mask, k + lead, varies):
            out.append(_one_value_per_row(e, scores, mask, k))
        elif part is not None:
            out.append(_part_on_the_queries(e, part, mask, fmt_named(scores.dims, scores.shape)))
        else:   # (names from sizes alone cannot tell two equal lengths apart: see _built_for_another)
            out.extend(_built_for_another(analysis, e, mask, {"query": (q, scores.axes[q + lead]),
                                                              "key": (k, scores.axes[k + lead])},
                                          fmt_named(scores.dims, scores.shape), reorders=False))
    return out + _fused_mask_on_queries(analysis) + _fused_mask_built_for_another(analysis) + \
        _base_built_for_another(analysis)


def _base_built_for_another(analysis: Analysis) -> list[Diagnostic]:
    """``baddbmm(mask, q, kᵀ)``'s base (diffusers' ``get_attention_scores``) against the scores it is added to:
    a mask padded to the keys' length from another attention's tokens (``F.pad`` of the image tokens' mask onto
    the text keys) lines up by size alone."""
    out = []
    for e in analysis.events:
        if e.spec.operands is not baddbmm_operands or len(e.inputs) != 3 or not e.outputs:
            continue
        scores, mask = e.outputs[0], e.inputs[2]
        roles = [a.role for a in scores.axes]
        if "query" not in roles or "key" not in roles or len(mask.shape) > len(scores.shape):
            continue
        lead = len(scores.shape) - len(mask.shape)
        q, k = roles.index("query"), roles.index("key")
        out.extend(_built_for_another(analysis, e, mask, {"query": (q - lead, scores.axes[q]),
                                                          "key": (k - lead, scores.axes[k])},
                                      fmt_named(scores.dims, scores.shape), reorders=False))
    return out


def _over_every_key(scores, mask, key: int, varies: tuple[int, ...]) -> bool:
    """Is a hiding mask that varies (along the batch, say) broadcast over the scores' keys, more than one,
    along the queries too (a decode step's one query)? It adds one value to every key of a row: it hides all
    of them or none, so it cannot hide the padding keys it was made for. ``key``: the scores' key axis."""
    k = key - (len(scores.shape) - len(mask.shape))
    return scores.shape[key] > 1 and any(v > 1 for v in varies) and all(
        v == 1 for j, v in enumerate(varies) if j >= k - 1)


def _one_value_per_row(e, scores, mask, k: int) -> Diagnostic:
    label = mask.dims[k] if 0 <= k < len(mask.dims) and mask.dims[k] else None
    held = f" (its key axis holds {label}, a part of the keys)" if label else ""
    return Kind.MASK_WRONG_AXIS.found(e.index, (
        f"{e.op} #{e.index} broadcasts the mask {fmt_named(mask.dims, mask.shape)} over the keys of the scores "
        f"{fmt_named(scores.dims, scores.shape)}{held}: each query row gets one value on every key, so the mask "
        "hides all of a row's keys or none of them, never the padding keys alone."),
        "Give the mask one column per key, the cached ones included: mask[:, None, None, :] over all the keys "
        "the scores have.")


def _fused_mask_on_queries(analysis: Analysis) -> list[Diagnostic]:
    """SDPA's ``attn_mask`` ``[..., L, S]``, or a part of it, that varies along the queries (L) and is
    broadcast over the keys (S): its axes are told by position, so no name is needed."""
    out = []
    for e in analysis.events_of(Family.FUSED_ATTENTION):
        if not e.params.get("has_mask") or len(e.inputs) < 4 or len(e.inputs[3].shape) < 2:
            continue
        q, k, mask = e.inputs[0], e.inputs[1], e.inputs[3]
        scores = f"[..., {q.dims[-2]}={q.shape[-2]}, {k.dims[-2]}={k.shape[-2]}]"
        varies = varying_shape(mask)
        whole = varies[-2] > 1 and varies[-1] == 1
        part = tuple(mask.shape) if whole else _query_only_part(analysis, e, 3, -2, -1)
        if part is not None:
            out.append(_part_on_the_queries(e, part, mask, scores))
    return out


def _fused_mask_built_for_another(analysis: Analysis) -> list[Diagnostic]:
    """SDPA's ``attn_mask`` ``[..., L, S]`` against its queries ``[..., L, E]`` and keys ``[..., S, E]``."""
    out = []
    for e in analysis.events_of(Family.FUSED_ATTENTION):
        if not e.params.get("has_mask") or len(e.inputs) < 4 or min(len(t.shape) for t in e.inputs[:2]) < 2:
            continue
        q, k, mask = e.inputs[0], e.inputs[1], e.inputs[3]
        if len(mask.shape) < 2:
            continue
        scores = f"[..., {q.dims[-2]}={q.shape[-2]}, {k.dims[-2]}={k.shape[-2]}]"
        n = len(mask.shape)
        out.extend(_built_for_another(analysis, e, mask, {"query": (n - 2, q.axes[-2]), "key": (n - 1, k.axes[-2])},
                                      scores))
    return out


def varying_shape(t) -> tuple[int, ...]:
    """``t``'s shape with 1 along each axis it is broadcast over in memory (stride 0: every entry the same
    element): ``mask.view(B, 1, T, 1).expand_as(scores)`` varies along the queries alone, as its view did."""
    return tuple(1 if stride == 0 else size for size, stride in zip(t.shape, t.stride))


KEY_PADDING_FIX = "A key-padding mask [B, T] goes to [B, 1, 1, T]: mask[:, None, None, :]."


def _query_only_part(analysis: Analysis, e, operand: int, q: int, k: int) -> tuple[int, ...] | None:
    """The shape of a part of a combined mask (:mod:`~shapetrace.engine.mask_parts`) that varies along the
    queries and is broadcast over the keys, when no other part varies along the keys alone (a padding
    mask put on the query axis beside a causal triangle); None otherwise. ``q``, ``k``: the query and key
    axes, counted from the end (the parts are right-aligned, as broadcasting aligns them)."""
    parts = analysis.mask_parts.get(e.index, {}).get(operand, ())

    def size(shape, axis):
        return shape[axis] if len(shape) >= -axis else 1

    on_queries = [p for p in parts if size(p, q) > 1 and size(p, k) == 1]
    on_keys = [p for p in parts if size(p, q) == 1 and size(p, k) > 1]
    return on_queries[0] if on_queries and not on_keys else None


def _part_on_the_queries(e, part: tuple[int, ...], mask, scores: str) -> Diagnostic:
    """The finding for a mask, or a part of a combined one, that lines up with the queries only."""
    named = fmt_named(mask.dims, mask.shape)
    whole = part == tuple(mask.shape)
    what = (f"the mask {named}, which varies along the queries and is broadcast over the keys" if whole
            else f"the mask {named}, combined from parts; the part [{', '.join(map(str, part))}] varies along the "
                 "queries and is broadcast over the keys, and no part hides keys alone")
    return Kind.MASK_WRONG_AXIS.found(e.index, (
        f"{e.op} #{e.index} hides scores {scores} with {what} (a padding mask put on the query axis): it hides "
        "whole query rows while every query still attends to the padding keys."), KEY_PADDING_FIX)


_PLURAL = {"query": "queries", "key": "keys"}


def _own_mask(side: str, queries: str | None, keys: str | None) -> str:
    """The fix: a mask built from this attention's own tokens (a causal one only for self-attention)."""
    own = queries if side == "query" else keys
    masks = f"a padding mask [B, 1, 1, {keys}]" + (f" or a causal mask [{queries}, {keys}]" if queries == keys else
                                                   f" over the {keys} keys")
    return f"Give this attention a mask built from its own {_PLURAL[side]}, the {own} tokens: {masks}."


def _tokens_of(analysis: Analysis, axis) -> tuple[str, ...] | None:
    """The token roots an axis is made of, when every piece of it is named and indexes tokens."""
    roots = tuple(a.root for a in coalesce(axis.atoms))
    if not roots or any(analysis.namer.plain_role(r) != "tokens" for r in roots):
        return None
    return roots


def _told_apart_by_size(analysis: Analysis, roots: tuple[str, ...]) -> bool:
    """Where names were given by sizes alone, do these token names still tell their axes apart? Each is a
    declared name (or a sum of them, ``T+S``) whose size no other declared name has, and no seed chose it
    between two of equal size."""
    sizes = list(analysis.dims.values())
    names = [name for root in roots for name in base_names(root)]   # T+S: T and S; T[-1:]: T
    return not told_by_size(analysis, *roots) and all(
        n.isdigit() or (n in analysis.dims and sizes.count(analysis.dims[n]) == 1) for n in names)


def _summands(roots: tuple[str, ...]) -> list[str]:
    """The token groups an axis joins, in order: ``("T+S",)`` -> ``["T", "S"]``."""
    return [term for root in roots for term in root.split("+")]


def _built_for_another(analysis: Analysis, e, mask, at: dict, scores: str, reorders: bool = True) -> list[Diagnostic]:
    """A mask whose query or key axis (not broadcast) holds another sequence's tokens than the scores'
    (the encoder's padding mask on the decoder's self-attention, the target's causal mask on
    cross-attention; a mask joined ``cat([image, text])`` on keys joined ``cat([text, image])``): it lines up
    only because the two lengths are equal. Names prove it, never sizes: where the names were given by sizes
    alone (no input named), only names of sizes no other declared name has are read.
    ``at``: for ``"query"`` and ``"key"``, the mask's axis and the scores' axis it lines up with.
    ``reorders``: say so of a joined mask whose parts are in another order than the scores' (False for an
    elementwise op, where ``broadcast-mismatch`` already says it; SDPA's ``attn_mask`` has no such rule)."""
    labels = {side: analysis.namer.label(axis) for side, (_, axis) in at.items()}
    for side, (i, theirs) in at.items():
        if not 0 <= i < len(mask.axes) or mask.shape[i] == 1:
            continue
        mine, their_roots = _tokens_of(analysis, mask.axes[i]), _tokens_of(analysis, theirs)
        if mine is None or their_roots in (None, mine):
            continue
        if analysis.seeded_by_size and not _told_apart_by_size(analysis, mine + their_roots):
            continue
        parts, their_parts = _summands(mine), _summands(their_roots)
        if len(parts) > 1 and sorted(parts) == sorted(their_parts):
            if not reorders:
                continue
            return [Kind.MASK_WRONG_AXIS.found(e.index, (
                f"{e.op} #{e.index} lines up the mask {fmt_named(mask.dims, mask.shape)} with the scores {scores}: "
                f"the mask's {side} axis ({i - len(mask.shape)}) joins {' then '.join(parts)} tokens where the "
                f"scores' {_PLURAL[side]} join {' then '.join(their_parts)}, so each part of the mask lies on "
                f"other tokens than its own and it hides the wrong tokens."),
                f"Join the mask's parts in the order its {_PLURAL[side]} were joined: {labels[side]}.")]
        return [Kind.MASK_WRONG_AXIS.found(e.index, (
            f"{e.op} #{e.index} lines up the mask {fmt_named(mask.dims, mask.shape)} with the scores {scores}: the "
            f"mask's {side} axis ({i - len(mask.shape)}) holds {mask.dims[i]} tokens where the scores' "
            f"{_PLURAL[side]} are {labels[side]}, so the mask was built for another attention and lines up only "
            f"because {mask.dims[i]} and {labels[side]} have the same length here: it hides the wrong tokens."),
            _own_mask(side, labels["query"], labels["key"]))]
    return []


def nan_rows(analysis: Analysis) -> list[Diagnostic]:
    """Attention rows that came out NaN: a query with every key masked."""

    rows = analysis.nan_rows
    note = analysis.value_note
    where = analysis.nan_event
    if where is None:
        where = next((e.index for e in analysis.events if e.spec.family in ATTENTION_FAMILIES), None)
    if rows is None:
        if note:
            return [Kind.NAN_ROWS_SKIPPED.found(None, note)]
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
    return [Kind.NAN_ROWS.found(where, (
        f"{what}. Every key of these queries is "
        "masked, so softmax computes exp(-inf) / sum(exp(-inf)) = 0 / 0. The NaN then spreads into "
        "the output and, in training, into every gradient."), (
        "Fix: give every query one visible key (pad on the right with a causal mask), or zero the fully "
        "masked rows after softmax (--safe-softmax shows it; F.scaled_dot_product_attention in this torch "
        "returns zeros for such rows)."))]


def view_incompatible(analysis: Analysis) -> list[Diagnostic]:
    """A view that raised because the strides cannot express the merge (explained by
    :func:`shapetrace.engine.viewfail.view_error_parts`, from the input's recorded strides)."""
    from shapetrace.engine.viewfail import requested_shape, view_error_parts

    out = []
    for e in analysis.events_where(fails_on_strides):
        if not e.error or VIEW_ERROR not in e.error or not e.inputs:
            continue
        target = requested_shape(e)
        why, fix = view_error_parts(e.inputs[0], target, analysis.namer) if target else ("", "")
        out.append(Kind.VIEW_INCOMPATIBLE.found(e.index,
                              f"{e.op} #{e.index} raised: {why or 'these strides cannot express the new shape.'}",
                              fix or UNCHECKED_FIX))
    return out


VIEW_ERROR = "view size is not compatible"
#: the advice when the shape asked for was not recorded, so no copying fix could be applied and checked
UNCHECKED_FIX = ("The shape asked for was not recorded, so no fix was checked: .contiguous() (or .reshape) copies "
                 "the values in their current axis order, which is right only if the new shape reads them in that "
                 "order; otherwise transpose or permute first.")


def mask_batch_order(analysis: Analysis) -> list[Diagnostic]:
    """A mask tiled over heads as H·B (``mask.repeat(H, 1, 1)``), or a bias folded so (Bloom's ALiBi transposed
    to ``[H, B, T]`` before ``reshape(batch_size * num_heads, 1, T)``), against scores batched as B·H."""
    out = []
    for e, scores, mask, what in _laid_on_scores(analysis):
        if len(scores.axes) != len(mask.axes):
            continue
        for j, (sa, ma) in enumerate(zip(scores.axes, mask.axes)):
            s_roots, m_roots = [a.root for a in coalesce(sa.atoms)], [a.root for a in coalesce(ma.atoms)]
            if sa.size != ma.size or len(s_roots) < 2 or len(m_roots) < 2 or "B" not in s_roots or "B" not in m_roots:
                continue
            if s_roots.index("B") != m_roots.index("B"):
                out.append(_batch_order(e, scores, mask, j, what, s_roots.index("B") == 0))
                break
    return out


def _laid_on_scores(analysis: Analysis):
    """``(event, scores, mask or bias, "mask" or "bias")`` for each fill, each write through a boolean mask of the
    written tensor's shape (d2l's ``X[~mask] = -1e6``), and each product with a base."""
    for e in analysis.events:
        if e.spec.family is Family.MASK_FILL and len(e.inputs) >= 2 or _written_through_a_mask(e):
            yield e, e.inputs[0], e.inputs[1], "mask"
        elif e.spec.operands is baddbmm_operands and len(e.inputs) == 3 and e.outputs:
            yield e, e.outputs[0], e.inputs[2], "bias"


def _written_through_a_mask(e: Event) -> bool:
    """``x[mask] = value`` with a boolean ``mask`` of ``x``'s own shape: a fill, entry by entry."""
    return e.spec.write == "index" and len(e.inputs) >= 2 and e.inputs[1].dtype == "bool" \
        and e.inputs[1].shape == e.inputs[0].shape


def _batch_order(e: Event, scores, mask, j: int, what: str, batch_first: bool = True) -> Diagnostic:
    if what == "mask":   # (scores folded B·H take the mask's copies of a sequence together; H·B, its copies apart)
        return Kind.MASK_WRONG_BATCH_ORDER.found(e.index, (
            f"{e.op} #{e.index} lines up the mask {fmt_named(mask.dims, mask.shape)} with the scores "
            f"{fmt_named(scores.dims, scores.shape)}: axis {j} of the scores counts "
            f"{'batch entries' if batch_first else 'heads'} first{_named(scores, j)}, but the mask was tiled with "
            + ("its copies first" if batch_first else "each sequence's copies side by side")
            + f"{_named(mask, j)}, so sequence b's mask lands on another sequence's heads."),
            "Tile it in the same order: " + (
                "mask.repeat_interleave(H, dim=0), not mask.repeat(H, 1, 1)." if batch_first else
                "mask.repeat(H, 1, 1) (copies outermost, as the scores fold the heads), not "
                "mask.repeat_interleave(H, dim=0)."))
    pieces = "·".join(a.root for a in coalesce(mask.axes[j].atoms))
    return Kind.MASK_WRONG_BATCH_ORDER.found(e.index, (
        f"{e.op} #{e.index} adds the bias {fmt_named(mask.dims, mask.shape)} to the scores "
        f"{fmt_named(scores.dims, scores.shape)}: axis {j} of the scores counts batch entries first"
        f"{_named(scores, j)}, but the bias folds them in another place ({pieces}), so entry b·H + h of the scores "
        "gets the bias of another sequence and another head."),
        "Fold the bias batch first: build it [B, H, ...] and reshape(B * H, ...) without a transpose, or widen a "
        "[H, ...] table with repeat(B, 1, 1), not repeat_interleave(B, 0).")


def _named(t, j: int) -> str:
    """`` (B·H)``: axis ``j``'s name in parentheses, nothing where it has none (never ``(None)``)."""
    return f" ({spelled(t.dims[j])})" if t.dims[j] else ""


def mask_hides_every_key(analysis: Analysis) -> list[Diagnostic]:
    """A mask (filled with a large negative, added, or given to ``torch.where``) under which a whole
    batch entry has no key left to attend to: its polarity is reversed (read on the values)."""
    out = []
    for e in analysis.events_of(Family.MASK_FILL, Family.ELEMENTWISE):
        blind = e.params.get("hides_every_key")
        hiding = hides(e.params.get("value")) if e.spec.family is Family.MASK_FILL else \
            bool(e.params.get("hides")) or hides(e.params.get("value"))
        if not blind or not hiding or not e.outputs or _keys_elsewhere(analysis, e) or _sliced_by_tokens(analysis, e) \
                or _broadcast_over_keys(e) or _a_later_chunk(analysis, e):
            continue
        o = e.outputs[0]
        out.append(Kind.MASK_HIDES_EVERY_KEY.found(e.index, (
            f"{e.op} #{e.index} hides every key from every query in {blind} slice{'s' * (blind > 1)} of the "
            f"scores {fmt_named(o.dims, o.shape)} (a batch entry, or the whole mask): softmax there spreads "
            "over keys that were all meant to be hidden, as if the mask's polarity were reversed."),
            "Invert it: `(1.0 - mask) * torch.finfo(dtype).min`, or fill where `mask == 0`."))
    return out


def _a_later_chunk(analysis: Analysis, e: Event) -> bool:
    """Are the scores' queries and keys one later chunk of the tokens (``T[12:15]``, ``T[-1:]``: cut from a token
    axis, starting past its first position)? A padded sequence may end before a later chunk begins, and then every key
    of that chunk is padding, hidden from queries that are padding too (CANINE's local attention over chunks of a
    padded batch). Never the first chunk: no sequence ends before its first token, so a slice hidden whole there
    is a reversed polarity still."""
    dims = e.outputs[0].dims[-2:]
    cuts = [cut_from(label) for label in dims]
    return len(cuts) == 2 and all(c is not None and c[1] not in (None, 0)   # (T[-1:]: the last position)
                                  and analysis.namer.role(c[0]) == Role.TOKENS for c in cuts)


def _broadcast_over_keys(e: Event) -> bool:
    """Is the mask broadcast over the scores' keys (``mask-wrong-axis`` says so: :func:`_over_every_key`)?"""
    scores = next((t for t in e.inputs if [a.role for a in t.axes[-2:]] == ["query", "key"]), None)
    masks = [t for t in e.inputs if t is not scores]
    return scores is not None and len(masks) == 1 and _over_every_key(
        scores, masks[0], len(scores.shape) - 1, varying_shape(masks[0]))


def _sliced_by_tokens(analysis: Analysis, e: Event) -> bool:
    """Does the mask change along a token axis in front of the scores' queries and keys? Then its slices
    are tokens, not batch entries: OpenFold's MSA column attention attends over the sequences of each
    residue (scores ``[B, T, H, S, S]``, mask bias ``[B, T, 1, 1, S]``), and a padded residue hides
    every sequence from its own queries, as a padded query's fully hidden row does: no reversed polarity. So does
    a fold of tokens into the batch (lucidrains' alphafold2 axial attention over a pair's rows, scores ``[B·T, H, T,
    T]`` under the pair mask ``m_i & m_j``: a padded row hides every key of its slice).
    Scores with no query or key role (an einsum's ``hcnij``: the MSA Transformer's column attention) are read
    as the record read them: the operand of the output's shape, queries and keys last."""
    scores = next((t for t in e.inputs if {"query", "key"} <= {a.role for a in t.axes}), None) or \
        next((t for t in e.inputs if e.outputs and tuple(t.shape) == tuple(e.outputs[0].shape)), None)
    if scores is None or len(scores.shape) < 3:
        return False
    lead = len(scores.shape) - 2
    for mask in (*(t for t in e.inputs if t is not scores), *e.outputs[:1]):   # (where(mask, ...) names it too)
        start = len(scores.shape) - len(mask.shape)
        for j, (size, label) in enumerate(zip(mask.shape, mask.dims)):
            if start + j < lead and size > 1 and label and (analysis.namer.role(label) == Role.TOKENS or any(
                    analysis.namer.role(a.root) == Role.TOKENS for a in mask.axes[j].atoms)):
                return True
    return False


def _keys_elsewhere(analysis: Analysis, e: Event) -> bool:
    """Does a softmax that reads ``e``'s output normalise over another axis than the last? The mask was
    read at record time as (queries, keys) on the last two axes; Transformer-XL's ``ijbn`` scores keep
    the keys on axis 1 (``softmax(dim=1)``), and there the reading says nothing."""
    rank = len(e.outputs[0].shape)
    for s in analysis.events_of(Family.SOFTMAX):
        if s.index > e.index and s.sources and s.sources[0] == (e.index, 0):
            dim = s.params.get("dim")
            return isinstance(dim, int) and dim % rank != rank - 1
    return False


def mask_after_softmax(analysis: Analysis) -> list[Diagnostic]:
    """A hiding mask (an additive one onto the scores, or a fill at or below :data:`HIDING_FILL`) laid on what a
    ``softmax`` made, through rows that only moved its entries, and read by no later softmax (Nemotron's causal
    mask added one line late). The softmax already spread over every key: the mask hides nothing from it and puts
    large negatives among the probabilities that then weigh the values (after a ``log_softmax``, the weights it
    leaves no longer sum to one). Read from the recorded sources and the key axis the softmax ran over, not from
    sizes; a softmax over anything without a key axis (a sampler's probabilities over a vocabulary) is left alone."""
    rows = {e.index: e for e in analysis.events}
    renormalised = {s.sources[0][0] for s in analysis.events_of(Family.SOFTMAX) if s.sources and s.sources[0]}
    out = []
    for e in analysis.events_of(Family.MASK_FILL, Family.ELEMENTWISE):
        hiding = hides(e.params.get("value")) if e.spec.family is Family.MASK_FILL else bool(e.params.get("hides"))
        if not hiding or e.index in renormalised or len(e.inputs) < 2:
            continue
        made = next((m for m in (_made_by_softmax(rows, source) for source in e.sources[:2]) if m is not None), None)
        if made is None or (e.spec.scaling == "multiplies" and _hidden_before(rows, made)):
            continue   # (zeros laid on weights whose keys were hidden before: they may drop nothing more)
        o, zeros = e.outputs[0], e.spec.scaling == "multiplies"   # (a product's mask hides by its zeros)
        out.append(Kind.MASK_AFTER_SOFTMAX.found(e.index, (
            f"{e.op} #{e.index} lays a mask that hides ("
            f"{'zeros multiplied in' if zeros else f'values at or below {HIDING_FILL:g}'}) on the output of "
            f"{made.op} #{made.index}, {fmt_named(o.dims, o.shape)}: that softmax already spread its weight over "
            "the keys meant to be hidden, so the weights that reach the values are no softmax over the keys left "
            f"({'the weights left sum to less than one' if zeros else 'large negatives where the mask hides'})."),
            "Add the mask to the scores before the softmax: softmax(scores + mask, dim=-1)."))
    return out


def _hidden_before(rows: dict, softmax, depth: int = 4) -> bool:
    """Were the scores ``softmax`` normalised already hidden by a mask (a fill at or below :data:`HIDING_FILL`, an
    additive mask), back through rows of one operand (a scale, a dropout, a copy)? Then zeros multiplied onto its
    weights afterwards (a padding mask laid again to clear the padded rows) may drop no weight the softmax gave:
    which keys each hides is in their values, not compared here, so no error is claimed."""
    source = softmax.sources[0] if softmax.sources else None
    while source is not None and depth and source[0] in rows:
        made = rows[source[0]]
        if made.spec.family is Family.MASK_FILL and hides(made.params.get("value")) or \
                made.spec.family is Family.ELEMENTWISE and made.params.get("hides") and made.spec.additive:
            return True
        source, depth = (made.sources[0] if made.sources else None), depth - 1
    return False


def _made_by_softmax(rows: dict, source, depth: int = 4):
    """The softmax row of attention weights whose output ``source`` is, back through rows that only moved or
    copied one operand's entries (a transpose, a contiguous copy); None if it is anything else."""
    while source is not None and depth and source[0] in rows:
        made = rows[source[0]]
        if made.spec.family is Family.SOFTMAX:   # (attention weights only: their output has a key axis)
            return made if made.outputs and "key" in {a.role for a in made.outputs[0].axes} else None
        if len(made.inputs) != 1 or not made.outputs or \
                math.prod(made.inputs[0].shape) != math.prod(made.outputs[0].shape) or \
                made.spec.family not in (Family.RESHAPE, Family.AXIS_ORDER, Family.CONTIGUOUS, Family.DROPOUT):
            return None
        source, depth = (made.sources[0] if made.sources else None), depth - 1
    return None


def mask_written_after_softmax(analysis: Analysis) -> list[Diagnostic]:
    """A hiding fill written into the scores in place after a ``softmax`` read them, and read by nothing after
    (lucidrains/memory-compressed-attention: ``attn = dots.softmax(dim=-1)``, then ``dots.masked_fill_(mask,
    ...)``): the softmax already spread its weight over the keys the mask was to hide, and the masked scores go
    nowhere. Read from the recorded sources (which row made each operand, and which rows read each result)."""
    read = {source for e in analysis.events for source in e.sources if source is not None}
    softmaxes = analysis.events_of(Family.SOFTMAX)
    out = []
    for e in analysis.events_of(Family.MASK_FILL):
        if not (e.spec.writes_in_place and hides(e.params.get("value"))) or not e.sources or e.sources[0] is None \
                or (e.index, 0) in read:
            continue
        done = next((s for s in softmaxes if s.index < e.index and s.sources[:1] == e.sources[:1]), None)
        if done is None:
            continue
        o = e.outputs[0]
        out.append(Kind.MASK_AFTER_SOFTMAX.found(e.index, (
            f"{e.op} #{e.index} hides scores {fmt_named(o.dims, o.shape)} in place after {done.op} #{done.index} "
            "has read them, and nothing reads them after: the softmax spread its weight over the keys this mask "
            "was to hide, so it hides nothing."),
            "Fill the scores before the softmax reads them: scores.masked_fill_(mask, value), then softmax."))
    return out


def causal_mask_undone(analysis: Analysis) -> list[Diagnostic]:
    """A hiding fill on the scores of one sequence (queries by keys, as many of each) whose mask the code made from a
    causal triangle (:attr:`.Analysis.from_triangles`) and which, read on the values, hides no key at all in some
    batch entry while it hides a triangle's keys in another: what the triangle hid was undone there (the
    Annotated Transformer's ``make_std_mask`` with ``|`` for ``&``: an unpadded entry's keep-mask is all ones). A
    warning: a prefix-LM's ``causal | prefix`` whose prefix spans a whole entry opens it the same way."""
    out = []
    for e in analysis.events_of(Family.MASK_FILL):
        opened = e.params.get("open_slices")
        if not opened or e.index not in analysis.from_triangles or not hides(e.params.get("value")):
            continue
        scores = e.inputs[0]
        if [a.role for a in scores.axes[-2:]] != ["query", "key"]:
            continue
        mask = e.inputs[1]
        out.append(Kind.CAUSAL_MASK_UNDONE.found(e.index, (
            f"{e.op} #{e.index} hides scores {fmt_named(scores.dims, scores.shape)} with a mask "
            f"{fmt_named(mask.dims, mask.shape)} made from a causal triangle, but in {opened} batch "
            f"entr{'y' if opened == 1 else 'ies'} it hides no key at all, while another entry's hidden keys change "
            "from query to query: there every query sees every later token. A padding mask joined to the triangle "
            "with `|` (either may hide) undoes it where nothing is padded."),
            "Keep a key only where both masks keep it: pad & causal (or add their biases)."))
    return out


VARIANT_RULES = [mask_axis, mask_batch_order, nan_rows, view_incompatible, scale, mask_hides_every_key,
                 mask_after_softmax, mask_written_after_softmax, causal_mask_undone]
