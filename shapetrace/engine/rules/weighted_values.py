"""Attention weights that weigh the values by their query axis: ``attn.transpose(-1, -2) @ v``, or an einsum
that contracts the weights' query letter (``einsum("bhTt,bThd->bthd", attn, v)`` where ``attn`` is ``[.., t,
T]``, queries by keys). Each output row then mixes the values by how much every query attends to one key,
not by one query's weights over the keys; with as many queries as keys no shape shows it.

Reads: product events (matrix products and two-operand einsums), the axes torch recorded on each operand with
the roles the scores' product gave them (``query`` and ``key``, carried through moves and the softmax).
Adds: ``values-by-queries`` errors on the product; ``key-value-swapped`` errors where the weights of scores
made from the value projection weigh the key projection's output (the pair handed on as ``(k, v)`` and read back as
``(v, k)``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from shapetrace.engine.axis_compute import einsum_contracted
from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family, contracts_by_subscripts, is_matrix_product
from shapetrace.engine.vocabulary import projection_kind

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic
    from shapetrace.engine.events import Event


def summed_axes(e: Event) -> list[tuple[int, int]]:
    """``(operand, axis)`` of every axis a matrix product or a two-operand einsum sums over."""
    if is_matrix_product(e.spec) and len(e.inputs) == 2 and len(e.inputs[1].shape) >= 2:
        return [(0, len(e.inputs[0].shape) - 1), (1, len(e.inputs[1].shape) - 2)]
    parsed = e.params.get("subscripts")
    if not (contracts_by_subscripts(e.spec) and len(e.inputs) == 2 and parsed and len(parsed["inputs"]) == 2):
        return []
    lhs = parsed["inputs"]
    if any(len(term) != len(t.shape) for term, t in zip(lhs, e.inputs)):
        return []
    return [(i, lhs[i].index(c)) for c in einsum_contracted(parsed) if c in lhs[0] and c in lhs[1] for i in (0, 1)]


#: how many rows back the weights' softmax is looked for (a scale, a dropout, a cast, a move)
DEPTH = 8


def normalised_over_keys(analysis: Analysis, e: Event, operand: int) -> bool:
    """Did ``e``'s operand come, through single-operand rows, from a softmax over its ``key`` axis? (A softmax
    over the queries is ``softmax-wrong-axis``'s; its product over the queries follows from it.)"""
    source = e.sources[operand] if operand < len(e.sources) else None
    for _ in range(DEPTH):
        if source is None:
            return False
        made = analysis.events[source[0]]
        if made.spec is not None and made.spec.family is Family.SOFTMAX:
            dim, info = made.params.get("dim"), made.outputs[0] if made.outputs else None
            return dim is not None and info is not None and bool(info.axes) and \
                info.axes[dim % len(info.axes)].role == "key"
        source = _one_traced_operand(made)
    return False


def _one_traced_operand(made: Event) -> tuple[int, int] | None:
    """Where the one operand of a row that carries the weights on came from: its only operand, or the only one
    a row made where the others entered (parameters, constants) and its output has as many entries (DeepViT's
    heads mixed by a learned ``[H, H]`` matrix, then a LayerNorm over the heads: the weights go on, reweighted)."""
    if len(made.inputs) == 1:
        return made.sources[0] if made.sources else None
    traced = [(i, s) for i, s in enumerate(made.sources) if s is not None]
    if len(traced) != 1 or not made.outputs or \
            math.prod(made.inputs[traced[0][0]].shape) != math.prod(made.outputs[0].shape):
        return None
    return traced[0][1]


def values_by_queries(analysis: Analysis) -> list[Diagnostic]:
    """A product that sums an operand's ``query`` axis, normalised over its ``key`` axis by a softmax and kept,
    against a token axis of values (the other operand keeps a feature axis: Nyströmformer's pseudo-inverse of its
    landmark kernel multiplies weights by weights, and is no such product)."""
    out = []
    for e in analysis.events_where(lambda op: is_matrix_product(op) or contracts_by_subscripts(op)):
        summed = summed_axes(e)
        for operand, axis in summed:
            info = e.inputs[operand]
            if not info.axes or axis >= len(info.axes) or info.axes[axis].role != "query":
                continue
            kept = [j for j, a in enumerate(info.axes) if a.role == "key" and (operand, j) not in summed]
            partner = next((j for o, j in summed if o == 1 - operand and summed.index((o, j)) ==
                            summed.index((operand, axis)) + (1 if operand == 0 else -1)), None)
            other = e.inputs[1 - operand]
            label = other.dims[partner] if partner is not None and partner < len(other.dims) else None
            features = [lab for j, lab in enumerate(other.dims) if lab and (1 - operand, j) not in summed
                        and analysis.namer.role(lab) in ("head_features", "features")] or \
                unnamed_width(other, 1 - operand, summed, info)
            if not kept or not label or analysis.namer.role(label) != "tokens" or not features or \
                    not normalised_over_keys(analysis, e, operand) or renormalised_along(analysis, e, operand, axis):
                continue
            out.append(Kind.VALUES_BY_QUERIES.found(e.index, (
                f"{e.op} #{e.index} sums the attention weights {fmt_named(info.dims, info.shape)} over their "
                f"query axis (axis {axis}) and keeps their key axis (axis {kept[0]}): each output row mixes the "
                "values by how much every query attends to one key, not by one query's weights over the keys."),
                "Multiply the weights as they come out of the softmax, [.., queries, keys] @ [.., keys, d]: "
                "attn @ v (in an einsum, contract the keys' letter).", blame=((operand, axis),)))
            break
    return out


