"""Tokens folded with heads into the rows of a product against keys of one head: a batch, not a merge.

GPT-BigCode's multi-query attention (huggingface/transformers ``GPTBigCodeAttention._attn``) folds the
queries ``query.reshape(B, T * H, d_k)`` so that one ``baddbmm`` against the single key head
``(B, d_k, S)`` scores every (token, head) row at once, and views the scores back ``(B, T, H, S)``; the
weights are folded again for ``bmm`` with the one value head and the output viewed back ``(B, T, D)``.
Each row of a matrix product is computed on its own, so rows that pair a token with a head are no
(token, feature) merge: they are batched. What proves it, from what the fold holds and not from sizes:

* the folded axis holds tokens and heads only (no batch entries, no features);
* a matrix product reads it as its rows (the first factor's second-to-last axis), and no other
  operand of that product has a heads axis (the keys have one head, which every row shares);
* the product's result is viewed back at once into axes none of which merges tokens with anything.

The same holds one level up, for a batch: axial attention (lucidrains/axial-attention's ``PermuteToFrom``) folds
the batch, the grid axis it does not attend along and the heads into one leading axis (``reshape(b * h, -1, e)``
of ``[B·Wp, Hp, d_k]`` heads: ``[B·Wp·H, Hp, d_k]``) and attends along the other grid axis. What proves it:

* the folded axis holds tokens and heads (and batch entries), no features;
* every op that reads it is a product that keeps it in every operand and in its result (a batch axis, each
  entry computed on its own: ``einsum('bie,bje->bij')``, ``bmm``'s first axis);
* that product scores or weighs queries against keys along another token axis (an axis with a query or key
  role, of tokens outside the fold, or of a declared size with no role said: diffusers' temporal attention folds
  ``(B·N·H, F, d_k)`` and attends along the frames ``F``).

A fold that nothing multiplies, or that multiplies keys with heads, or that is never undone keeps its
``tokens-merged-with-features`` warning (``view(B, T, H, d_k).reshape(B, T * H, d_k)``: the teaching
aid of tests/engine/test_diagnose_merges.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.axes import coalesce
from shapetrace.engine.events import readers_of
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family, is_matrix_product
from shapetrace.engine.vocabulary import Role

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic
    from shapetrace.engine.events import Event

_MERGES = ("error", "warning")


def batched_row_folds(analysis: Analysis, found: list[Diagnostic]) -> list[Diagnostic]:
    """``found`` less the ``tokens-merged-with-features`` warnings on folds of tokens with heads that a
    product against one key/value head reads as its rows and that are undone right after it."""
    readers = readers_of(analysis.events)
    return [d for d in found if not (d.kind == Kind.TOKENS_MERGED_WITH_FEATURES and d.severity == "warning"
                                     and (_batched_rows(analysis, readers, analysis.events[d.event])
                                          or _batched_attention(analysis, readers, analysis.events[d.event])
                                          or _leading_batch(analysis, readers, analysis.events[d.event])
                                          or _undone_untouched(analysis, readers, analysis.events[d.event])))]


#: families that compute each entry from the entries at the same position only (a fold read by them mixes nothing)
_IN_PLACE = (Family.WRITE, Family.MASK_FILL, Family.ELEMENTWISE, Family.DROPOUT)


def _undone_untouched(analysis: Analysis, readers: dict, e: Event) -> bool:
    """The fold (batch entries, tokens and heads, no features) is only written or combined entry by entry, keeping
    every axis, until a view undoes it into axes that merge nothing (d2l's ``masked_softmax``: the scores
    ``[B·H, T, T]`` viewed ``reshape(-1, T)`` so that ``sequence_mask`` fills each query's row, then viewed back
    ``reshape(shape)``). Nothing reads across the fold before it is undone: a layout round trip, not a merge."""
    namer = analysis.namer
    folded = e.outputs[0]
    merged = [a for a in folded.axes if namer.mix_kind(a) in _MERGES]
    if len(merged) != 1:
        return False
    roles = {namer.role(namer.atom_label(a)) for a in coalesce(merged[0].atoms)}
    if Role.TOKENS not in roles or not roles <= {Role.TOKENS, Role.HEADS, Role.BATCH} or len(roles) < 2:
        return False
    return _read_then_undone(namer, readers, e.index, folded.axes, 0)


def _read_then_undone(namer, readers: dict, index: int, axes: tuple, depth: int) -> bool:
    uses = readers.get((index, 0), [])
    if not uses or depth > 8:
        return False
    for r, _ in uses:
        if r.spec is None or not r.outputs:
            return False
        if r.spec.family is Family.RESHAPE:
            if any(namer.mix_kind(a) in _MERGES for a in r.outputs[0].axes):
                return False
        elif r.spec.family not in _IN_PLACE or r.outputs[0].axes != axes \
                or not _read_then_undone(namer, readers, r.index, axes, depth + 1):
            return False
    return True


def _leading_batch(analysis: Analysis, readers: dict, e: Event) -> bool:
    """The fold (batch entries, tokens and heads, no features) is the leading axis of a tensor of three or more
    axes (once reorders that keep it put it there: ``nn.MultiheadAttention``'s ``view(S, bsz * num_heads, d_k)`` then
    ``transpose(0, 1)``, over ClimaX's batch of patches ``B·L``) that only batched matrix products read, each
    keeping it as its result's leading axis, with every other
    operand's leading axis the fold or unnamed (ConvBERT's dynamic kernels ``[B·T·H, k, 1]``: that operand's
    ops are then unchecked, so the verdict stays ``?``), the result undone at once into axes that merge nothing.
    Each entry of a batched product is computed on its own: a batch, not a merge."""
    namer = analysis.namer
    folded = e.outputs[0]
    merged = [a for a in folded.axes if namer.mix_kind(a) in _MERGES]
    if len(folded.axes) < 3 or len(merged) != 1:
        return False
    fold = merged[0]
    roles = {namer.role(namer.atom_label(a)) for a in coalesce(fold.atoms)}
    if not {Role.TOKENS, Role.HEADS} <= roles <= {Role.TOKENS, Role.HEADS, Role.BATCH}:
        return False
    if Role.BATCH not in roles:   # (T·H with the batch elsewhere, attended over: MHA fed [B, T, D] sequence-first)
        uses = [p for p, _ in readers.get((e.index, 0), [])] if folded.axes[0] == fold else []
        return bool(uses) and all(_leads_product(namer, readers, p, fold, at_once=True) for p in uses)
    uses = _through_reorders(readers, e.index, fold)   # (nn.MultiheadAttention's k.view(S, bsz * H, d_k).transpose)
    return bool(uses) and all(_leads_product(namer, readers, p, fold) for p in uses)


def _leads_product(namer, readers: dict, p: Event, fold, at_once: bool = False) -> bool:
    """``p`` is a batched matrix product whose result leads with ``fold``, each operand leading with it or with
    an unnamed axis, and whose result no reader merges."""
    if p.spec is None or not is_matrix_product(p.spec) or not p.outputs:
        return False
    tensors = [*p.inputs, p.outputs[0]]
    if any(len(t.axes) < 3 for t in tensors) or p.outputs[0].axes[0] != fold:
        return False
    if any(t.axes[0] != fold and t.dims[0] is not None for t in p.inputs):
        return False
    return _kept_until_undone(namer, readers, p.index, fold, at_once)


#: what may read a batch fold on its way back without reading across it (the fold kept as an axis of its own)
_ALONG_OTHERS = (Family.AXIS_ORDER, Family.CONTIGUOUS, Family.DROPOUT, Family.ELEMENTWISE, Family.MASK_FILL,
                 Family.SOFTMAX)


def _kept_until_undone(namer, readers: dict, index: int, fold, at_once: bool = False, depth: int = 0) -> bool:
    """Every reader of result ``index`` undoes the fold (its results merge nothing), or keeps it as an axis of its
    own while it computes along others (a softmax over the keys, a reorder, a batched product leading with it:
    ``nn.MultiheadAttention``'s weights, their product with the values, ``transpose(0, 1)``) and is read so in turn
    (``at_once``: every reader undoes it, nothing between)."""
    after = readers.get((index, 0), [])
    if not after:
        return False
    for r, _ in after:
        if not r.outputs or r.spec is None:
            return False
        if not any(namer.mix_kind(a) in _MERGES for o in r.outputs for a in o.axes):
            continue   # (undone)
        kept = r.outputs[0].axes.index(fold) if fold in r.outputs[0].axes else None
        dim = r.params.get("dim") if r.spec.family is Family.SOFTMAX else None
        across = isinstance(dim, int) and kept is not None and dim % len(r.outputs[0].axes) == kept
        product = is_matrix_product(r.spec) and kept == 0
        if kept is None or across or at_once or depth >= 8 or not (r.spec.family in _ALONG_OTHERS or product) \
                or not _kept_until_undone(namer, readers, r.index, fold, depth=depth + 1):
            return False
    return True


def _batched_attention(analysis: Analysis, readers: dict, e: Event) -> bool:
    """The fold is a batch axis of every product that reads it, and those products attend along other tokens."""
    namer = analysis.namer
    folded = e.outputs[0]
    axes = [a for a in folded.axes if namer.mix_kind(a) in _MERGES]
    if len(axes) != 1:
        return False
    fold = axes[0]
    roots = {atom.root for atom in coalesce(fold.atoms)}
    roles = {namer.role(namer.atom_label(a)) for a in coalesce(fold.atoms)}
    if not {Role.TOKENS, Role.HEADS} <= roles <= {Role.TOKENS, Role.HEADS, Role.BATCH}:
        return False
    uses = _through_reorders(readers, e.index, fold)
    return bool(uses) and all(_attends_batched(namer, p, fold, roots) for p in uses)


def _through_reorders(readers: dict, index: int, fold, depth: int = 0) -> list[Event]:
    """The ops that read result ``index``, each reorder of its axes that keeps ``fold`` read through (diffusers'
    ``key.transpose(-1, -2)`` before ``baddbmm``)."""
    found = []
    for r, _ in readers.get((index, 0), []):
        keeps = r.spec is not None and r.spec.family in (Family.AXIS_ORDER, Family.CONTIGUOUS) and r.outputs \
            and fold in r.outputs[0].axes
        found += _through_reorders(readers, r.index, fold, depth + 1) if keeps and depth < 4 else [r]
    return found


def _attends_batched(namer, p: Event, fold, roots: set) -> bool:
    """``p`` is a product that keeps ``fold`` in every operand and its result, and pairs queries with keys along
    a token axis outside the fold."""
    if p.spec is None or p.spec.family is not Family.PRODUCT or not p.outputs:
        return False
    tensors = [*p.inputs, p.outputs[0]]
    if not all(fold in t.axes for t in tensors):
        return False
    def outside(a) -> bool:
        return all(atom.root not in roots and _tokens_or_unsaid(namer, atom) for atom in coalesce(a.atoms))
    return any(a.role in ("query", "key") and outside(a) for t in tensors for a in t.axes) or any(
        len(t.axes) >= 3 and t.dims[-1] == t.dims[-2] and outside(t.axes[-1]) and outside(t.axes[-2])
        for t in tensors)   # (scores over a sequence whose role was not said: [fold, F, F])


def _tokens_or_unsaid(namer, atom) -> bool:
    """An atom of tokens, or of a declared size whose role was not said (diffusers' frames ``F``, attended along by
    ``TransformerTemporalModel``); never batch, heads or features."""
    role = namer.role(namer.atom_label(atom))
    return role == Role.TOKENS and namer.is_token_root(atom.root) or role is None and atom.root in namer.dims


def _batched_rows(analysis: Analysis, readers: dict, e: Event) -> bool:
    namer = analysis.namer
    folded = e.outputs[0]
    axes = [i for i, a in enumerate(folded.axes) if namer.mix_kind(a) in _MERGES]
    if len(axes) != 1 or axes[0] != len(folded.axes) - 2 or not _tokens_and_heads(namer, folded.axes[axes[0]]):
        return False
    uses = readers.get((e.index, 0), [])
    return bool(uses) and all(_product_of_one_head(analysis, readers, p, j) for p, j in uses)


def _tokens_and_heads(namer, axis) -> bool:
    roles = {namer.role(namer.atom_label(a)) for a in coalesce(axis.atoms)}   # H: a piece of D named by it
    return roles == {Role.TOKENS, Role.HEADS}


def _product_of_one_head(analysis: Analysis, readers: dict, p: Event, j: int) -> bool:
    """``p`` reads the fold as its rows, no other operand has heads, and its result is undone at once."""
    namer = analysis.namer
    if p.spec is None or not is_matrix_product(p.spec) or j == len(p.inputs) - 1:
        return False
    others = [t for k, t in enumerate(p.inputs) if k != j]
    if any(namer.role(namer.atom_label(atom)) == Role.HEADS for t in others for a in t.axes
           for atom in coalesce(a.atoms)):
        return False   # keys with heads of their own (folded too: every row would meet every head)
    after = readers.get((p.index, 0), [])
    return bool(after) and all(not any(namer.mix_kind(a) in _MERGES for o in r.outputs for a in o.axes)
                               for r, _ in after)
