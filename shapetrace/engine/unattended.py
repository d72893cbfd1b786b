"""Queries with no key left: attention rows the same on every key.

Under a mask filled with a finite large negative (``torch.finfo(dtype).min``, ``-1e9``), a query whose every
key is hidden (the first rows of a left-padded sequence under a causal mask: transformers' eager Llama) gets
equal scores on every key, and softmax spreads it evenly over all of them, the later tokens' too (over all
but those a second mask pushed to ``-inf``). Its output
is padding (transformers' SDPA path even unmasks such rows on purpose, ``_unmask_unattended``), and its
dependence on later tokens is no leak of the causal mask. :func:`uniform_rows` reads, when the run ends,
which rows of the attention weights the capture kept are exactly the same on every key (random scores never
are); :func:`unattended_rows` reads them per batch entry and query for the leak check
(:mod:`.dependencies`), as the rows uniform in every head and every kept layer. On the SDPA path no
weights are kept, and such rows are opened instead (every key attends): :func:`masked_rows` reads them
from the masks themselves (``no_key_left``, :func:`.directions.rows_set_aside`, read at each mask's call).
The same holds of a query that a causal mask lets see the later keys of its own block by design (a prefix
LM's prefix, Gemma 3's image tokens: ``future_blocks``, :func:`.directions.opened_future`): its dependence on
the last token of its block is what the mask says, and :func:`masked_rows` reads those rows too.
:func:`triangular_weights` reads from the same kept weights which triangle a mask left at zero (a causal mask
declared by its values, whichever way round it was applied).
"""

from __future__ import annotations

import torch


def weights_over_keys(outputs):
    """The kept softmax outputs ``[..., T, S]`` (``(record, tensor)``, S > 1) that are attention weights: real
    values summing to 1 over their last axis (not an SDPA output, not a log_softmax)."""
    for _, w in outputs:
        if w.dim() < 2 or w.shape[-1] < 2 or w.is_meta or not w.is_floating_point():
            continue
        with torch.no_grad():
            if bool(((w.sum(-1) - 1).abs() < 1e-3).all()):
                yield w


def uniform_rows(outputs) -> list[torch.Tensor]:
    """For each of :func:`weights_over_keys`, a bool tensor ``[..., T]``: the rows whose every nonzero weight is
    the same, on two keys or more. A query with no key left has every score at the fill value, but where two
    masks each add it (GPT-2's ``where(causal, w, min)`` then ``+ (1 - mask) * min``) a key hidden by both
    overflows to ``-inf`` and takes weight 0, so its row is even on the other keys only (random scores never
    give two weights exactly the same; one nonzero weight alone proves nothing: a query shown one key)."""
    rows = []
    with torch.no_grad():
        for w in weights_over_keys(outputs):
            shown = w > 0
            lowest = torch.where(shown, w, torch.full_like(w, float("inf"))).amin(-1)
            rows.append(((w.amax(-1) == lowest) & (shown.sum(-1) >= 2)).cpu())
    return rows


def unattended_rows(uniform: list[torch.Tensor], batch: int, tokens: int,
                    first: int | None = None) -> frozenset[tuple[int, int]]:
    """``(batch entry, query)`` of the rows uniform in every head of every kept weights that cover them, whose
    leading axes hold the batch first (``[B, H, T, S]`` or ``[B·H, T, S]``) and whose queries are ``tokens``, or
    ``first`` of them: the input's tokens, the output's first ``first`` where the output runs on past them (a
    prefill's outputs joined with a decoding step's: MosaicGPT's left-padded queries, each with no key left)."""
    rows = covered = None
    for flags in uniform:
        n = tokens if flags.shape[-1:] == (tokens,) else \
            first if first and first < tokens and flags.shape[-1:] == (first,) else None
        if n is not None and flags.numel() == n:   # (one mask for every batch entry)
            flags = flags.reshape(1, n).expand(batch, n)
        if n is None or flags.dim() < 2 or flags.numel() % (batch * n):
            continue
        per = torch.ones(batch, tokens, dtype=torch.bool)                           # (B, T): True where not seen
        per[:, :n] = flags.reshape(batch, -1, n).all(1)
        rows = per if rows is None else rows & per
        covered = max(covered or 0, n)
    if rows is None:
        return frozenset()
    return frozenset((int(b), int(t)) for b, t in rows[:, :covered].nonzero().tolist())


def masked_rows(records) -> list[torch.Tensor]:
    """For each mask read at its call, a bool tensor ``[..., T]`` of the queries whose dependence on the last
    token is no leak: its padding queries with no key left (:func:`.directions.rows_set_aside`), each
    mask's on its own, and the queries its bidirectional blocks let see the last token
    (:func:`.directions.opened_future`), a table of their own (where a layer's mask holds them all)."""
    found = []
    for r in records:
        params = getattr(r, "params", None) or {}
        for fact in ("no_key_left", "future_blocks"):
            shape, hits = params.get(fact, ((), ()))
            if hits:
                flags = torch.zeros(shape, dtype=torch.bool)
                flags.view(-1)[list(hits)] = True
                found.append(flags)
    return found


def triangular_weights(outputs) -> str | None:
    """Which triangle the first square attention weights ``[..., T, T]`` (T > 1) among ``outputs`` (the
    softmax outputs the capture kept, ``(record, tensor)``) leave at zero: ``"zero above the
    diagonal"`` (a causal mask), ``"zero below the diagonal"`` (one applied the other way round), or
    None (no triangle: no mask of that kind was applied)."""
    for w in weights_over_keys(outputs):
        if w.shape[-1] != w.shape[-2]:
            continue
        with torch.no_grad():
            zero = (w == 0).reshape(-1, *w.shape[-2:]).all(0)                      # (T, T)
        n = w.shape[-1]
        square = torch.ones(n, n, dtype=torch.bool, device=zero.device)
        above, below = square.triu(1), square.tril(-1)
        if bool(zero[above].all()):
            return "zero above the diagonal"
        if bool(zero[below].all()):
            return "zero below the diagonal"
        return None
    return None
