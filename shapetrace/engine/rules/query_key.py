"""Scores computed as ``k @ qᵀ`` (part of ``diagnose.RULES``): rows of key tokens, columns of query tokens, so a
softmax over the last axis weighs queries and each output row belongs to a key.

Reads: each product's operands' projections (``Event.projections``: which of q, k, v made each), the names of its
output's last two axes and, for an einsum, its subscripts. Adds: ``query-key-swapped`` findings. Provenance
outranks names: a product of the key projection by the query projection is swapped wherever its columns count
tokens; names alone (``[..., S, T]`` from a product over features) decide only where S and T were not told apart
by their sizes alone, where neither operand's projection puts it in the order ``q @ kᵀ``, and where no product
of the run gives ``[..., T, S]`` too (each sequence the queries of one block and the keys of another: LUKE).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family, contracts_by_subscripts
from shapetrace.engine.rules.channels import contracted_pairs

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic
    from shapetrace.engine.events import Event


def _over_features(e: Event, analysis: Analysis) -> bool:
    """Is this product a q·k one (it sums over head features or features)?"""
    roles = {analysis.namer.role(lab) for pair in contracted_pairs(e) for lab in pair if lab}
    return bool(roles) and roles <= {"head_features", "features"}


def query_key_order(analysis: Analysis) -> list[Diagnostic]:
    """Scores computed as ``k @ qᵀ``: the rows are key tokens, so each softmax row mixes queries."""
    out = []
    both_ways = _both_ways(analysis)
    for e in analysis.events_of(Family.PRODUCT):
        rows_cols = e.outputs[0].dims[-2:] if e.outputs and len(e.outputs[0].dims) >= 2 else ()
        sources = _rows_and_columns_from(e)
        if sources is None:
            continue
        made_by = tuple(e.projections[i] if i < len(e.projections) else None for i in sources)
        swapped = (made_by == ("k", "q") and _columns_are_tokens(e, analysis)) or (
            not _standard_by_provenance(made_by) and not both_ways and tuple(rows_cols) == ("S", "T")
                                             and _over_features(e, analysis)
                                             and not _sequences_told_by_size(e, analysis))   # provenance outranks names
        if swapped and sources == (1, 0):   # an einsum whose output puts its second operand's tokens first
            rows, cols = e.inputs[1], e.inputs[0]
            out.append(Kind.QUERY_KEY_SWAPPED.found(e.index, (
                f"{e.op} #{e.index} ('{_subscripts_text(e)}') puts the tokens of the keys "
                f"{fmt_named(rows.dims, rows.shape)} on the scores' rows and those of the queries "
                f"{fmt_named(cols.dims, cols.shape)} on their columns, so a softmax over the last axis weighs "
                "queries, not keys, and each output row belongs to a key."),
                "Put the queries' token letter first in the output: the scores are [..., queries, keys]."))
        elif swapped:
            a, b = e.inputs[0], e.inputs[1]
            out.append(Kind.QUERY_KEY_SWAPPED.found(e.index, (
                f"{e.op} #{e.index} multiplies the keys {fmt_named(a.dims, a.shape)} by the queries "
                f"{fmt_named(b.dims, b.shape)}: the scores' rows are key tokens and their columns query tokens, "
                "so a softmax over the last axis weighs queries, not keys, and each output row belongs to a "
                "key."), "Put the queries first: scores = q @ k.transpose(-2, -1)."))
    return out


def _both_ways(analysis: Analysis) -> bool:
    """Do products over features give both ``[..., T, S]`` and ``[..., S, T]`` scores? Then each sequence is the
    queries of one and the keys of the other (LUKE's word-to-entity and entity-to-word blocks, ViLBERT's
    co-attention), and the names ``S`` and ``T`` say nothing of which side is the keys."""
    found = {tuple(e.outputs[0].dims[-2:]) for e in analysis.events_of(Family.PRODUCT)
             if e.outputs and len(e.outputs[0].dims) >= 2 and _over_features(e, analysis)}
    return {("S", "T"), ("T", "S")} <= found


def _standard_by_provenance(made_by: tuple[str | None, ...]) -> bool:
    """Does either operand's projection put it where scores = q @ kᵀ has it (the query projection's output
    on the rows, or the key projection's on the columns)? Then the names do not decide: LUKE's entity-to-word
    block, ``e2w_query(entities) @ key(words)ᵀ``, is ``[..., S, T]`` with the entities as its queries."""
    return made_by[:1] == ("q",) or made_by[1:2] == ("k",)


def _columns_are_tokens(e: Event, analysis: Analysis) -> bool:
    """Do the product's columns count tokens? ``query_proj`` on DeBERTa's relative-position table gives
    rows of positions, not of query tokens: ``bmm(keys, pos_queryᵀ)`` is its p2c table, not swapped scores."""
    return analysis.namer.plain_role(e.outputs[0].dims[-1]) == "tokens"


def _sequences_told_by_size(e: Event, analysis: Analysis) -> bool:
    """S and T of equal length, named from sizes alone: which is which was a guess, so no rule rests on it."""
    shape = e.outputs[0].shape
    return analysis.seeded_by_size and shape[-1] == shape[-2]


def _rows_and_columns_from(e: Event) -> tuple[int, int] | None:
    """Which operands give a product's last two output axes: ``(0, 1)`` for ``a @ b``; an einsum by
    its subscripts (``bhqd,bhkd->bhkq`` gives ``(1, 0)``); None when the subscripts do not say."""
    if not contracts_by_subscripts(e.spec):
        return (0, 1)
    parsed = e.params.get("subscripts")
    if not parsed or len(parsed.get("inputs", ())) != 2 or len(parsed.get("output", "")) < 2:
        return None
    found = []
    for letter in parsed["output"][-2:]:
        owners = [i for i, term in enumerate(parsed["inputs"]) if letter in term]
        if len(owners) != 1:
            return None   # a letter in both operands is batch, not a row or a column
        found.append(owners[0])
    return (found[0], found[1]) if found[0] != found[1] else None


def _subscripts_text(e: Event) -> str:
    parsed = e.params.get("subscripts") or {}
    return ",".join(parsed.get("inputs", ())) + "->" + parsed.get("output", "")
