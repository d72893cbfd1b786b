"""Rules over a run's inferred events that find the silent attention bugs.

Each rule takes the :class:`~shapetrace.engine.analysis.Analysis` (plain data: events, the name
store, the named sizes, the values read after the run), never the recorder, and returns
:class:`Diagnostic` records (plain data). A correct implementation gets none
at severity ``error`` or ``warning``, whatever its sizes (T = H included).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from shapetrace.engine.axes import (
    COPIES,
    MIXED_PREFIX,
    TOKEN_ROOTS,
    as_parallel_part,
    coalesce,
    has_tokens,
    lines_up_through_copies,
    merges_neighbours,
    patch_steps,
    top_level_terms,
)
from shapetrace.engine.diagnostic import SEVERITY_ORDER, Diagnostic
from shapetrace.engine.faults import check_failed, faults_raise, inference_faults
from shapetrace.engine.formatting import fmt_named, spelled
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family, OpSpec, contracts_by_subscripts, is_matrix_product, is_projection
from shapetrace.engine.rules.averaged_heads import pooled_per_head
from shapetrace.engine.rules.batch_picks import batch_picked, batch_reduced
from shapetrace.engine.rules.batch_tables import picked_at_length, table_cut_to_batch
from shapetrace.engine.rules.cache_slots import skipped_cache_slots
from shapetrace.engine.rules.cached_chunks import chunk_unmasked
from shapetrace.engine.rules.causes import one_per_bug
from shapetrace.engine.rules.channels import attention_over_features, contracted_pairs
from shapetrace.engine.rules.contracts import (
    CONTRACT_RULES,
    contraction_fix,
    cut_across,
    reordered_factors,
    told_apart,
)
from shapetrace.engine.rules.directions import direction
from shapetrace.engine.rules.flattened_sequences import flattened_sequences
from shapetrace.engine.rules.fused_mask_order import fused_mask_batch_order
from shapetrace.engine.rules.fused_parts import fused_parts_taken_twice
from shapetrace.engine.rules.head_blocks import part_heads_pair
from shapetrace.engine.rules.head_mixing import heads_mixed_by_matrix
from shapetrace.engine.rules.head_split import head_split_order, pattern_contradictions
from shapetrace.engine.rules.indices import index_axes
from shapetrace.engine.rules.joins import cat_sizes, joined_parts_disagree, projections_joined
from shapetrace.engine.rules.key_sequences import keys_change_sequence, positions_across_sequences
from shapetrace.engine.rules.library import at_the_users_call
from shapetrace.engine.rules.masks import VARIANT_RULES
from shapetrace.engine.rules.norm_heads import norm_across_heads, norm_one_sided
from shapetrace.engine.rules.one_entry_sums import normalised_over_one_entry
from shapetrace.engine.rules.order import tokens_in_two_orders, tokens_returned_out_of_order
from shapetrace.engine.rules.query_key import query_key_order
from shapetrace.engine.rules.reductions import (
    contraction_axis,
    normalised_over_tokens,
    pooled_over_padding,
    reduction_axis,
    stabiliser_axis,
    statistics_over_tokens,
)
from shapetrace.engine.rules.rolls import rolls_not_undone
from shapetrace.engine.rules.rotary import rotary_one_sided, rotary_pairing
from shapetrace.engine.rules.row_folds import batched_row_folds
from shapetrace.engine.rules.scans import scan_axis
from shapetrace.engine.rules.steps import positions_restart, step_hides_itself
from shapetrace.engine.rules.tables import table_heads_rechopped
from shapetrace.engine.rules.undone_regroups import undone_regroups
from shapetrace.engine.rules.unexercised import regrouped_ones, unexercised_masks
from shapetrace.engine.rules.unread import (
    bypassed_projections,
    causal_over_packed_rows,
    ids_read_by_two_tables,
    positions_shared_over_padding,
    unread_inputs,
)
from shapetrace.engine.rules.weighted_values import keys_and_values_swapped, values_by_queries
from shapetrace.engine.rules.weights import softmax_elsewhere_meant, softmax_weights, weights_summed_elsewhere
from shapetrace.engine.rules.writes import swap_for, write_behind
from shapetrace.engine.vocabulary import GRID_AXES, ROLES, Role

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.events import Event, TensorInfo


def diagnose(analysis: Analysis) -> list[Diagnostic]:
    """All findings of an analysis, errors first, then in event order."""
    found: list[Diagnostic] = inference_faults(analysis)
    for rule in RULES:
        try:
            found.extend(rule(analysis))
        except Exception as exc:   # a fault of the rule itself: the other rules still speak
            if faults_raise():
                raise
            found.append(check_failed(rule.__name__, exc))
    found = _merges_projected_later(analysis, undone_regroups(analysis, batched_row_folds(analysis, found)))
    found = flattened_sequences(analysis, found)   # (after the upgrade: a readout's merge is dropped as an error too)
    mixed = {d.event for d in found if d.kind == Kind.MIXED_AXIS and d.severity == "error"}
    found = [d for d in found if not (d.kind == Kind.TOKENS_REGROUPED_WITH_BATCH and d.event in mixed)]
    found = at_the_users_call(analysis, one_per_bug(analysis, _on_what_reaches_the_output(analysis, found)))
    seen: set[tuple[str, str]] = set()
    unique = []
    for d in found:  # one report per kind and source line (q, k and v share a line)
        key = (d.kind, analysis.events[d.event].source if d.event is not None else "")
        if key not in seen:
            seen.add(key)
            unique.append(d)
    return sorted(unique, key=lambda d: (SEVERITY_ORDER[d.severity], d.event if d.event is not None else -1))


#: kinds that are about a value the code dropped: they are found on the dropped op itself
_ABOUT_DROPPED = frozenset({Kind.PROJECTION_BYPASSED, Kind.INPUT_UNREAD})


def _on_what_reaches_the_output(analysis: Analysis, found: list[Diagnostic]) -> list[Diagnostic]:
    """``found`` without the findings on ops whose results reach nothing the model returned (lag-llama's
    ``q, _ = apply_rotary_pos_emb(...)``: keys rotated and thrown away): no element of theirs is in the output."""
    dropped = analysis.dropped
    return [d for d in found if d.event not in dropped or d.kind in _ABOUT_DROPPED]


def _plain(label: str | None) -> str:
    return (label or "?").lstrip(MIXED_PREFIX).replace("*", " and ")


# ---------------------------------------------------------------------------
# rules
# ---------------------------------------------------------------------------

def mixed_axes(analysis: Analysis) -> list[Diagnostic]:
    """An axis holding pieces of tokens or batch entries mixed with anything else (the worst axis of
    each op is reported: an error before a warning before a note)."""
    out = []
    namer = analysis.namer
    # the same tensors in every layer (inference shares one TensorInfo per layout and names): the same
    # verdict, keyed by the infos' identity (the analysis keeps them alive)
    worst: dict[tuple[int, ...], tuple | None] = {}
    for e in analysis.events:
        if not e.outputs or not e.inputs:
            continue
        key = (id(e.outputs[0]), *map(id, e.inputs))
        if key not in worst:
            worst[key] = _worst_mix(e, namer)
        found = worst[key]
        if found is not None:
            _, i, kind, label = found
            out.append(_mix_diagnostic(e, i, kind, label))
    return out


def _worst_mix(e: Event, namer) -> tuple | None:
    """``(order, axis, kind, label)`` of the worst regrouping among the output's new labels, or None."""
    before = {lab for t in e.inputs for lab in t.dims}
    o = e.outputs[0]
    found = [(MIX_ORDER[kind], i, kind, label) for i, (axis, label) in enumerate(zip(o.axes, o.dims))
             if label not in before and (kind := namer.mix_kind(axis)) in MIX_ORDER
             and not (kind == "warning" and _holds_indices(o))]
    return min(found) if found else None


