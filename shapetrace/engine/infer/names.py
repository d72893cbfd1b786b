"""Names forward: each output's axes from its operands' axes through the op registry's name rule.

Reads: the op's :class:`~shapetrace.engine.ops.OpSpec` (its name rule), the operands' axes, the
frozen arguments and torch's output shapes. Adds: the outputs' ``state.axes`` (every name checked
against torch's shape), ``state.name_mismatches``; memoised per call shape (``state.name_memo``).
Calls without a row also carry their layout's source (``state.made_by``) and tags.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine import axes as ax
from shapetrace.engine.axes import Axis
from shapetrace.engine.capture import OpRecord
from shapetrace.engine.infer.corrections import keep_ambiguity
from shapetrace.engine.infer.provenance import from_parameters_only, single_tag, tags_of
from shapetrace.engine.infer.seeds import note_entries
from shapetrace.engine.op_args import Call
from shapetrace.engine.ops import (
    Family,
    OpSpec,
    family_of,
    lines_up_by_broadcast,
    record_params,
)
from shapetrace.engine.propagate import fits, strided
from shapetrace.engine.thawed import thaw_args

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.infer.state import Inference


#: name rules that read the operands' layouts (strides, offset) as well as their names
_READS_LAYOUT = frozenset({strided})


def names_of(state: Inference, spec: OpSpec, record, in_axes, shapes):
    """``(names of each output, params)``. A name rule is a function of the op, its operands'
    axes, its arguments (tensors by shape, dtype and kind) and torch's output shapes, so the same
    call in the next layer is answered from a memo. Axes are keyed by identity (each memo entry
    keeps its axes alive, so no id is reused)."""
    frozen, params = record.frozen, record.params
    layouts = getattr(record, "in_raw", None) if spec.names in _READS_LAYOUT else None
    try:
        key = (spec.name, spec.names, tuple(map(id, in_axes)), frozen, tuple(shapes),   # (torch.Size == tuple)
               None if params is None else _freeze_params(params),
               None if layouts is None else tuple(tuple(r[1]) + (r[2],) for r in layouts))
        hit = state.name_memo.get(key)
    except TypeError:   # an argument that cannot be hashed: computed afresh
        key = hit = None
    if hit is not None:
        state.name_mismatches += hit[1]
        return hit[0], (hit[2] if params is None else params)
    args, kwargs = thaw_args(frozen)
    if params is None:
        params = record_params(spec, args, kwargs)
    shapes = [tuple(s) for s in shapes]
    if spec.names is None or not shapes:
        found, mismatched = [ax.unknown_axes(s) for s in shapes], 0
    else:
        before = state.name_mismatches
        inputs = list(layouts) if layouts is not None else [None] * len(in_axes)
        call = Call(spec.name, args, kwargs, inputs, list(in_axes), shapes, state.namer, params)
        found = checked(state, spec, call)
        mismatched = state.name_mismatches - before
    found = [state.interned.setdefault(axes, axes) for axes in found]   # equal axes: one object
    if key is not None:
        state.name_memo[key] = (found, mismatched, params, tuple(in_axes))
    return found, params


def checked(state: Inference, spec: OpSpec, call: Call) -> list[tuple[Axis, ...]]:
    """The registry's names for each output, kept only where they fit torch's own shape."""
    try:
        found = spec.names(call)
    except (IndexError, KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError):
        found = None   # arguments in a form the name rule does not read: unnamed, never guessed
    found = found if isinstance(found, list) else [found]
    checked = []
    for axes, shape in zip(found + [None] * len(call.shapes), call.shapes):
        if axes is not None and fits(axes, shape):
            checked.append(tuple(axes))
        else:
            state.name_mismatches += axes is not None
            checked.append(ax.unknown_axes(shape))
    return checked


def pass_names(state: Inference, spec: OpSpec, ins, outs, shapes, frozen, in_axes) -> None:
    """Ops without a row: elementwise ones pass names on by broadcasting; unknown ones name nothing."""
    for node, shape in zip(outs, shapes):
        if node in ins:
            continue   # an in-place op kept its input's node: its names stay
        if spec.names is None:
            state.axes[node] = state.pins.get(node) or ax.unknown_axes(tuple(shape))
            continue
        operands = [a for a, n in zip(in_axes, ins)]
        found, _ = names_of(state, spec, _PassCall(frozen, ins), operands, [shape])
        state.axes[node] = found[0]
        if state.ambiguous:
            keep_ambiguity(state, ins, [node], in_axes, found)
    if ins and from_parameters_only(state, ins):
        state.from_parameters.update(n for n in outs if n not in ins)
    if ins:
        note_entries(state, ins, outs)
    carry_source(state, ins, outs, shapes)
    tags = tags_of(state, ins)
    if tags:
        tag = single_tag(tags)
        if tag is not None:
            for node in outs:
                if node not in ins:
                    state.tags[node] = tag


def carry_source(state: Inference, ins, outs, shapes) -> None:
    """A call without a row (dropout, ``x * 2``) keeps the layout of its operand of the same shape: its
    result is traced back through it to the row that made that operand."""
    for node, shape in zip(outs, shapes):
        if node in ins:
            continue
        same = next((n for n in ins if n in state.made_by and state.capture.nodes[n].shape == tuple(shape)), None)
        if same is not None:
            state.made_by[node] = state.made_by[same]
            state.carried.add(node)
        joined = reductions_joined(state, ins, same)
        if joined:
            state.reduced_into[node] = joined


#: the rows whose results are followed into calls without a row: reductions, and softmax weights that
#: weigh values by an elementwise ``*`` (SKAttention's ``(weights * feats).sum(0)``: :mod:`..rules.weights`)
_JOINED_FAMILIES = frozenset({Family.REDUCE, Family.SOFTMAX})


def reductions_joined(state: Inference, ins, same: int | None) -> frozenset[int]:
    """The reduction rows whose results enter a call without a row by an operand it is not traced back
    through (``same``): ``s - s.logsumexp(1, keepdim=True)`` is traced back to ``s`` alone, and the
    reduction along its heads would be lost to the rules that follow what a reduction feeds. Softmax weights
    the call is traced back through join too where another tensor meets them (``torch.mul(softmax(K, 0), V)``
    of one shape, rish-16/aft-pytorch issue #1: the weights weigh V, and the ``sum(0)`` that follows is
    their weighted sum; without this the product of weights and values was read as the weights alone)."""
    found: set[int] = set()
    for n in ins:
        found.update(state.reduced_into.get(n, ()))
        source = _through_layout(state, state.made_by.get(n)) if n != same else None
        if source is not None and family_of(state.events[source[0]].op) in _JOINED_FAMILIES:
            found.add(source[0])
    weights = _through_layout(state, state.made_by.get(same)) if same is not None and len(set(ins)) > 1 else None
    if weights is not None and family_of(state.events[weights[0]].op) is Family.SOFTMAX:
        found.add(weights[0])   # (weights that met another tensor of their own shape: AFT's softmax(K, 0) * V)
    return frozenset(found)


#: rows that hand on their one operand's values unchanged, in another shape or order (a softmax's weights
#: viewed back to ``(seq_len, batch, 1)`` before ``(weights * outputs).sum(0)`` are still its weights)
_SAME_VALUES = frozenset({Family.RESHAPE, Family.AXIS_ORDER, Family.SIZE_ONE_AXIS, Family.CONTIGUOUS,
                          Family.EXPAND, Family.DROPOUT})


def _through_layout(state: Inference, source: tuple[int, int] | None) -> tuple[int, int] | None:
    """The row that made the values ``source`` holds: back through rows that only reshape, reorder or
    expand one operand (KEQA's ``softmax(scores, dim=0).view(seq_len, batch, 1)``)."""
    while source is not None:
        event = state.events[source[0]]
        if family_of(event.op) not in _SAME_VALUES or len(event.sources) != 1:
            return source
        source = event.sources[0]
    return None


def clashes(state: Inference, record: OpRecord, in_axes) -> bool:
    """Does this broadcast line up two named axes of different roles (a rotary table's T with the
    heads, or tokens in row order with the same tokens in window order)? Then it gets a row of its
    own, where the diagnostics say so."""
    if record.error is not None or len(in_axes) < 2 or not lines_up_by_broadcast(record.spec):
        return False
    shapes = tuple(r[0] for r in record.in_raw)
    # the same broadcast in the next layer: the same verdict (the axes are keyed by identity, and the
    # entry keeps them alive; a decided name forgets every verdict, see _decide_stack)
    key = (tuple(map(id, in_axes)), shapes)
    try:
        hit = state.clash_memo.get(key)
    except TypeError:   # a size that cannot be hashed: judged afresh, as the name memo does
        return clash_found(state, in_axes, shapes)
    if hit is None:
        hit = state.clash_memo[key] = (clash_found(state, in_axes, shapes), tuple(in_axes))
    return hit[0]


def clash_found(state: Inference, in_axes, shapes) -> bool:
    if state.namer.broadcast_clash([(state.namer.dims_of(a), s) for a, s in zip(in_axes, shapes)]) is not None:
        return True
    return ax.order_clash(list(zip(in_axes, shapes)), state.namer) is not None


def onto_scores(state: Inference, in_axes) -> bool:
    """Is one operand a tensor of attention scores (query and key axes)?"""
    return len(in_axes) == 2 and any(is_scores(axes) for axes in in_axes)


def is_scores(axes) -> bool:
    """Are these the axes of attention scores (a query axis and a key axis)?"""
    return {"query", "key"} <= {a.role for a in axes}


class _PassCall:
    """The part of a record :meth:`Inference._names_of` reads, for a call without a row."""

    __slots__ = ("frozen", "params")

    def __init__(state: Inference, frozen, ins):
        state.frozen = frozen
        state.params = None


def _freeze_params(params: dict) -> tuple:
    return tuple(sorted((k, _hashable(v)) for k, v in params.items()))


def _hashable(value):
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return _freeze_params(value)
    return value
