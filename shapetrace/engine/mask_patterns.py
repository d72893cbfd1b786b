"""Which pattern a mask's hidden keys make, where :func:`.directions.hidden_side` found no side: documents packed
side by side (each token sees only its own document: causally, or whole), or a pattern the tool does not read.

Reads a mask's rows (``[slices, n_q, n_k]``, True where hidden), torch tensors only. Adds ``{"packed": "causal" |
"full"}``, or ``{"pattern_unread": True}``: a mask that hides keys in a pattern that is none of a causal triangle, a
window, padding (keys or queries hidden whole), documents packed side by side or any pattern another reader names
(a reversed triangle, a look ahead): what it hides was not checked against anything (:mod:`.verdict` says so).
"""

from __future__ import annotations

from typing import Any


def packed_documents(rows: Any) -> dict:
    """``{"packed": "causal"}`` when, as many queries as keys, every slice lets each token see exactly the keys of
    its own run of tokens up to itself (Megatron's ``reset_attention_mask``, OLMo's packed documents: ``same_doc &
    tril``), ``"full"`` when each sees its whole run (document masking in an encoder); the runs are read from
    whether a token sees the one before it, and there are at least two in some slice."""
    n = rows.shape[-1]
    if rows.dim() != 3 or rows.shape[-2] != n or n < 3:
        return {}
    seen = ~rows                                                                  # (slices, n, n)
    breaks = ~seen.diagonal(offset=-1, dim1=-2, dim2=-1)                          # (slices, n - 1): a new run starts
    if not bool(breaks.any()) or bool(breaks.all(-1).any()):
        return {}
    runs = breaks.long().new_zeros(rows.shape[:-1])                               # (slices, n): run of each token
    runs[:, 1:] = breaks.long().cumsum(-1)
    same = runs[:, :, None] == runs[:, None, :]                                   # (slices, n, n)
    ones = rows.new_ones((n, n))
    if bool((seen == (same & ones.tril())).all()):
        return {"packed": "causal"}
    return {"packed": "full"} if bool((seen == same).all()) else {}


def unread_pattern(found: dict, rows: Any) -> dict:
    """``{"pattern_unread": True}`` where nothing but ``hides_side == "other"`` was read of a mask that hides
    more than whole keys or whole queries of a slice (padding) and packs no documents."""
    if set(found) != {"hides_side"} or rows is None or rows.dim() != 3:
        return {}
    padding = rows.all(-2, keepdim=True) | rows.all(-1, keepdim=True)             # (slices, n_q, n_k)
    if bool((rows == padding).all()) or packed_documents(rows):
        return {}
    return {"pattern_unread": True}


def pattern_unread(event) -> str | None:
    """Why ``event``'s mask leaves the verdict unproven, or None: it hides keys from the scores (an attention
    kernel's mask, or a fill or sum onto scores whose last axes are queries by keys) in a pattern
    :func:`unread_pattern` found none of the known ones (BLIP-2's Q-Former keeps its learnt queries from the text
    and lets the text see every query: a mask written with those two blocks swapped is as well-formed)."""
    if not event.params.get("pattern_unread"):
        return None
    from shapetrace.engine.opspec import Family

    scores = event.spec is not None and event.spec.family in (Family.FUSED_ATTENTION, Family.MODULE_ATTENTION) or \
        any([a.role for a in t.axes[-2:]] == ["query", "key"] for t in event.inputs)
    if not scores:
        return None
    return (f"#{event.index} {event.op}'s mask hides keys in a pattern that is no causal triangle, window, padding "
            "or packing of documents, so which keys each query should see was not checked")


def open_slices(rows: Any) -> dict:
    """``{"open_slices": n}`` when, as many queries as keys, ``n`` slices of a mask (batch entries) hide no key at
    all while another hides keys that differ from query to query (a triangle's, not padding columns): what hid
    the future there was undone for those entries (the Annotated Transformer's ``make_std_mask`` written with
    ``|`` for ``&``: an unpadded entry's keep-mask is all ones). ``rows``: ``[slices, n, n]``, True where hidden."""
    if rows.shape[0] < 2 or rows.shape[-1] < 2 or rows.shape[-2] != rows.shape[-1]:
        return {}
    hides = rows.flatten(1).any(1)
    by_query = (rows != rows[:, :1, :]).flatten(1).any(1)   # (a slice whose rows differ: not columns alone)
    n = int((~hides).sum().item())
    return {"open_slices": n} if n and bool(by_query.any()) else {}