def _holds_indices(t: TensorInfo) -> bool:
    """Integers or booleans (Pointcept's neighbour indices ``idx.view(-1)`` before a gather): no features, so
    flattening tokens with another axis pairs no token with a feature."""
    return _INTEGERS.search(t.dtype) is not None


#: the names a root is made of (``!T*d_k`` -> T, d_k)
_WORDS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: an integer or boolean dtype's name (``torch.int64``, ``uint8``, ``bool``)
_INTEGERS = re.compile(r"int\d|bool")


#: which kind of regrouping wins when one op makes several
MIX_ORDER = {"error": 0, "warning": 1, "windows": 2}


def _mix_diagnostic(e: Event, i: int, kind: str, label: str | None) -> Diagnostic:
    if kind == "error":
        return Kind.MIXED_AXIS.found(e.index, _mixed_message(e, i, label), _mixed_fix(e, label), blame=((-1, i),))
    if kind == "warning":
        return Kind.TOKENS_MERGED_WITH_FEATURES.found(e.index, _merged_message(e, i, label), _merged_fix(e),
                                                     blame=((-1, i),))
    src, o = e.inputs[0], e.outputs[0]
    offsets = all(a.stride == 1 for a in o.axes[i].atoms if not a.whole)   # (T%3: a place in each block, not a block)
    return Kind.TOKENS_REGROUPED_WITH_BATCH.found(e.index, (
        f"{e.op} #{e.index} turns {fmt_named(src.dims, src.shape)} into {fmt_named(o.dims, o.shape)}: axis {i} "
        + ("groups the tokens by their place in each block (with batch entries, if any): each entry holds tokens "
           "a stride apart. That is how strided attention (the Sparse Transformer's, Jukebox's) batches them."
           if offsets else "groups blocks of tokens (with batch entries, if any). That is how windowed attention "
           "(Swin's windows, local chunks) batches its windows.")),
        "If the code meant to go sequence-first, that is transpose(0, 1), not a view.")