def renormalised_along(analysis: Analysis, e: Event, operand: int, axis: int) -> bool:
    """Were ``e``'s operand's weights divided by their own sum along ``axis``, the axis ``e`` sums, before it?
    PCT's offset attention: ``softmax(energy, dim=-1)``, then ``attention / attention.sum(dim=1, keepdim=True)``
    and ``bmm(x_v, attention)``: each output point's weights sum to 1 along the axis the product sums over, a
    weighted mean of the values along it, which is what the code means by renormalising there."""
    source = e.sources[operand] if operand < len(e.sources) else None
    if source is None or operand >= len(e.joined) or source[0] >= len(analysis.events):
        return False
    start = analysis.events[source[0]]
    made = start.outputs[0] if start.outputs else None
    if made is None or tuple(made.shape) != tuple(e.inputs[operand].shape):
        return False
    return any(sum_of(analysis.events[r], start, axis) for r in e.joined[operand] if r < len(analysis.events))


def sum_of(r: Event, start: Event, axis: int) -> bool:
    """Is ``r`` a sum of ``start``'s output itself along axis ``axis``, alone?"""
    dim = r.params.get("dim")
    dim = dim[0] if isinstance(dim, (tuple, list)) and len(dim) == 1 else dim
    return r.spec is not None and r.spec.name == "sum" and tuple(r.sources[:1]) == ((start.index, 0),) and \
        isinstance(dim, int) and bool(r.inputs) and dim % len(r.inputs[0].shape) == axis


def unnamed_width(other, side: int, summed: list[tuple[int, int]], weights) -> list[int]:
    """The kept axes of the values that no name reads but that cannot be the weights' tokens: unnamed, and of a
    size none of the weights' axes has (EfficientViT's ``v`` ``[B, d, N]``, its width from a 1x1 conv split
    three ways). A size that differs proves the axis is not one of the weights' (a second matrix of weights,
    Nyströmformer's, keeps an axis as long as its own); one that is equal decides nothing."""
    sizes = set(weights.shape)
    return [j for j, lab in enumerate(other.dims) if lab is None and (side, j) not in summed
            and j >= len(other.shape) - 2 and other.shape[j] not in sizes]


#: how many rows back the projection behind an operand is looked for (a rotary, a norm, a head repeat)
PROJECTION_DEPTH = 32


def _behind(by_index: dict[int, Event], e: Event, operand: int, depth: int):
    """The events ``e``'s operand was computed from, nearest first, through at most ``depth`` rows back."""
    frontier, seen = [e.sources[operand] if operand < len(e.sources) else None], set()
    for _ in range(depth):
        found = []
        for source in frontier:
            made = by_index.get(source[0]) if source is not None and source[0] not in seen else None
            if made is not None:
                seen.add(source[0])
                yield made
                found.extend(made.sources)
        frontier = found


def _scores_behind(by_index: dict[int, Event], e: Event, operand: int) -> Event | None:
    """The scores' product (``[.., query, key]``) that ``e``'s operand was computed from through a softmax over
    its key axis (a mask added, a scale, a cast on the way), or None."""
    over_keys = False
    for made in _behind(by_index, e, operand, DEPTH):
        info = made.outputs[0] if made.outputs else None
        if made.spec is not None and made.spec.family is Family.SOFTMAX and info is not None and info.axes:
            dim = made.params.get("dim")
            over_keys = over_keys or (dim is not None and info.axes[dim % len(info.axes)].role == "key")
        roles = [a.role for a in info.axes] if info is not None else []
        if made.spec is not None and made.spec.family is Family.PRODUCT and roles[-2:] == ["query", "key"]:
            return made if over_keys else None
    return None


def _from_own_projection(by_index: dict[int, Event], e: Event, operand: int, kind: str) -> bool:
    """Was ``e``'s operand made from a module of its own that projects ``kind`` (``k_proj``, ``wv``) and from
    no other projection? A part of a fused projection is not: its order (CodeGen's ``q, v, k``) is the code's."""
    kinds = {projection_kind(made.module) for made in _behind(by_index, e, operand, PROJECTION_DEPTH)
             if made.spec is not None and made.spec.family is Family.PROJECTION}
    return kinds == {kind}


def keys_and_values_swapped(analysis: Analysis) -> list[Diagnostic]:
    """Weights over the keys that multiply the key projection's output, where the scores behind them were made
    from the queries and the value projection's output: the keys and the values trade places (Hunyuan's
    cross-layer sharing unpacking ``(k, v)`` as ``value, key``). Read from the modules the projections ran in
    (each its own module, never a part of a fused one), never from sizes; keys tied to values (one projection
    for both) are not this, nor is either half alone."""
    out, by_index = [], {e.index: e for e in analysis.events}
    for e in analysis.events_where(is_matrix_product):
        if len(e.inputs) != 2 or len(e.projections) < 2 or e.projections[1] != "k":
            continue
        scores = _scores_behind(by_index, e, 0)
        if scores is None or len(scores.inputs) != 2 or tuple(scores.projections[:2]) != ("q", "v") or \
                not _from_own_projection(by_index, scores, 1, "v") or not _from_own_projection(by_index, e, 1, "k"):
            continue
        out.append(Kind.KEY_VALUE_SWAPPED.found(e.index, (
            f"{e.op} #{e.index} weighs the output of the key projection "
            f"{fmt_named(e.inputs[1].dims, e.inputs[1].shape)} by weights whose scores ({scores.op} "
            f"#{scores.index}) took the value projection's output as their keys: keys and values trade places."),
            "Score the queries against the keys and weigh the values: softmax(q @ k^T) @ v (check the order in "
            "which a shared (k, v) pair is stored and read back)."))
    return out
