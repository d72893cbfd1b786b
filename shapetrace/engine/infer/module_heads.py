"""Heads written as separate modules (part of :func:`.corrections.corrections`).

Karpathy's ``gpt.py`` and rasbt's ``MultiHeadAttentionWrapper`` write multi-head attention as H single-head
modules of one ``nn.ModuleList`` (``heads.0``, ``heads.1``...), each projecting the same input to its own q, k
and v of ``head_size`` features (``nn.Linear(n_embd, head_size)``, or ``x @ W`` of a parameter it holds),
computing attention on its own, and joined: ``torch.cat([h(x) for h in self.heads], dim=-1)``; the Temporal
Fusion Transformer stacks its heads on a new axis and averages them. Each projection's width has no name of its
own (:func:`..axis_compute.projected_width`: a size never decides one), so nothing downstream is named. The
structure does: a join of k parts, each the weighted sum ``softmax(q @ kᵀ) @ v`` of a different instance of one
module class, children of one list, whose queries (and keys) are projections of one and the same input, is
multi-head attention with k heads by definition. Where k is the declared H and every part has the declared d_k
features, each projection's width is ``d_k`` and a ``cat`` on the features axis joins them into ``H·d_k``
(heads-major: part i holds head i's features). A ``stack``'s new axis is left unnamed: TFT averages it on
purpose, which the reduction rule, reading H there, would call mixing the heads. A join of anything else,
another count, another width, one instance used twice or parts of one module is left as it is.

Reads: the finished walk's axes, the records and the module each ran in (paths and classes). Adds: nothing;
returns pins ``{node: axes}`` for the projections and the join.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from shapetrace.engine import axes as ax
from shapetrace.engine.axes import Atom, Axis
from shapetrace.engine.infer.widths import record_makers
from shapetrace.engine.ops import Family, arg, is_matrix_product
from shapetrace.engine.thawed import thaw_args

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.infer.state import Inference

#: one-operand ops a head's tensors pass through unchanged in meaning on the way between its steps
_THROUGH = frozenset({Family.DROPOUT, Family.CONTIGUOUS, Family.AXIS_ORDER})
#: ops between the scores and the softmax (a scale, a mask): the operand of the result's own shape is followed
_SCORES_THROUGH = frozenset({Family.ELEMENTWISE, Family.MASK_FILL, Family.DROPOUT, Family.CONTIGUOUS})


class _Head(NamedTuple):
    q: object   # the projection records of its queries, keys and values
    k: object
    v: object
    ops: tuple[str, ...]   # the ops from the projections to the part, in order of the walk back


def module_heads(state: Inference) -> dict[int, tuple[Axis, ...]]:
    """Pins naming the heads of every join of sibling single-head attention modules."""
    namer = state.namer
    count, width = namer.size_of("H"), namer.size_of("d_k")
    if not count or count < 2 or not width:
        return {}
    made: dict[int, object] | None = None
    pins: dict[int, tuple[Axis, ...]] = {}
    for record in state.capture.records:
        spec = getattr(record, "spec", None)
        if spec is None or (spec.family is not Family.JOIN and not spec.stacks) or len(record.outs) != 1 \
                or len(record.ins) != count or len(set(record.ins)) != count:
            continue
        made = made if made is not None else record_makers(state)
        pinned = _joined(state, made, record, count, width)
        for node, axes in pinned.items():
            pins.setdefault(node, axes)
    return pins


def _joined(state: Inference, made: dict, record, count: int, width: int) -> dict[int, tuple[Axis, ...]]:
    out = state.axes.get(record.outs[0]) or ()
    args, kwargs = thaw_args(record.frozen)
    dim = arg(args, kwargs, 1, "dim", 0)
    parts = [state.axes.get(n) or () for n in record.ins]
    if not out or not isinstance(dim, int) or any(len(p) != len(out) - bool(record.spec.stacks) for p in parts) \
            or any(p[-1].size != width for p in parts):
        return {}
    dim %= len(out)
    if not record.spec.stacks and dim != len(out) - 1:
        return {}   # (a cat of heads along another axis is no multi-head layout this proves)
    heads = [_head(state, made, n) for n in record.ins]
    if any(h is None for h in heads) or len({h.ops for h in heads}) != 1 or not _siblings(state, heads):
        return {}
    d_k = ax.root_axis("d_k", width)
    pins: dict[int, tuple[Axis, ...]] = {}
    for head in heads:
        for projection in (head.q, head.k, head.v):
            node = projection.outs[0]
            axes = state.axes.get(node) or ()
            if not axes or axes[-1].size != width or state.namer.label(axes[-1]) is not None:
                return {}
            pins[node] = axes[:-1] + (d_k,)
    named = parts[0][:-1] + (d_k,)
    if record.spec.stacks:   # (the heads' axis itself unnamed: see the module's docstring)
        pins[record.outs[0]] = named[:dim] + (ax.unknown_axis(count),) + named[dim:]
    else:
        joined = Axis((Atom("H", count, 1, count), Atom("d_k", width, 1, width)))
        pins[record.outs[0]] = named[:-1] + (joined,)
    return pins


def _back(made: dict, node: int, through: frozenset, ops: list[str], shape_of) -> object | None:
    """The record that made ``node``, past the ops in ``through`` (the operand of the result's shape)."""
    for _ in range(16):
        record = made.get(node)
        if record is None or record.spec.family not in through or not record.ins:
            return record
        ops.append(record.spec.name)
        same = [n for n in record.ins if isinstance(n, int) and shape_of(n) == shape_of(node)]
        if record.spec.family in (Family.AXIS_ORDER, Family.DROPOUT, Family.CONTIGUOUS):
            same = [record.ins[0]]
        if len(same) < 1:
            return None
        node = same[0]
    return None


def _head(state: Inference, made: dict, part: int) -> _Head | None:
    """``softmax(q @ kᵀ) @ v`` made ``part``, each of q, k and v a projection: its three projections."""
    ops: list[str] = []
    shape = lambda n: state.capture.nodes[n].shape   # noqa: E731
    weighted = _back(made, part, _THROUGH - {Family.AXIS_ORDER}, ops, shape)
    if weighted is None or not is_matrix_product(weighted.spec) or len(weighted.ins) != 2:
        return None
    ops.append(weighted.spec.name)
    softmax = _back(made, weighted.ins[0], _SCORES_THROUGH, ops, shape)
    if softmax is None or softmax.spec.family is not Family.SOFTMAX or not _over_keys(state, softmax):
        return None
    ops.append(softmax.spec.name)
    scores = _back(made, softmax.ins[0], _SCORES_THROUGH, ops, shape)
    if scores is None or not is_matrix_product(scores.spec) or len(scores.ins) != 2:
        return None
    ops.append(scores.spec.name)
    found = [_back(made, n, _THROUGH, ops, shape) for n in (*scores.ins, weighted.ins[1])]
    if any(r is None or not _projects(state, r) for r in found):
        return None
    return _Head(*found, tuple(ops))


def _projects(state: Inference, record) -> bool:
    """A projection: ``nn.Linear`` (``F.linear``), or ``x @ W`` of a weight matrix the module holds as a parameter
    (rasbt's ``nn.Parameter(torch.rand(d_in, d_out))``)."""
    if len(record.outs) != 1:
        return False
    if record.spec.family is Family.PROJECTION:
        return True
    weight = state.capture.nodes[record.ins[1]] if is_matrix_product(record.spec) and len(record.ins) == 2 else None
    return weight is not None and weight.parameter and len(weight.shape) == 2


def _over_keys(state: Inference, softmax) -> bool:
    """Does the softmax normalise the last axis of scores whose last two axes are queries and keys?"""
    axes = state.axes.get(softmax.ins[0]) or ()
    params = softmax.spec.params(*thaw_args(softmax.frozen)) if softmax.spec.params else {}
    dim = params.get("dim")
    return len(axes) >= 2 and isinstance(dim, int) and dim % len(axes) == len(axes) - 1 \
        and (axes[-2].role, axes[-1].role) == ("query", "key")


def _siblings(state: Inference, heads: list[_Head]) -> bool:
    """Are the heads' query (and key) projections each in a different child of one module list, of one
    class, reading one and the same input?"""
    for role in ("q", "k"):
        records = [getattr(h, role) for h in heads]
        if len({r.ins[0] if r.ins else None for r in records}) != 1:
            return False
        children = [_list_child(state, r.module) for r in records]
        if any(c is None for c in children) or len({c for c in children}) != len(children) \
                or len({(state.capture.module_calls.path(c).rpartition(".")[0],
                         state.capture.module_calls.type_name(c)) for c in children}) != 1:
            return False
    return True


def _list_child(state: Inference, slot: int) -> int | None:
    """The innermost module around ``slot`` (itself included) that is an entry of a list (``heads.2``)."""
    calls = state.capture.module_calls
    for _ in range(64):
        if slot < 0:
            return None
        if calls.path(slot).rpartition(".")[2].isdigit():
            return slot
        slot = calls.first[slot][1]
    return None