def _merged_message(e: Event, i: int, label: str | None) -> str:
    src, o = e.inputs[0], e.outputs[0]
    return (f"{e.op} #{e.index} turns {fmt_named(src.dims, src.shape)} into {fmt_named(o.dims, o.shape)}: axis {i} "
            f"flattens {_plain(label)} into one axis, so each of its entries is a {_pair(label, o.namer)}. "
            "That is fine as a layout exercise.")


#: what one entry of an axis of each role is, for the pair a merged axis holds
_ENTRY_WORDS = {"batch": "batch entry", "tokens": "token", "heads": "head"}


def _pair(label: str | None, namer=None) -> str:
    """``(token, head) pair``: what each entry of an axis that flattens these names holds, by each name's role
    (timm's tokens are ``N``); a name of no such role holds features."""
    role = namer.plain_role if namer is not None else {"B": "batch", "T": "tokens", "H": "heads"}.get
    words = [_ENTRY_WORDS.get(role(name), "feature") for name in _plain(label).split(" and ")]
    return f"({', '.join(words)}) {'pair' if len(words) == 2 else 'tuple'}"


def _merged_fix(e: Event) -> str:
    """Heads already behind the tokens ([B, T, H, d_k]) merge with their features where they are; heads
    in front of the tokens are moved back first."""
    src_dims = e.inputs[0].dims
    if "H" in src_dims and "T" in src_dims and src_dims.index("T") < src_dims.index("H"):
        return MERGE_IN_PLACE
    return ("In attention it usually means the heads were merged without moving the tokens back in front: "
            "transpose(1, 2) before .contiguous().view(B, T, D).")


#: the fix for a merge of [B, T, H, d_k] that joins T with H: join H with d_k, the neighbours that make D
MERGE_IN_PLACE = ("Merge each head with its features, the neighbours that make D: .view(B, T, H * d_k) "
                  "turns [B, T, H, d_k] into [B, T, D].")


def _merges_projected_later(analysis: Analysis, found: list[Diagnostic]) -> list[Diagnostic]:
    """A (token, feature) merge that a later linear layer projects over is not a layout exercise: that
    use proves the merge wrong, so its warning becomes an error that names the projection (at T == H,
    ``y.reshape(B, T, D)`` of [B, H, T, d_k] is read as [B, H, T·d_k], and only the linear shows it)."""
    projected: dict = {}
    for e in analysis.events_of(Family.PROJECTION):
        if e.inputs and e.inputs[0].axes:
            projected.setdefault(e.inputs[0].axes[-1], e)
    out = []
    for d in found:
        e = analysis.events[d.event] if d.kind == Kind.TOKENS_MERGED_WITH_FEATURES else None
        later = [projected[a] for a in (e.outputs[0].axes if e is not None else ()) if a in projected]
        later = [p for p in later if p.index > e.index]
        if later:
            p = later[0]
            d = replace(d, severity="error", message=d.message.replace(
                "That is fine as a layout exercise.",
                f"{p.op} #{p.index} then projects over that axis, so each output feature mixes tokens: the "
                "merge was not a layout exercise."))
        out.append(d)
    return out


