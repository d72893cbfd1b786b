"""A ``cat`` of one tensor with itself: the inference's step for joins whose parts are all one operand.

``torch.cat([x] * n, dim)`` puts copy ``c`` of ``x``'s entry ``i`` at ``c * size + i`` along ``dim``: element
for element it is ``x.repeat(...)`` with ``n`` along ``dim``, so the joined axis is named as a repeat names it,
the copy index major (``n·B``: diffusers' ``prepare_ip_adapter_image_embeds``, ``torch.cat([image_embeds] *
num_images_per_prompt, dim=0)``), where the join's own rule left it unnamed (copies of the batch: it names
``cat([x, x], 1)`` ``T+T``, the same order spelled as a join, and that name stays). A join of *different*
tensors keeps the join's own rule
(:func:`~shapetrace.engine.axis_moves.cat_axes`: ``S+T``, or no name for blocks of one batch axis, as the Set
Transformer's heads stacked on the batch). Identity decides (the same captured node in every place), never a
size.

Reads: a ``cat`` record, its operands' axes and the names the join's rule gave. Adds: the joined axis of a
join of copies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.axis_moves import repeat_axes
from shapetrace.engine.ops import Family

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.infer.state import Inference


def joined_copies(state: Inference, record, in_axes, out_axes: list, params) -> list:
    """``out_axes`` with the unnamed joined axis of a ``cat`` of one node ``n`` times named as ``repeat`` names it."""
    ins = list(record.ins)
    if record.spec.family is not Family.JOIN or len(ins) < 2 or len(set(ins)) != 1 or len(out_axes) != 1:
        return out_axes
    axes = in_axes[0]
    dim = params.get("dim", 0) if params else 0
    if not isinstance(dim, int) or not axes or len(out_axes[0]) != len(axes):
        return out_axes   # (a ``stack`` adds an axis: its copies have no name)
    dim %= len(axes)
    if state.namer.label(out_axes[0][dim]) is not None:
        return out_axes   # (the join's rule named it: ``T+T`` is that same order, token block after block)
    repeats = [len(ins) if j == dim else 1 for j in range(len(axes))]
    grown = repeat_axes(axes, repeats, state.namer)[dim]
    if grown.size != out_axes[0][dim].size:
        return out_axes
    return [(*out_axes[0][:dim], grown, *out_axes[0][dim + 1:])]
