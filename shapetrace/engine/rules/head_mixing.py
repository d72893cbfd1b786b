"""Heads mixed on purpose: the scores' heads contracted with a learned matrix over the heads (x-transformers'
``pre_softmax_talking_heads``/``post_softmax_talking_heads``, ``einsum('b h i j, h k -> b k i j', dots, W)``;
Shazeer et al. 2020, "Talking-Heads Attention"). Each output head is then a weighted sum of every head, by
design: the heads after it are new ones that nothing names, so the ops after it stay unchecked by name (the
verdict says so), and the values' "heads stay apart" contract does not hold, truthfully. A slip does not
multiply the scores by an ``(H, H)`` parameter, so the product itself is the evidence that the mixing is meant
(a sum over the heads or a product with another head's scores is no such matrix and is left to the other rules).

Reads: product events (``einsum``, ``matmul``), their operands' labels and roles and whether an operand was an
``nn.Parameter`` (its frozen argument's type). Adds: ``heads-mixed-by-matrix`` notes, into which the values'
``heads-talk`` witness folds (:func:`.causes.with_witnesses`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family, contracts_by_subscripts, is_matrix_product
from shapetrace.engine.thawed import map_operands, thaw_args

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic
    from shapetrace.engine.events import Event

HEADS = "H"


def heads_mixed_by_matrix(analysis: Analysis) -> list[Diagnostic]:
    """A note on each product that sums the scores' heads against a learned ``[H, H']`` matrix."""
    out = []
    for e in analysis.events_of(Family.PRODUCT):
        pair = _mixing(e)
        if pair is None:
            continue
        scores, matrix = e.inputs[pair[0]], e.inputs[pair[1]]
        out.append(Kind.HEADS_MIXED_BY_MATRIX.found(e.index, (
            f"{e.op} #{e.index} sums the heads ({HEADS}) of the scores {fmt_named(scores.dims, scores.shape)} against "
            f"the learned matrix {fmt_named(matrix.dims, matrix.shape)}: each head it makes is a weighted sum of "
            "every head, on purpose (talking-heads attention), so the heads after it are new ones that nothing "
            "names, and the ops after it are not checked by name.")))
    return out


def _mixing(e: Event) -> tuple[int, int] | None:
    """``(the scores operand, the matrix operand)`` where the product contracts the scores' heads axis
    with an axis of a two-axis ``nn.Parameter``; None otherwise."""
    if len(e.inputs) != 2 or not e.outputs:
        return None
    params = _parameters(e)
    for s, m in ((0, 1), (1, 0)):
        scores, matrix = e.inputs[s], e.inputs[m]
        roles = {a.role for a in scores.axes}
        if not params[m] or len(matrix.shape) != 2 or not {"query", "key"} <= roles:
            continue
        heads = [i for i, label in enumerate(scores.dims) if label == HEADS]
        if len(heads) == 1 and _contracted_with(e, s, heads[0], m):
            return s, m
    return None


def _parameters(e: Event) -> list[bool]:
    """For each tensor operand, in order: was it an ``nn.Parameter`` (its frozen argument's type)?"""
    found: list[bool] = []
    if e.raw_args and len(e.raw_args) > 2:
        map_operands(*thaw_args((e.raw_args[1], e.raw_args[2] or ())), lambda stub: found.append(stub.is_parameter))
    return found if len(found) == len(e.inputs) else [False] * len(e.inputs)


def _contracted_with(e: Event, s: int, axis: int, m: int) -> bool:
    """Does the product sum axis ``axis`` of operand ``s`` against an axis of operand ``m``?"""
    sub = e.params.get("subscripts")
    if contracts_by_subscripts(e.spec):
        if not sub or len(sub["inputs"]) != 2:
            return False
        letter = sub["inputs"][s][axis] if axis < len(sub["inputs"][s]) else None
        return bool(letter) and letter in sub["inputs"][m] and letter not in sub["output"]
    if is_matrix_product(e.spec) and len(e.inputs[0].shape) >= 2 and len(e.inputs[1].shape) >= 2:
        inner = (len(e.inputs[0].shape) - 1, len(e.inputs[1].shape) - 2)
        return axis == inner[s]
    return False