def projection_over_tokens(analysis: Analysis) -> list[Diagnostic]:
    """A linear layer whose feature axis contains tokens mixes different tokens together."""
    out = []
    for e in analysis.events_of(Family.PROJECTION):
        if not e.inputs or not e.inputs[0].axes:
            continue
        x = e.inputs[0]
        if has_tokens(x.axes[-1]) and not merges_neighbours(coalesce(x.axes[-1].atoms), analysis.namer) \
                and not patch_steps(x.axes, len(x.axes) - 1, analysis.namer):   # (a patch embedding)
            names = {word for a in x.axes[-1].atoms for word in _WORDS.findall(a.root)}   # (a mix's parts too)
            held = "tokens" if any(analysis.namer.role(n) == "tokens" for n in names) \
                else "batch entries"   # (B·H/2·d_k: heads read as the batch)
            out.append(Kind.PROJECTION_OVER_TOKENS.found(e.index, (
                f"{e.op} #{e.index} projects {fmt_named(x.dims, x.shape)} over its last axis "
                f"({_plain(x.dims[-1])}), which holds {held}: the projection mixes different {held} "
                "into each output feature."), (
                "Its input should be [B, T, D]; after attention, move the heads back behind the tokens "
                "with transpose(1, 2) before merging them."), blame=((0, len(x.axes) - 1),)))
    return out


def _mixed_message(e: Event, i: int, label: str | None) -> str:
    src, o = e.inputs[0], e.outputs[0]
    parts = _plain(label)
    msg = (f"{e.op} #{e.index} turns {fmt_named(src.dims, src.shape)} into {fmt_named(o.dims, o.shape)}: "
           f"axis {i} (size {o.shape[i]}) holds pieces of {parts}, so its entries mix ")
    return msg + _what_mixes(set(parts.split(" and "))) + ". The tensor has the right shape but the wrong contents."


_GRID_WORDS = {"Fp": "frames", "Hp": "rows", "Wp": "columns"}


def _what_mixes(roots: set[str]) -> str:
    """What an axis holding pieces of ``roots`` mixes, by their roles (sam2's ``Hp`` and ``Wp``: no batch)."""
    if not roots <= TOKEN_ROOTS:
        return "different tokens together"
    if roots <= GRID_AXES:
        return "the patch grid's " + " and ".join(w for r, w in _GRID_WORDS.items() if r in roots)
    return "batch entries and tokens" if any(ROLES[r] == Role.BATCH for r in roots) else "different tokens together"


def _mixed_fix(e: Event, label: str | None) -> str:
    parts, src_dims = _plain(label), e.inputs[0].dims
    if "B" in parts and "T" in parts and not ({"H", "d_k", "D"} & set(parts.split(" and "))):
        return "To swap the batch and sequence axes, use transpose(0, 1); view/reshape never move data."
    if "D" in src_dims and {"Hp", "Wp", "N"} & set(src_dims[src_dims.index("D") + 1:]):   # a conv's map
        return ("Move the features last before reading patches as tokens: x.flatten(2).transpose(1, 2) turns "
                "[B, D, Hp, Wp] into [B, N, D] (a view; or x.permute(0, 2, 3, 1).reshape(B, -1, D)).")
    if "H" in src_dims and "T" in src_dims and src_dims.index("H") < src_dims.index("T"):
        return ("Merge heads by moving them back behind the tokens first: "
                "transpose(1, 2) to [B, T, H, d_k], then .contiguous().view(B, T, D).")
    if e.outputs and len(e.outputs[0].shape) < len(e.inputs[0].shape) and \
            {"H", "d_k"} <= set(src_dims) and src_dims.index("H") + 1 == src_dims.index("d_k"):
        return MERGE_IN_PLACE   # a merge of [B, T, H, d_k] that cut across T: merge, do not split
    return ("Split the features where they are: view(B, T, H, d_k), then transpose(1, 2) "
            "to move the heads ahead of the tokens.")


def _multiplies(op: OpSpec) -> bool:
    """Can :func:`_matmul_pairs` find what ``op`` contracts (a matrix product, or einsum)?"""
    return is_matrix_product(op) or contracts_by_subscripts(op)


_matmul_pairs = contracted_pairs


def _contracted_axes(e: Event) -> tuple[tuple[int, int], ...]:
    """The ``(operand, axis)`` pairs a matrix product sums over (``a``'s last, ``b``'s second to last)."""
    if not is_matrix_product(e.op) or len(e.inputs) != 2 or len(e.inputs[1].shape) < 2:
        return ()
    return ((0, len(e.inputs[0].shape) - 1), (1, len(e.inputs[1].shape) - 2))


