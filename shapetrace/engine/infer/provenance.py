"""Provenance: which projection (q, k, v, a fused qkv) each tensor came from.

Reads: the module each linear ran in (``q_proj``, ``c_attn``), splits and picks of a fused width,
and which nodes are made from parameters only. Adds: ``state.tags``, ``state.from_parameters``, a
fused width's stack decided in the namer, and the names a ``cat`` with a parameter (a class token)
takes from its named parts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine import axes as ax
from shapetrace.engine.axes import Axis
from shapetrace.engine.axis_moves import cat_axes
from shapetrace.engine.capture import OpRecord
from shapetrace.engine.op_args import Call
from shapetrace.engine.ops import (
    Family,
    OpSpec,
    arg,
    separated_axis,
)
from shapetrace.engine.thawed import thaw_args
from shapetrace.engine.vocabulary import FUSED_PARTS, STACK_FACTORS, projection_kind

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.infer.state import Inference


#: the counts a fused width's stack factor is written with (``2*d_k``, ``3*D``)
_STACK_COUNTS = frozenset(str(f) for f in STACK_FACTORS.values())


def tag_step(state: Inference, record: OpRecord, in_axes, params) -> tuple | None:
    """The operands' tags (None when none has one), and the outputs' tags from them or from the
    projection module the call ran in."""
    tags = tags_of(state, record.ins)
    if record.outs and (tags or record.spec.family is Family.PROJECTION):
        tag_outputs(state, record.spec, record, in_axes, [r[0] for r in record.out_raw], params, tags)
    return tags


def tags_of(state: Inference, nodes) -> tuple | None:
    if not state.tags:
        return None
    found = tuple(map(state.tags.get, nodes))
    return None if found.count(None) == len(found) else found


def tag_outputs(state: Inference, spec: OpSpec, record: OpRecord, in_axes, shapes, params, input_tags) -> None:
    """q, k and v from the projection modules that made them (``q_proj``, ``c_attn`` then a split
    into three, ``proj[0]`` of a packed in-projection), carried through views and elementwise ops."""
    outs = record.outs
    if spec.family is Family.PROJECTION:   # tagged q, k or v from the module it runs in
        tag = projection_here(record, state.capture.module_calls)
        if tag is not None:
            state.tags[outs[0]] = tag
        return
    tag = single_tag(input_tags or ())
    if tag is None or spec.combines:   # (mixes two operands' roles: no tag passes through)
        return
    parts = FUSED_PARTS.get(tag)
    if parts and len(outs) == len(parts) and spec.family is Family.SPLIT:
        for out, part in zip(outs, parts):
            state.tags[out] = part
        return
    if parts and spec.picks:
        args, kwargs = thaw_args(record.frozen)
        call = Call(spec.name, args, kwargs, [], in_axes, shapes, state.namer, params)
        picked = _fused_index(spec, call, parts)
        if picked is not None:
            state.tags[outs[0]] = picked
        return
    for out in outs:
        state.tags[out] = tag


def one_part_unstacked(state: Inference, record: OpRecord, axes: tuple[Axis, ...]) -> tuple[Axis, ...]:
    """A projection its module names as q, k or v alone (``wk``, ``k_proj``) holds no q/k/v stack: a
    width that only sizes read as a stack (``2*d_k`` = kv·d_k, which is two kv heads of d_k in
    grouped-query code with H_kv undeclared) is left unnamed. So is one head's k and v side by side
    (``2*d_k``, multi-query attention's ``wkv``) where neither the module (a k/v projection) nor
    ``--dims`` (``H_kv``) says there is one: a narrower width that happens to be 2·d_k (CrossViT's
    branch projection back to the small width, DiT's final patch projection) is not one."""
    last = axes[-1]
    root = state.namer.aliases.get(last.atoms[0].root, last.atoms[0].root) if len(last.atoms) == 1 else ""
    if not _stacked_root(root):
        return axes
    kind = projection_here(record, state.capture.module_calls)
    one_head_kv = root == "2*d_k" and kind not in FUSED_PARTS and "H_kv" not in state.namer.dims
    if kind not in ("q", "k", "v") and not one_head_kv:
        return axes
    return (*axes[:-1], ax.unknown_axes((last.size,))[0])


def by_parameter_matrix_product(state: Inference, record: OpRecord) -> bool:
    """Is this product ``x @ W``, with ``W`` a matrix made from module parameters only and ``x``
    computed from the inputs (a projection written as a product)?"""
    if len(record.ins) != 2 or len(record.in_raw[1][0]) != 2 or len(record.in_raw[0][0]) < 2:
        return False
    x, weight = record.ins
    return from_parameters_only(state, (weight,)) and not from_parameters_only(state, (x,))


def from_parameters_only(state: Inference, nodes) -> bool:
    """Are all these nodes parameters, or computed from parameters only? (a loop, not ``all()`` over
    a generator: asked for every call)"""
    nodes_facts, computed = state.capture.nodes, state.from_parameters
    for n in nodes:
        if n not in computed and not nodes_facts[n].parameter:
            return False
    return True


def joined_with_parameters(state: Inference, ins, in_axes, joined: tuple[Axis, ...], params) -> tuple[Axis, ...]:
    """``cat`` of a part made from parameters only (a class token, expanded over the batch) with a
    named part (the patches ``[B, N, D]``): the parameter's unnamed axes take the names of the
    axes they are lined up with. A part computed from inputs that is unnamed names nothing."""
    dim = params.get("dim", 0) if params else 0
    out = list(joined)
    # torch still joins an empty 1-d tensor (``torch.cat([torch.tensor([]), k], dim=-2)``, the first
    # write into transformers' DynamicCache): it adds nothing, and has no axis to line up
    parts = [(n, a) for n, a in zip(ins, in_axes) if len(a) == len(joined)]
    if isinstance(dim, int) and joined and state.namer.label(joined[dim % len(joined)]) is None:
        out[dim % len(joined)] = _joined_counting_parameters(state, parts, dim, joined[dim % len(joined)])
    for j, axis in enumerate(joined):
        if j == dim % len(joined) or state.namer.label(axis) is not None:
            continue
        named = {state.namer.label(a[j]): a[j] for _, a in parts if state.namer.label(a[j]) is not None}
        unnamed_from_parameters = all(n in state.from_parameters or state.capture.nodes[n].parameter
                                      for n, a in parts if state.namer.label(a[j]) is None)
        if len(named) == 1 and unnamed_from_parameters:
            out[j] = next(iter(named.values()))
    return tuple(out)


def _joined_counting_parameters(state: Inference, parts, dim: int, axis: Axis) -> Axis:
    """The joined axis of a ``cat`` where the parts it has no name for are made from parameters only (DINOv2's
    register tokens ``register_tokens.expand(B, -1, -1)`` put between the class token and the patches): such a
    part is a fixed number of entries (``4``), so the join is ``1+4+N`` (:func:`.axis_moves.cat_axes`); a
    part computed from inputs that has no name leaves the join unnamed, as before."""
    unnamed = [i for i, (n, a) in enumerate(parts) if a[dim].size > 1 and state.namer.label(a[dim]) is None]
    if not unnamed or len(unnamed) == len(parts) or not all(
            parts[i][0] in state.from_parameters or state.capture.nodes[parts[i][0]].parameter for i in unnamed):
        return axis
    joined = cat_axes([a for _, a in parts], dim, state.namer, counted=frozenset(unnamed))
    return joined[dim % len(joined)]


def decide_stack(state: Inference, spec: OpSpec, record: OpRecord, axes: tuple[Axis, ...], parts: int) -> None:
    """A fused projection taken apart along one of its pieces, into as many parts as it stacks
    (``qkv.unbind(0)``, ``fused[..., 0, :]``, ``chunk(3, dim)``): that piece is the stack (``qkv``,
    ``kv``), so where ``H`` has the same size, the other piece is the heads."""
    args, kwargs = thaw_args(record.frozen)
    dim = separated_axis(spec, args, kwargs, len(axes))
    if dim is None or not -len(axes) <= dim < len(axes):
        return
    axis = axes[dim]
    if len(axis.atoms) != 1 or not state.namer.clashed(axis.atoms[0]):
        return
    atom = axis.atoms[0]
    for stack, factor in STACK_FACTORS.items():
        if atom.size == factor and (spec.picks or parts == factor):
            if state.namer.decide(atom, stack):
                state.clash_memo.clear()   # the labels changed: a broadcast may line up other roles now
            return


def single_tag(tags) -> str | None:
    """The one projection tag among ``tags`` (None when there is none, or two different ones)."""
    tag = None
    for t in tags:
        if t is not None and t != tag:
            if tag is not None:
                return None   # operands of two projections: the result is neither
            tag = t
    return tag


def _stacked_root(root: str) -> bool:
    """``2*d_k``, ``3*D``, ``D+2*D_kv``: a width read as a stack of q, k and v parts."""
    return any("*" in term and term.partition("*")[0] in _STACK_COUNTS for term in root.split("+"))


def projection_here(record: OpRecord, modules) -> str | None:
    """The kind of projection a linear is, from the module it runs in (or torch's packed MHA weight)."""
    path = modules.path(record.module)
    kind = projection_kind(path) if path else None
    if kind is None and modules.type_name(record.module) == "MultiheadAttention":
        args, kwargs = thaw_args(record.frozen)
        weight = arg(args, kwargs, 1, "weight")
        shape = getattr(weight, "shape", ())
        if len(shape) == 2 and shape[0] == 3 * shape[1]:
            kind = "qkv"
    return kind


def _fused_index(spec: OpSpec, call: Call, parts: tuple[str, ...]) -> str | None:
    """``proj[0]``/``select(0, 1)`` on a fused axis (``qkv``, size 3): which of q, k, v it picks."""
    if spec.selects_along_dim:
        dim, index = call.arg(1, "dim"), call.arg(2, "index")
    else:
        index = call.args[1]
        if isinstance(index, tuple):
            items = index
            ints = [(d, i) for d, i in enumerate(items) if isinstance(i, int)]
            plain = all(i is Ellipsis or i == slice(None) or isinstance(i, int) for i in items)
            if len(ints) != 1 or not plain or sum(i is Ellipsis for i in items) > 1:
                return None
            dim, index = ints[0]
            if any(i is Ellipsis for i in items[:dim]):   # counted from the end: x[..., 0, :]
                dim = len(call.in_axes[0]) - (len(items) - dim)
        elif isinstance(index, int):
            dim = 0
        else:
            return None
    axes = call.in_axes[0]
    if not isinstance(dim, int) or not isinstance(index, int) or not axes:
        return None
    size = axes[dim % len(axes)].size
    return parts[index % size] if size == len(parts) else None
