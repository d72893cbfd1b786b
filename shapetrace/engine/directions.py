"""Which way a bias or a mask on the scores points, read from its values at call time (issue 33 item 3).

Scores are ``[..., queries, keys]``; query ``i`` sits at position ``i + S - L`` among ``S`` keys (torch's
and every KV cache's alignment: the last query is the last key). Two facts are read, on the CPU only and
up to :data:`READ_LIMIT` elements (never a device sync), with the operand broadcast to the scores' last
two axes:

* :func:`bias_facts`: along the keys a query may see (``j <= i``: the past and itself, the side both a
  causal and a bidirectional ALiBi share), is the bias linear in the distance ``i - j``, and which way
  does it slope? ALiBi (Press et al.) penalises distance: ``-slope · (i - j)``; Bloom's
  ``build_alibi_tensor`` adds ``slope · j``, the same up to a constant per query, which softmax ignores.
  ``"far"`` is a bias that grows with distance in every head (the sign reversed), ``"near"`` one that
  shrinks; a bias that is not linear in distance (a learnt T5 bucket table) gets neither;
* :func:`hidden_side`: which keys a mask hides, by value (a boolean mask filled with a large negative,
  or an additive one at or below ``-1e4``), as ``hides_side``: ``"future"`` (strictly after each query: causal),
  ``"past"`` (strictly before it: the causal mask reversed), or nothing when it is another pattern; with
  more or fewer keys than queries, ``causal_from_first_key`` when it hides exactly the keys after each
  query counted from the first key (query ``i`` beside key ``i``: the corner of a square causal table).

Nothing here imports torch: a tensor is read through its own methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from shapetrace.engine.mask_patterns import open_slices, packed_documents, unread_pattern
from shapetrace.engine.op_args import _is_tensor, _number, _scale_params, _sdpa_params, arg
from shapetrace.engine.opspec import Family

#: operands up to this many elements are read (a larger one is not judged)
READ_LIMIT = 1 << 16
#: the position a product of two operands of one shape keeps its copies under: both are kept, since which
#: one is the table is known only once the axes are named (:func:`multiplied_facts`)
TIED = -1
#: an additive value at or below this hides a key
HIDES = -1e4
#: the share of query rows that must be linear in the distance when not all are (:func:`_linear_rows_step`)
LINEAR_SHARE = 0.75


def _readable(t: Any) -> bool:
    return hasattr(t, "dim") and t.dim() >= 1 and t.device.type == "cpu" and 0 < t.numel() <= READ_LIMIT \
        and not t.is_meta


def _as_rows(t: Any, n_q: int, n_k: int):
    """``t`` broadcast to ``[..., n_q, n_k]`` and flattened to ``[slices, n_q, n_k]``, or None."""
    try:
        shape = list(t.shape[:-2]) if t.dim() >= 2 else []
        return t.detach().broadcast_to((*shape, n_q, n_k)).reshape(-1, n_q, n_k)
    except RuntimeError:   # (it does not broadcast to the scores' last two axes)
        return None


def bias_facts(bias: Any, scores_shape: tuple[int, ...]) -> dict:
    """``{"bias_favours": "far" | "near", "bias_step": step}`` for a bias linear in the distance over the
    keys each query may see, with the same sign in every slice (head) where it slopes; else ``{}``.
    Tensor ops throughout (one call per op, whatever its size), never a loop over the elements."""
    if len(scores_shape) < 2 or not _readable(bias) or not bias.is_floating_point():
        return {}
    n_q, n_k = scores_shape[-2], scores_shape[-1]
    rows = _as_rows(bias, n_q, n_k)
    if rows is None or n_k < 2:
        return {}
    rows, offset = rows.double(), n_k - n_q
    seen = rows.new_ones((n_q, n_k)).tril(offset).bool()                 # key j <= query i: the past and itself
    if bool((rows[:, seen] <= HIDES).any()):
        return {}   # (it hides keys there: a mask, not a bias over distance)
    if offset >= 0 and _same_on_seen_keys(rows, seen):
        return {"bias_ignored": True}
    pairs = rows.new_ones((n_q, n_k - 1)).tril(offset - 1).bool()        # keys j and j + 1 both seen
    if not bool(pairs.any()):
        return {}
    steps = (rows[..., :-1] - rows[..., 1:])[:, pairs]                  # change per token farther: [slices, pairs]
    step = steps[:, :1]
    lines: dict = {}
    if not bool(((steps - step).abs() <= 1e-4 * (1 + step.abs())).all()):
        step, lines = _linear_rows_step(rows, pairs)
        if step is None:
            return {}   # not linear in the distance (a learnt table)
    sloped = [v for v in step.flatten().tolist() if abs(v) > 1e-6]
    if not sloped or (any(v > 0 for v in sloped) and any(v < 0 for v in sloped)):
        return {}
    return {"bias_favours": "far" if sloped[0] > 0 else "near", "bias_step": round(max(sloped, key=abs), 6),
            **lines}


def _same_on_seen_keys(rows: Any, seen: Any) -> bool:
    """Is the bias the same on every key each query may see (in every row that sees two keys or more, in
    every slice), while it changes within a slice elsewhere (along the queries, or on keys after them)?
    Softmax takes a constant per query away, so such a bias changes nothing: a position bias laid along
    the queries (``[..., T, 1]``) instead of the keys. Values at or below :data:`HIDES` hide keys and are
    left out; a bias that is one constant everywhere (T5's zeros) is not one."""
    judged = seen.sum(-1) >= 2                                              # (n_q,)
    if not bool(judged.any()):
        return False
    same = ((rows - rows[..., :1]).abs() <= 1e-6 * (1 + rows[..., :1].abs())) | ~seen   # key 0: seen by all
    if not bool(same[:, judged].all()):
        return False
    shown = rows.masked_fill(rows <= HIDES, float("nan")).flatten(1)        # (slices, entries)
    spread = shown.nan_to_num(float("-inf")).amax(1) - shown.nan_to_num(float("inf")).amin(1)
    return bool((spread > 1e-6).any())


def _linear_rows_step(rows: Any, pairs: Any) -> tuple[Any, dict]:
    """``(steps, {"bias_rows": (linear, judged)})``: the step per token farther of each query row that is
    linear in the distance over the three keys or more it may see, when at least :data:`LINEAR_SHARE` of
    those rows are (a padded key, which a later mask hides, breaks the line of its own rows only: Bloom's
    ``cumsum`` positions are 0 there); ``(None, {})`` otherwise (a learnt table is linear in no row)."""
    diffs = rows[..., :-1] - rows[..., 1:]                                  # (slices, n_q, n_k - 1)
    first = diffs[..., :1]                                                  # key 0 to key 1: seen first
    same = ((diffs - first).abs() <= 1e-4 * (1 + first.abs())) | ~pairs     # (slices, n_q, n_k - 1)
    judged = pairs.sum(-1) >= 2                                             # (n_q,): three keys seen or more
    if not bool(judged.any()):
        return None, {}
    linear = same.all(-1)[:, judged]                                        # (slices, judged rows)
    if linear.double().mean().item() < LINEAR_SHARE:
        return None, {}
    return first[..., 0][:, judged][linear], {"bias_rows": (int(linear.sum().item()), linear.numel())}


def attn_mask_facts(mask: Any, scores_shape: tuple[int, ...]) -> dict:
    """SDPA's ``attn_mask``: a boolean one attends where True (so it hides where False); a float one is
    added to the scores, as a bias and as a mask."""
    if not _readable(mask):
        return {}
    if str(mask.dtype).endswith("bool"):
        return {**hidden_side(~mask, scores_shape), **passes_all(mask, True)}
    return {**bias_facts(mask, scores_shape), **hidden_side(mask, scores_shape), **passes_all(mask, 0)} \
        if mask.is_floating_point() else {}


def hidden_side(mask: Any, scores_shape: tuple[int, ...]) -> dict:
    """``{"hides_side": "future" | "past"}`` when the keys a mask hides are exactly those strictly after
    (or before) each query, in every slice (one query: ``hides_newest`` where every slice hides the last
    key, which a KV cache's newest query is, :mod:`.rules.steps`); ``"future-and-self"`` when, as many
    queries as keys, it hides
    each query's own key too (``triu(0)`` for ``triu(1)``), ``"past-and-self"`` when it hides the keys before
    each query and its own (``tril(0)``: the keep-mask of a causal mask used as its hide-mask);
    ``"future-and-padding"`` (``"past-and-padding"``) when it hides those and, besides, keys hidden from every
    query of a slice (a padded sequence's), or from every query that has a key left
    (:func:`rows_set_aside`); ``"other"`` for any other pattern; ``{}`` when not read.
    ``mask``: a boolean mask (True hides, as ``masked_fill`` reads it) or an additive float one (values at
    or below ``-1e4`` hide)."""
    if len(scores_shape) < 2 or not _readable(mask):
        return {}
    n_q, n_k = scores_shape[-2], scores_shape[-1]
    hidden = mask if str(mask.dtype).endswith("bool") else (mask <= HIDES)
    rows = _as_rows(hidden, n_q, n_k)
    blind = _blind_slices(rows)
    if rows is None or n_q < 2:
        newest = rows is not None and n_q == 1 and n_k > 1 and bool(rows[:, 0, -1].all())
        return {"hides_side": "other", **blind, **({"hides_newest": True} if newest else {})}
    offset, ones = n_k - n_q, rows.new_ones((n_q, n_k))
    sides = [("future", ones.triu(offset + 1)), ("past", ones.tril(offset - 1))]
    if offset == 0:   # (with more keys than queries, where each query's own key lies depends on the alignment)
        sides += [("future-and-self", ones.triu(0)), ("past-and-self", ones.tril(0))]   # (the latter: a keep-mask
        # taken for a hide-mask, ``torch.where(causal, fill, scores)``)
    for side, table in sides:
        if bool((rows == table).all()):
            return {"hides_side": side}
    if offset and bool((rows == ones.triu(1)).all()):   # (query i beside key i: a square triangle's corner)
        return {"hides_side": "other", "causal_from_first_key": True, **blind}
    padding = rows.all(-2, keepdim=True)   # keys hidden from every query of a slice: its padding
    aside = rows_set_aside(mask, rows, sides[0][1], sides[2][1] if offset == 0 else None)
    for side, table in sides[:2] if bool(padding.any()) else ():
        if bool(((rows | padding) == (table | padding)).all()):   # (transformers' 4-D causal mask of a padded batch)
            return {**aside, "hides_side": f"{side}-and-padding", **blind}
    if offset == 0 and not aside:
        aside = own_key_hidden(rows) or blind_rows(mask, rows) or past_only(rows)   # (a query hiding its own key
        # explains a blind row)
    far = keeps_far_future(rows)   # (a gap of its own kind: the keys just ahead hidden, those beyond seen)
    ahead = looks_ahead(rows)   # (a band read as one triangle looking ahead is that reading's, not a window's)
    found = {"hides_side": "other", **aside, **blind, **ahead, **far, **causal_window(rows, offset),
             **({} if ahead else band_window(rows, offset)),
             **(opened_future(rows) if offset == 0 and not far else {}),
             **(whole_past_hidden(rows) if offset == 0 else {}), **(padding_seen(rows) if offset == 0 else {}),
             **(open_slices(rows) if offset == 0 else {})}
    found.update(packed_documents(rows) if offset == 0 else {})   # (read once: a packing is no unread pattern)
    return {**found, **unread_pattern(found, rows)}


def padding_seen(rows: Any) -> dict:
    """``{"padding_seen": (slice, query, key)}`` when, as many queries as keys, a padded key (hidden from its own
    query in this slice while the same position sees itself in another slice: padding, not a design that keeps
    every token from itself, XLNet's query stream) is seen by a query that sees its own key (a real token): the
    padding reaches a real token's output (theislab/CellFlow issue #226: the class token's row of the mask left
    all ones while the set's rows hide the pads). A padded row opened onto every key (transformers'
    ``_unmask_unattended``) sees itself, so it is no padded key. ``rows``: ``[slices, n, n]``, True where hidden."""
    n = rows.shape[-1]
    if rows.shape[-2] != n or n < 2 or rows.shape[0] < 2:
        return {}
    own = rows.diagonal(dim1=-2, dim2=-1)                                     # (slices, n): hides its own key
    padded = own & (~own).any(0, keepdim=True)
    seen = ~rows & (~own)[:, :, None] & padded[:, None, :]                   # (slices, n_q, n_k)
    if not bool(seen.any()):
        return {}
    first = int(seen.flatten().nonzero()[0].item())
    return {"padding_seen": (first // (n * n), first // n % n, first % n)}


def causal_window(rows: Any, offset: int) -> dict:
    """``{"window": w}`` when every slice hides exactly the keys after each query (aligned bottom-right, as in
    :func:`hidden_side`) and those more than ``w - 1`` before it, for one ``w`` smaller than the keys: a causal
    sliding window of ``w`` keys (:func:`.rules.directions.windows_kept` compares it between calls)."""
    width = int((~rows).sum(-1).max()) if rows.numel() else 0
    if not 0 < width < rows.shape[-1]:
        return {}
    ones = rows.new_ones(rows.shape[-2:])
    return {"window": width} if bool((rows == (ones.triu(offset + 1) | ones.tril(offset - width))).all()) else {}


def band_window(rows: Any, offset: int) -> dict:
    """``{"band": (before, after)}`` when every slice hides exactly the keys more than ``before - 1`` positions
    before each query and more than ``after`` after it (aligned bottom-right), besides keys hidden from every
    query of a slice (its padding), with ``after > 0`` and keys hidden on both sides: a sliding window that looks
    ahead (Moonshine Streaming's encoder: the query, ``left - 1`` frames before it and ``right`` after; one that
    hides no later key is :func:`past_only`'s). Its two widths are numbers of the model's configuration
    (:func:`.rules.directions.window_widths`)."""
    padding = rows.all(-2, keepdim=True)                                      # (slices, 1, n_k)
    seen = ~(rows | padding)                                                  # (slices, n_q, n_k)
    if not bool(seen.any()):
        return {}
    ones = rows.new_ones(rows.shape[-2:]).long()
    distance = (ones.cumsum(0) - 1 + offset) - (ones.cumsum(1) - 1)          # (n_q, n_k): query minus key position
    reach = distance.expand_as(seen)[seen]
    before, after = int(reach.max()) + 1, -int(reach.min())
    far, ahead = distance > before - 1, distance < -after                     # (n_q, n_k): hidden on each side
    band = far | ahead
    if after <= 0 or not bool(far.any()) or not bool(ahead.any()) \
            or not bool(((rows | padding) == (band | padding)).all()):
        return {}
    return {"band": (before, after)}


def own_key_hidden(rows: Any) -> dict:
    """``{"hides_own_key": (count, slice, query)}`` when, as many queries as keys, a query hides its own key
    while it sees another key and another query sees its key (so that key is no padding, which every query
    hides): a window or chunk mask built the wrong way round (``masked_fill(window, min)`` for
    ``masked_fill(~window, min)``, a chunk id taken ``j % C`` for ``j // C``); ``count`` such queries in all,
    the first at ``[slice, query]``. ``rows``: ``[slices, n, n]``, True where hidden."""
    n = rows.shape[-1]
    if rows.shape[-2] != n or n < 2:
        return {}
    hits = rows.diagonal(dim1=-2, dim2=-1) & (~rows).any(-1) & (~rows).any(-2)   # (slices, n)
    if not bool(hits.any()):
        return {}
    first = int(hits.flatten().nonzero()[0].item())
    return {"hides_own_key": (int(hits.sum().item()), first // n, first % n)}


def past_only(rows: Any) -> dict:
    """``{"past_only": (slice, query, key)}`` when, as many queries as keys, the mask hides keys before some
    query (a key that another query sees, so no padding) and no key after any query in any slice: it limits
    how far back each query sees yet lets it see every later token, a causal sliding window that lost its
    causal half (``kv_idx > q_idx - window`` without ``& (kv_idx <= q_idx)``); the first such hidden key at
    ``[slice, query, key]``. A bidirectional window hides keys on both sides, a causal one every later key.
    ``rows``: ``[slices, n, n]``, True where hidden."""
    n = rows.shape[-1]
    if rows.shape[-2] != n or n < 3:
        return {}
    ones = rows.new_ones((n, n))
    if bool((rows & ones.triu(1)).any()):
        return {}
    early = rows & ones.tril(-1) & (~rows).any(-2, keepdim=True)             # (slices, n, n): not padding
    if not bool(early.any()):
        return {}
    first = int(early.flatten().nonzero()[0].item())
    return {"past_only": (first // (n * n), first // n % n, first % n)}


def whole_past_hidden(rows: Any) -> dict:
    """``{"whole_past_hidden": (slice, query, key)}`` when, as many queries as keys, every slice hides every key
    before each query while some query sees a key after it: the mirror of a causal pattern (a strided or
    windowed causal mask built with its query and key grids swapped, ``q = z + y``, ``k = z + x``), each token
    reading only what follows it; the first later key seen at ``[slice, query, key]``. The exact reversed
    triangle is ``hides_side == "past"`` (:func:`hidden_side`). ``rows``: ``[slices, n, n]``, True where hidden."""
    n = rows.shape[-1]
    if rows.shape[-2] != n or n < 3:
        return {}
    ones = rows.new_ones((n, n))
    if not bool(rows[:, ones.tril(-1)].all()):
        return {}
    later = ~rows & ones.triu(1)
    if not bool(later.any()):
        return {}
    first = int(later.flatten().nonzero()[0].item())
    return {"whole_past_hidden": (first // (n * n), first // n % n, first % n)}


def blind_rows(mask: Any, rows: Any) -> dict:
    """``{"blind_queries": (shape, flat indices)}`` for a mask of any pattern, as many queries as keys: the
    queries that hide every key though other queries see their own token (a padding mask laid along the
    queries, ``keep[:, None, :, None]`` for ``keep[:, None, None, :]``; a padded token's own key is hidden
    from every query, so a padded row is no blind one); ``{}`` where there is none. ``rows``: ``[slices, n,
    n]``, True where hidden."""
    n = rows.shape[-1]
    if rows.shape[-2] != n:
        return {}
    flags = rows.all(-1) & (~rows).any(-2)                                    # (slices, n)
    if not bool(flags.any()):
        return {}
    lead = (*(tuple(mask.shape[:-2]) if mask.dim() >= 2 else ()), n)
    return {"blind_queries": (lead, tuple(flags.flatten().nonzero().flatten().tolist()))}


def looks_ahead(rows: Any) -> dict:
    """``{"looks_ahead": a}`` when, as many queries as keys, every slice hides exactly the keys more than
    ``a >= 1`` after each query among the keys after it, keeps each query's own key, and hides some later key
    from a query (``tril(ones, diagonal=1)`` for ``tril(ones)``: a causal triangle off its diagonal, or a
    look-ahead window by design), whatever it hides before each query (a sliding window's far past);
    ``{}`` otherwise. ``rows``: ``[slices, n, n]``, True where hidden."""
    n = rows.shape[-1]
    if rows.shape[-2] != n or n < 3 or bool(rows.diagonal(dim1=-2, dim2=-1).any()):
        return {}
    ones = rows.new_ones((n, n))
    future = rows & ones.triu(1)
    for a in range(1, n - 1):
        if bool((future == ones.triu(a + 1)).all()):
            return {"looks_ahead": a}
    return {}


def keeps_far_future(rows: Any) -> dict:
    """``{"keeps_far_future": a}`` when, as many queries as keys, every slice hides exactly the ``a >= 1`` keys
    just after each query among the keys after it and keeps every key beyond them, with some query keeping a
    later key (``tril(triu(min, 1), diagonal=w)``: a sliding window's edge cut from the causal mask, which
    zeroes its far future; transformers PR #41228), whatever it hides before each query; ``{}`` otherwise (a
    key hidden from every query, padding, is not allowed for). ``rows``: ``[slices, n, n]``, True where hidden."""
    n = rows.shape[-1]
    if rows.shape[-2] != n or n < 3 or bool(rows.diagonal(dim1=-2, dim2=-1).any()):
        return {}
    ones = rows.new_ones((n, n))
    future = rows & ones.triu(1)
    for a in range(1, n - 1):
        if bool((future == (ones.triu(1) & ~ones.triu(a + 1))).all()):
            return {"keeps_far_future": a}
    return {}


def opened_future(rows: Any) -> dict:
    """What a causal mask opened onto later keys, as many queries as keys, keys hidden from every query (padding)
    set aside: every real query sees every real key up to its own, some see later ones and some later key stays
    hidden. ``{"future_blocks": (shape, flat indices)}`` when each query sees the later keys in one run from
    the next key on, and every query in that run sees up to the same key: bidirectional blocks on a causal mask
    (a prefix LM's prefix, Gemma 3's image tokens, a block-causal video mask), the queries ``[..., n]`` before
    the last whose block holds the last key (their dependence on it is the design: :mod:`.unattended`);
    ``{"skips_ahead": (count, slice, query, hidden key, seen key)}`` when a query sees a later key while a real
    key between them stays hidden from it (Gemma 3's image tokens seeing every other image's, transformers
    issue #38053): its block is no contiguous run; ``{}`` otherwise. ``rows``: ``[slices, n, n]``, True where
    hidden."""
    n = rows.shape[-1]
    if rows.shape[-2] != n or n < 3:
        return {}
    ones, idx = rows.new_ones((n, n)), rows.new_ones((n,)).long().cumsum(0) - 1
    pad = rows.all(-2, keepdim=True)                                           # (slices, 1, n): no query sees it
    real = ~pad.transpose(-1, -2)                                              # (slices, n, 1): real queries
    hidden = rows & ~pad & real
    later = ~rows & ~pad & real & ones.triu(1)
    if bool((hidden & ones.tril(0)).any()) or not bool(later.any()) or not bool((hidden & ones.triu(1)).any()):
        return {}
    reach = ((later.long() * (idx + 1)).amax(-1) - 1).maximum(idx)              # (slices, n): the furthest seen
    between = (idx[None, None, :] > idx[None, :, None]) & (idx[None, None, :] <= reach[..., None])
    gap = between & hidden
    if bool(gap.any()):
        first = gap.flatten().nonzero()[0].item()
        s, q, k = first // (n * n), first // n % n, first % n
        return {"skips_ahead": (int(gap.any(-1).sum().item()), s, q, k, int(reach[s, q].item()))}
    if not bool((~between | pad | (reach[..., None, :] == reach[..., :, None])).all()):
        return {}
    causal = (hidden & ones.triu(1)).flatten(1).any(1)[:, None]                # (slices, 1): hides a later key
    flags = (reach == n - 1) & (idx < n - 1) & real[..., 0] & causal          # (slices, n): an open slice leaks
    return {"future_blocks": ((*rows.shape[:-2], n), tuple(flags.flatten().nonzero().flatten().tolist()))}


def rows_set_aside(mask: Any, rows: Any, future: Any, future_and_self: Any | None) -> dict:
    """What a causal mask hides once the queries with no key left are set aside: rows that hide every key,
    or none (transformers' ``AttentionMaskConverter._unmask_unattended`` opens such rows on purpose for SDPA,
    so that they attend everywhere instead of giving NaN; the last query of a causal mask sees every key).
    Where the other rows are the causal triangle ``future`` (or ``future_and_self``) plus padding keys (keys
    hidden from every other query, at least one of which comes at or after them): ``hides_side`` that
    pattern; ``no_key_left``, ``(shape, flat indices)`` of the queries ``[..., n_q]`` set aside that are
    padding tokens themselves (their outputs are padding, and their dependence on later tokens is no leak:
    :mod:`.unattended`); ``blind_queries``, those whose own token other queries attend to (a real token
    left with no key: a padding mask laid on the queries). ``rows``: ``[slices, n_q, n_k]``, True where
    hidden; ``{}`` where no row is set aside or the rest is no causal triangle."""
    n_q, n_k = rows.shape[-2], rows.shape[-1]
    offset = n_k - n_q
    left = rows.all(-1) | ~rows.any(-1)                                      # (slices, n_q): every key, or none
    if offset < 0 or not bool(left.any()) or bool(left.all(-1).any()):
        return {}
    kept = ~left[..., None]                                                 # (slices, n_q, 1): the other queries
    hidden = (rows | ~kept).all(-2)                                         # (slices, n_k): hidden from them all
    padding = (hidden & (kept & ~future.bool()).any(-2))[:, None, :]        # (slices, 1, n_k): one could see it
    if not bool((kept & future.bool() & ~padding).any()):   # (no kept query has a later real key to hide: no
        return {}                                            # triangle shows, litgpt's tril(-w) without triu(1))
    tables = [("future", future), ("future-and-self", future_and_self)]
    side = next((name for name, table in tables if table is not None and bool(
        ((rows | padding | ~kept) == (table.bool() | padding | ~kept)).all())), None)
    if side is None:
        return {}
    lead = (*(tuple(mask.shape[:-2]) if mask.dim() >= 2 else ()), n_q)
    own = slice(offset, offset + n_q)
    found = {"hides_side": f"{side}-and-padding" if side == "future" and bool(padding.any()) else side}
    for name, flags in (("no_key_left", left & padding[:, 0, own]), ("blind_queries", left & ~hidden[:, own])):
        if bool(flags.any()):
            found[name] = (lead, tuple(flags.flatten().nonzero().flatten().tolist()))
    return found


def _blind_slices(rows: Any) -> dict:
    """``{"hides_every_key": n}`` when ``n`` slices of the mask (batch entries, or the one slice of a
    mask without a batch axis) hide every key from every query: nothing is left to attend to (an
    inverted padding mask: ``mask * min`` for ``(1 - mask) * min``). A fully hidden *row* is left to
    the NaN check: a left-padded query under a causal mask has one on purpose."""
    if rows is None or rows.numel() == 0:
        return {}
    blind = int(rows.flatten(1).all(1).sum().item())
    return {"hides_every_key": blind} if blind else {}


def fill_params(args: tuple, kwargs: dict) -> dict:
    """``masked_fill(mask, value)``: the value, and which side of each query the mask hides."""
    x, mask = (args[0] if args else kwargs.get("input")), arg(args, kwargs, 1, "mask")
    found = {"value": _number(arg(args, kwargs, 2, "value"))}
    if _is_tensor(x) and _is_tensor(mask):
        found.update(hidden_side(mask, tuple(x.shape)))
        hiding = isinstance(found["value"], (int, float)) and found["value"] <= HIDES
        found.update(passes_all(mask, False) if hiding else {})   # (a fill with zeros after softmax hides nothing)
    return found


def passes_all(mask: Any, passing: Any) -> dict:
    """``{"passes_all": True}`` when every value of a mask read is ``passing`` (a boolean mask that
    hides nothing, an additive one of zeros, a multiplied one of ones): on this input it removed no
    key (nothing padded, one query of a causal mask), so where it lands was not seen on the values;
    ``{}`` when something is hidden or the mask was not read."""
    if not _readable(mask) or mask.dtype.is_complex:
        return {}
    return {"passes_all": True} if bool((mask == passing).all()) else {}


def _constant(fill: Any) -> Any:
    """A fill's one value: a plain number, or a tensor holding one value throughout (``torch.full_like(scores,
    finfo.min)``, an expanded scalar), read on the CPU; None otherwise."""
    value = _number(fill)
    if value is None and _readable(fill) and not fill.dtype.is_complex:
        first = fill.reshape(-1)[0]
        value = first.item() if bool((fill == first).all()) else None
    return value


def where_params(args: tuple, kwargs: dict) -> dict:
    """``torch.where(keep, scores, fill)`` (transformers' GPT-2 ``_attn``) or ``torch.where(hide, fill,
    scores)``: where the fill is a large negative, the keys it lands on are hidden; which side of each
    query they lie on is read as for ``masked_fill`` (nothing when the condition is not read)."""
    cond, a, b = arg(args, kwargs, 0, "condition"), arg(args, kwargs, 1, "input"), arg(args, kwargs, 2, "other")
    if not (_is_tensor(cond) and str(cond.dtype).endswith("bool")):
        return {}
    for scores, fill, fill_where_true in ((a, b, False), (b, a, True)):
        value = _constant(fill)
        if isinstance(value, (int, float)) and value <= HIDES and _is_tensor(scores) and scores.dim() >= 2:
            side = hidden_side(cond if fill_where_true else ~cond, tuple(scores.shape)) if _readable(cond) else {}
            unused = passes_all(cond, not fill_where_true) if side else {}
            return {"value": value, **({"hides": True, **side, **unused} if side else {})}
    return {}


class AddedOperands(NamedTuple):
    """Copies of both operands of an addition whose operands are the same size (``scores + bias`` at
    B = 1): which one is the scores is known only once the axes are named."""

    first: Any
    second: Any


def added_operand(kept: Any, is_scores: Sequence[bool]) -> Any:
    """The kept values of the operand added to the scores: the one copy kept, or, where both operands
    were kept, the one that is not the scores (None when that is not known: neither or both are)."""
    if not isinstance(kept, AddedOperands):
        return kept
    if len(is_scores) != 2 or is_scores[0] == is_scores[1]:
        return None
    return kept.second if is_scores[0] else kept.first


def subtracted_facts(kept: Any, in_shapes: Sequence, is_scores: Sequence[bool], scores_shape: tuple[int, ...]) -> dict:
    """What a tensor subtracted from the scores says (``scores - bias`` adds ``-bias``: FlexAttention's eager
    ``score_mod``, ``scores - 1e9 * (1 - mask)``), as :func:`added_facts` reads an added one, where it hides keys
    or slopes with distance; ``{}`` otherwise, so that ``scores - scores.amax(-1, keepdim=True)`` (the softmax's
    own shift, the same on every key) stays the elementwise step it is. Only the subtrahend is read: the scores
    must come first (``bias - scores`` negates the scores themselves). ``in_shapes``: the two operands' shapes;
    ``is_scores``: which of them are the scores."""
    if len(in_shapes) != 2 or len(is_scores) != 2 or not is_scores[0] or is_scores[1]:
        return {}
    taken = kept.second if isinstance(kept, AddedOperands) else kept
    if taken is None or tuple(taken.shape) != tuple(in_shapes[1]) or (
            not isinstance(kept, AddedOperands) and tuple(in_shapes[0]) == tuple(in_shapes[1])):
        return {}
    facts = added_facts(-taken, scores_shape)
    facts.pop("bias_ignored", None)
    return facts if facts.get("hides") or facts.get("bias_favours") else {}


def added_facts(kept: Any, scores_shape: tuple[int, ...]) -> dict:
    """What a tensor added to the scores says (kept at call time: the smaller operand): does it hide
    keys (an additive mask), which side, and which way its bias slopes with distance."""
    if kept is None or kept.numel() == 0:
        return {}
    return {"hides": bool(kept.min().item() <= HIDES), **bias_facts(kept, scores_shape),
            **hidden_side(kept, scores_shape), **passes_all(kept, 0)}


def weighs_scores(in_axes) -> bool:
    """Is one of two multiplied operands the scores and the other a table that changes along their key axis
    (``[H, T, S]`` against ``[B, H, T, S]``, or a key mask ``[B, 1, 1, S]`` broadcast over the queries; not a
    number, a per-head scale or a per-query one)?"""
    roles = [{"query", "key"} <= {a.role for a in axes} for axes in in_axes]
    if len(in_axes) != 2 or roles.count(True) != 1:
        return False
    table = in_axes[roles.index(False)]
    return len(table) >= 2 and table[-1].size > 1


def multiplied_facts(kept: Any, in_axes, scores_shape: tuple[int, ...]) -> dict:
    """What a table multiplied onto the scores says (its copy kept at call time, :func:`.columns.kept_table`):
    its zeros drop keys from each query's weighted sum, so which side they lie on is read as a mask's is;
    ``{}`` when its values were not kept (the direction rule then says they were not read). Of two operands of
    one shape both were kept (``TIED``): the table is the one whose axes are not the queries and keys."""
    position, table = kept if kept is not None else (None, None)
    if position == TIED:   # (both operands of one shape kept: the table is the one that is not the scores)
        position = next((i for i, axes in enumerate(in_axes) if not {"query", "key"} <= {a.role for a in axes}), None)
        table = table[position] if position is not None and position < len(table) else None
    if position is None or not 0 <= position < len(in_axes) or {"query", "key"} <= {a.role for a in in_axes[position]}:
        return {}
    dropped = table == 0
    return {"hides": bool(dropped.any()), **hidden_side(dropped, scores_shape), **passes_all(table, 1)}


def baddbmm_params(args: tuple, kwargs: dict) -> dict:
    """``base.baddbmm(a, b, beta=β, alpha=α)`` is ``β · base + α · (a @ b)``: the base is added to the
    product as a bias is added to scores (Bloom's ``alibi.baddbmm(q, k)``), so which way it slopes with
    distance is read from ``β · base`` over the product's last two axes; nothing when β is 0 (the base is
    ignored: transformers' GPT-2 passes ``torch.empty`` with ``beta=0``) or not a plain number."""
    found = _scale_params(args, kwargs)
    base = args[0] if args else kwargs.get("input")
    a, b = arg(args, kwargs, 1, "batch1"), arg(args, kwargs, 2, "batch2")
    beta = found["beta"]
    if not (_is_tensor(base) and _is_tensor(a) and _is_tensor(b) and a.dim() == 3 and b.dim() == 3) \
            or not isinstance(beta, (int, float)) or beta == 0 or not _readable(base):
        return found
    scores_shape = (a.shape[0], a.shape[1], b.shape[2])
    facts = bias_facts(base if beta == 1 else base * beta, scores_shape)
    return {**found, **facts, "base_shape": tuple(base.shape)} if facts else found


def sdpa_params(args: tuple, kwargs: dict) -> dict:
    """``F.scaled_dot_product_attention``'s parameters, with which way its mask points over the scores
    ``[..., L, S]``."""
    found = _sdpa_params(args, kwargs)
    q, k, mask = arg(args, kwargs, 0, "query"), arg(args, kwargs, 1, "key"), arg(args, kwargs, 3, "attn_mask")
    if _is_tensor(mask) and _is_tensor(q) and _is_tensor(k) and q.dim() >= 2 and k.dim() >= 2:
        found.update(attn_mask_facts(mask, (q.shape[-2], k.shape[-2])))
    return found


def triangle_params(args: tuple, kwargs: dict) -> dict:
    """``tril``/``triu``: the diagonal the triangle starts at (0 where not given, as in torch)."""
    diagonal = arg(args, kwargs, 1, "diagonal", 0)
    return {"diagonal": diagonal if type(diagonal) is int else None}


def causal_triangle(e) -> bool:
    """Is ``e`` a ``tril``/``triu`` cut at the causal diagonal, aligned to the last query and key as torch's
    masks are (``L`` queries, ``S`` keys: its last two axes)? ``tril(S - L)`` keeps each query's keys up to
    its own and ``triu(S - L + 1)`` hides those after it; ``triu(S - L)`` and ``tril(S - L - 1)`` are the
    same cut taken the wrong way round (a slip's reversed mask: still a declared causal mask, so the
    values measure its leak). A cut elsewhere, a look-ahead ``tril(2)`` or a band, declares nothing."""
    if e.spec.family is not Family.TRIANGLE or not e.outputs or len(e.outputs[0].shape) < 2:
        return False
    n_q, n_k = e.outputs[0].shape[-2:]
    cut = n_k - n_q
    return e.params.get("diagonal") in ((cut, cut - 1) if e.op.startswith("tril") else (cut, cut + 1))


def tokens_reversed(events, role_of) -> str | None:
    """The first op that reverses the tokens of activations (a ``flip`` along an axis named as the tokens, of
    a tensor with a batch axis: a backward pass's input read from its end), e.g. ``"flip #20"``; None where
    none does. A causal mask applied to reversed tokens hides the past of the original order, so it declares
    no causal order for the model's output (a bidirectional layer's backward half looks ahead by design)."""
    for e in events:
        if not e.params.get("reversed") or not e.inputs:
            continue
        roles = [role_of(label) if label else None for label in e.inputs[0].dims]
        if "batch" in roles and any(roles[axis] == "tokens" for axis in e.params["reversed"] if axis < len(roles)):
            return f"{e.op} #{e.index}"
    return None