def contraction(analysis: Analysis) -> list[Diagnostic]:
    """A matmul that sums over two different named axes that happen to share a size."""
    out = []
    for e in analysis.events_where(_multiplies):
        for la, lb in _matmul_pairs(e):
            if told_apart(la, lb, analysis):
                a, b = e.inputs
                why = cut_across(la, lb, analysis.namer, analysis.dims)
                if reordered_factors(la, lb, analysis.dims, analysis.namer) is None:   # (not one grid flattened twice)
                    why = f": different axes that only happen to have the same size ({a.shape[-1]}){why}"
                out.append(Kind.CONTRACTS_DIFFERENT_AXES.found(e.index, (
                    f"{e.op} #{e.index} multiplies {fmt_named(a.dims, a.shape)} by {fmt_named(b.dims, b.shape)} and "
                    f"sums over {spelled(la)} of the first with {spelled(lb)} of the second{why}."),
                    contraction_fix(la, lb, analysis.namer, analysis.dims), blame=_contracted_axes(e)))
                break
    return out


def batch_axes(analysis: Analysis) -> list[Diagnostic]:
    """Batched matmul whose batch axes disagree, or that batches over tokens."""
    out = []
    # the same operands in every layer (inference shares one TensorInfo per layout and names): judged
    # once, keyed by the infos' identity (the analysis keeps them alive)
    verdicts: dict[tuple[int, int, int], tuple] = {}
    for e in analysis.events_where(is_matrix_product):
        if len(e.inputs) != 2 or not e.outputs:
            continue
        a, b, o = e.inputs[0], e.inputs[1], e.outputs[0]
        nb = len(o.shape) - 2
        if nb <= 0 or len(a.shape) < 2 or len(b.shape) < 2:
            continue
        key = (id(a), id(b), id(o))
        if key not in verdicts:
            batched, mismatched = _tokens_as_batch(o, nb, analysis.namer), _batch_mismatch(a, b, nb)
            chunked = batched is not None and (_sums_chunks(a, b, o, batched[0]) or (
                mismatched is None and _sums_over_tokens(a, b, analysis.namer)))
            verdicts[key] = (mismatched, None if chunked else batched)
        mismatch, batched = verdicts[key]
        if mismatch is not None:
            k, la, lb = mismatch
            written = _written_wrong(analysis, e, k + 3)
            out.append(written if written is not None else Kind.BATCH_MISMATCH.found(e.index, (
                f"{e.op} #{e.index} pairs {fmt_named(a.dims, a.shape)} with {fmt_named(b.dims, b.shape)}: "
                f"batch axis {la} of the first lines up with {lb} of the second, so unrelated "
                "slices are multiplied together."),
                "Put the batch axes of both operands in the same order (permute or transpose one of "
                "them) before multiplying.", blame=((0, len(a.shape) - 3 - k), (1, len(b.shape) - 3 - k))))
        if batched is not None:
            token, rows_cols = batched
            out.append(Kind.ATTENDS_OVER_WRONG_AXIS.found(e.index, (
                f"{e.op} #{e.index} treats {token} as a batch axis and multiplies "
                f"{' x '.join(str(x) for x in rows_cols)} matrices: {fmt_named(o.dims, o.shape)}. Attention must "
                f"mix tokens, but here each token only sees its own heads."),
                "The heads were never moved ahead of the tokens: after view(B, T, H, d_k), call "
                "transpose(1, 2).", blame=((-1, o.dims.index(token)),)))
    return out


def _batch_mismatch(a: TensorInfo, b: TensorInfo, nb: int) -> tuple[int, str, str] | None:
    """``(k, a's label, b's label)`` of the first batch axis, from the right, where the operands line up
    two different names (both of more than one entry); None when they agree."""
    a_batch = list(a.dims[:-2])[-nb:] if len(a.dims) > 2 else []
    b_batch = list(b.dims[:-2])[-nb:] if len(b.dims) > 2 else []
    a_sizes, b_sizes = list(a.shape[:-2])[-nb:], list(b.shape[:-2])[-nb:]
    for k, (la, lb, sa, sb) in enumerate(zip(reversed(a_batch), reversed(b_batch), reversed(a_sizes),
                                             reversed(b_sizes))):
        if la and lb and sa > 1 and sb > 1 and as_parallel_part(la) != as_parallel_part(lb) \
                and MIXED_PREFIX not in la + lb and not _shifted(la, lb) and not _shifted(lb, la) and \
                not _copies_pair(a, b, k + 3) and not part_heads_pair(a, la, b, lb):
            return k, la, lb
    return None


