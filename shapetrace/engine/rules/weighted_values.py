"""Attention weights that weigh the values by their query axis: ``attn.transpose(-1, -2) @ v``, or an einsum
that contracts the weights' query letter (``einsum("bhTt,bThd->bthd", attn, v)`` where ``attn`` is ``[.., t,
T]``, queries by keys). Each output row then mixes the values by how much every query attends to one key,
not by one query's weights over the keys; with as many queries as keys no shape shows it.

Reads: product events (matrix products and two-operand einsums), the axes torch recorded on each operand with
the roles the scores' product gave them (``query`` and ``key``, carried through moves and the softmax).
Adds: ``values-by-queries`` errors on the product.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.axis_compute import einsum_contracted
from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family, contracts_by_subscripts, is_matrix_product

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
        if len(made.inputs) != 1:
            return False
        source = made.sources[0] if made.sources else None
    return False


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
                        and analysis.namer.role(lab) in ("head_features", "features")]
            if not kept or not label or analysis.namer.role(label) != "tokens" or not features or \
                    not normalised_over_keys(analysis, e, operand):
                continue
            out.append(Kind.VALUES_BY_QUERIES.found(e.index, (
                f"{e.op} #{e.index} sums the attention weights {fmt_named(info.dims, info.shape)} over their "
                f"query axis (axis {axis}) and keeps their key axis (axis {kept[0]}): each output row mixes the "
                "values by how much every query attends to one key, not by one query's weights over the keys."),
                "Multiply the weights as they come out of the softmax, [.., queries, keys] @ [.., keys, d]: "
                "attn @ v (in an einsum, contract the keys' letter).", blame=((operand, axis),)))
            break
    return out