def _shifted(label: str, other: str) -> bool:
    """Is ``other`` the axis ``label`` shifted by a few filled-in entries, ``c+X[0:n-c]`` or ``X[c:n]+c``? A
    chunked scan's exclusive prefix (fla's naive chunked linear attention: ``cat([zeros_like(kv[:, :, :1]),
    kv[:, :, :-1]], 2)``, the states of the chunks before each one) lines chunk i up with the state after
    chunk i - 1 on purpose: one axis, shifted."""
    terms = top_level_terms(other)
    if len(terms) != 2:
        return False
    pad, part = (terms[0], terms[1]) if terms[0].isdigit() else (terms[1], terms[0])
    return pad.isdigit() and part.startswith(f"{label}[") and part.endswith("]") and \
        (part[len(label):] == f"[0:{part[len(label) + 3:-1]}]" if terms[0] == pad else
         part[len(label) + 1:].startswith(f"{pad}:"))


def _copies_pair(a: TensorInfo, b: TensorInfo, j: int) -> bool:
    """Do axes ``-j`` of ``a`` and ``b`` line up once copies pair with anything of their size (multi-query
    attention's one key/value head repeated with ``repeat_interleave``: copies only, as a broadcast; GCViT's
    global query repeated over the windows, ``B·copies`` against ``B·Hp/ws·Wp/ws``)?"""
    x, y = (a.axes[-j] if len(a.axes) >= j else None), (b.axes[-j] if len(b.axes) >= j else None)
    return x is not None and y is not None and any(at.root == COPIES for at in x.atoms + y.atoms) and \
        lines_up_through_copies(x, y)


def _sums_chunks(a: TensorInfo, b: TensorInfo, o: TensorInfo, token: str) -> bool:
    """Does the product batch over one piece of a token axis and sum over another piece of the same one, under
    one clean name in both operands (a chunk's state ``kᵀ v``: batched over the chunks ``T/2``, summed over each
    chunk's tokens ``T%2``: two digits of T's positions, neither the whole)? Then it mixes the tokens of each
    chunk. A whole token axis summed is :func:`_sums_over_tokens`; a mixed axis proves nothing."""
    la, lb = (a.dims[-1] if a.dims else None), (b.dims[-2] if len(b.dims) > 1 else None)
    if not la or la != lb or la == token or MIXED_PREFIX in la or not a.axes:
        return False
    batch = [at for axis, lab in zip(o.axes, o.dims) if lab == token for at in axis.atoms]
    summed = list(a.axes[-1].atoms)
    pieces = batch + summed
    return bool(batch) and len({at.root for at in pieces}) == 1 and all(at.size < at.root_size for at in pieces) \
        and not {at.stride for at in batch} & {at.stride for at in summed}


def _sums_over_tokens(a: TensorInfo, b: TensorInfo, namer) -> bool:
    """Does the product sum over one whole token axis, under one clean name in both operands (each query's weights over
    the keys times its own table of one value per key: TiSASRec's ``attn.unsqueeze(-2) @ time_matrix_V_``, ``[H·B, T,
    1, T] @ [H·B, T, T, d_k]``)? Then, where the batch axes line up, each query mixes the keys: attention is there
    (where they do not, the product pairs unrelated slices, and that stays the finding)."""
    la, lb = (a.dims[-1] if a.dims else None), (b.dims[-2] if len(b.dims) > 1 else None)
    if not la or la != lb or MIXED_PREFIX in la or namer.role(la) != "tokens" or len(b.axes) < 2:
        return False
    return all(len(axis.atoms) == 1 and axis.atoms[0].whole for axis in (a.axes[-1], b.axes[-2]))


def _tokens_as_batch(o: TensorInfo, nb: int, namer) -> tuple[str, list] | None:
    """``(the token label, the matrices' labels)`` when the product batches over a token axis and its
    matrices hold no tokens (each token sees only its own heads); else None. A matrix axis of more than
    one entry with no name may hold tokens (each token's neighbours gathered by ``F.unfold``: NAT's
    ``[B, N, heads, 1, k·k]`` scores), so it proves nothing; nor does a matrix axis that holds the batch (NEZHA's
    relative-position terms ``[T, B·H, T] @ table [T, T, d_k]``: one product per query position over every
    sequence's heads, rows ``B·H``, not a head's own tokens). Nor does an unnamed batch axis: each token's ``K``
    neighbours gathered before a product of ``1 x 1`` matrices (jingraham's Struct2Seq ``NeighborAttention``)."""
    tokens = [lab for lab in o.dims[:nb] if lab and namer.role(lab) == "tokens"]
    rows_cols = [lab for lab in o.dims[nb:]]
    if any(lab is None and size > 1 for lab, size in zip(o.dims, o.shape)):
        return None   # (a batch axis too: Struct2Seq's [B, T, K, H, 1, 1] dot products, K each token's neighbours)
    key_batch = any(namer.role(a.root) == "batch" for axis in o.axes[nb:] for a in axis.atoms)
    if tokens and not key_batch and not any(namer.is_token_root(lab) for lab in rows_cols if lab):
        return tokens[0], rows_cols
    return None


def _written_wrong(analysis: Analysis, e: Event, j: int) -> Diagnostic | None:
    """A product whose batch axis ``-j`` pairs two names, one of which a write into a cache gave its
    operand: the write is the fact that is wrong (values laid out otherwise than the cache), so the
    finding is reported there, naming the product that shows it."""
    for mine in (0, 1):
        t, other = e.inputs[mine], e.inputs[1 - mine]
        w = write_behind(analysis, e, mine, t.axes[-j])
        if w is None:
            continue
        wrong, right = t.dims[-j], other.dims[-j]
        target, value = w.inputs[0], w.inputs[-1]
        swap = swap_for(value.dims, wrong, right)
        return Kind.WRITE_MISMATCH.found(w.index, (
            f"{w.op} #{w.index} writes {fmt_named(value.dims, value.shape)} into {fmt_named(target.dims, target.shape)}"
            f" and so puts {wrong} on the axis where {e.op} #{e.index} later reads {right}: it pairs what it reads "
            f"back from this buffer, {fmt_named(t.dims, t.shape)}, with {fmt_named(other.dims, other.shape)} along "
            f"batch axis {-j}. {wrong} and {right} have the same size ({t.shape[-j]}), so neither the write nor "
            "the product complains."),
            f"Lay the values out like the buffer before writing them: .{swap} on the value."
            if swap else "Lay the values out like the buffer before writing them (a transpose of the value).")
    return None


def softmax_axis(analysis: Analysis) -> list[Diagnostic]:
    """Softmax over anything but the key axis of attention scores."""
    out = []
    for e in analysis.events_of(Family.SOFTMAX):
        if not e.inputs:
            continue
        t = e.inputs[0]
        roles = [a.role for a in t.axes]
        if "key" not in roles:
            continue
        dim = e.params.get("dim")
        if dim is None or e.params.get("implicit_dim"):
            continue   # softmax without dim: contracts.softmax_implicit_dim says which axis torch picked
        dim %= len(t.shape)
        if roles[dim] != "key" and not softmax_elsewhere_meant(analysis, e, dim, roles[dim], roles.index("key")):
            key = roles.index("key")   # (weights summed over the queries they sum to 1 over: the other alignment)
            out.append(Kind.SOFTMAX_WRONG_AXIS.found(e.index, (
                f"{e.op} #{e.index} normalises over axis {dim} ({t.dims[dim] or '?'}, "
                f"{roles[dim] or _role_words(analysis, t.dims[dim])}) of the scores {fmt_named(t.dims, t.shape)}; "
                "each query's "
                f"weights must sum to 1 over the keys, axis {key - len(t.shape)}."),
                # the scores' layout is blamed only where it is unusual (keys not last); with the keys last,
                # the bug is this call's dim, here, not the op that made the axis it ran along
                "Use softmax(scores, dim=-1).", blame=((0, dim),) if key != len(t.shape) - 1 else ()))
    return out


#: how a message says the role of an axis softmax must not normalise over
_ROLE_WORDS = {"heads": "the heads", "batch": "the batch entries", "features": "features",
               "head_features": "a head's features"}


def _role_words(analysis: Analysis, label: str | None) -> str:
    return _ROLE_WORDS.get(analysis.namer.plain_role(label) or "", "not a token axis")


def ambiguous_sizes(analysis: Analysis) -> list[Diagnostic]:
    """Names seeded from sizes alone cannot tell equal-sized axes apart: said only where a seed chose
    between two declared names of equal size and no later use settled which (``analysis.size_choices``),
    never merely because two declared sizes are equal (an input ``[B, T, D]`` at B = H_kv chose nothing)."""
    clashes = analysis.size_choices
    if not clashes:
        return []
    pairs = ", ".join(f"{a} = {b} = {analysis.dims[a]}" for a, b in clashes)
    return [Kind.AMBIGUOUS_SIZES.found(None, (
        f"{pairs}: names found from sizes alone are ambiguous."),
        "Use distinct sizes, or name the input explicitly with shapetrace.name(x, \"B T D\"); names then "
        "flow from op to op.")]


#: the kind of diagnostic for each role the key axis of an attention can wrongly have
WRONG_KEY_AXIS = {"heads": Kind.ATTENDS_OVER_HEADS, "batch": Kind.ATTENDS_OVER_BATCH,
                  "features": Kind.ATTENDS_OVER_FEATURES, "head_features": Kind.ATTENDS_OVER_FEATURES}


def attention_key_axis(analysis: Analysis) -> list[Diagnostic]:
    """Scores ``q @ kᵀ`` (a product over head features) whose key axis is not tokens: each query
    attends over heads, batch entries or features instead of over the other tokens."""
    out = []
    namer = analysis.namer
    for e in analysis.events_where(_multiplies):
        pair = _matmul_pairs(e)
        if not pair or not e.outputs or len(e.outputs[0].shape) < 2 or is_projection(e.spec):
            continue   # x @ W.T by a matrix of parameters projects features (FalconLinear on one new token)
        contracted, subs = {namer.role(lab) for la, lb in pair for lab in (la, lb) if lab}, e.params.get("subscripts")
        if not contracted or not contracted <= {"head_features", "features"} or subs and all(
                subs["output"][-2:-1] in s for s in subs["inputs"]):   # (no query rows: DeltaNet's 'bhd,bhdm->bhm')
            continue   # weights @ v contracts keys (tokens); only the q·k product is checked here
        o = e.outputs[0]
        rows, cols = o.dims[-2], o.dims[-1]
        key_roles = {namer.role(a.root) for a in coalesce(o.axes[-1].atoms)} if o.axes else set()
        by_role = WRONG_KEY_AXIS.get(namer.role(cols) if cols else None)
        kind = Kind.ATTENDS_OVER_BATCH if "batch" in key_roles else by_role
        if kind != Kind.ATTENDS_OVER_BATCH and any(lab and namer.role(lab) == "tokens" for lab in o.dims[:-2]):
            continue   # a plain token axis used as a batch axis: attends-over-wrong-axis says it
        if kind is None or (kind != Kind.ATTENDS_OVER_BATCH and rows and namer.is_token_root(rows)):
            continue
        what = kind.split("-")[-1]
        out.append(kind.found(e.index, (
            f"{e.op} #{e.index} computes scores {fmt_named(o.dims, o.shape)} whose key axis is {cols} ({what}): "
            f"each query weighs {what} instead of the other tokens, and the tokens sit in the batch axes "
            f"{fmt_named(o.dims[:-2], o.shape[:-2])}."),
            "Split the heads with view(B, T, H, d_k), move them ahead of the tokens with transpose(1, 2), "
            "and multiply [B, H, T, d_k] @ [B, H, d_k, T].", blame=((-1, len(o.shape) - 1),)))
    return out


RULES: list[Callable[[Analysis], list[Diagnostic]]] = [
    mixed_axes, head_split_order, contraction, batch_axes, softmax_axis, projection_over_tokens,
    ambiguous_sizes, query_key_order, attention_key_axis, attention_over_features, pattern_contradictions,
    *VARIANT_RULES, fused_mask_batch_order,   # masks, NaN rows, failed views
    *CONTRACT_RULES,  # the attention kernels' contracts and broadcasting
    joined_parts_disagree, cat_sizes, projections_joined, tokens_in_two_orders, tokens_returned_out_of_order,
    scan_axis, reduction_axis,
    contraction_axis, direction, rotary_pairing, rotary_one_sided, rolls_not_undone, index_axes,
    normalised_over_tokens, table_heads_rechopped, unexercised_masks, regrouped_ones, fused_parts_taken_twice,
    skipped_cache_slots, heads_mixed_by_matrix, keys_change_sequence,
    unread_inputs, positions_shared_over_padding, ids_read_by_two_tables, bypassed_projections, step_hides_itself,
    positions_restart, chunk_unmasked, batch_picked, batch_reduced, softmax_weights, normalised_over_one_entry,
    weights_summed_elsewhere,
    table_cut_to_batch, picked_at_length, norm_across_heads, positions_across_sequences, values_by_queries,
    statistics_over_tokens,
    pooled_over_padding, keys_and_values_swapped, stabiliser_axis, causal_over_packed_rows, norm_one_sided,
    pooled_per_head]
