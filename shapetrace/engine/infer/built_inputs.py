"""Built inputs: names for the ops a script ran to build its model's arguments, from the argument they built.

``shapetrace trace FILE`` records the file's own ``build()``: fairseq's padding mask ``torch.arange(T)[None, :] >=
lengths[:, None]`` is made before the model's first call from a literal ``T`` and a ``[B]`` tensor, so no size names
its ops; the argument it makes is seeded where the model first reads it (:func:`.seeds.built_argument`). Walking
back from such an argument, through the records before the call (outside every module), each operand takes the names
of the result's axes it lines up with, where they agree with every name it has: from the right for a broadcast
(``[1, T] >= [B, 1]`` -> ``[B, T]``), in order for a one-operand op that only adds or drops axes of one entry
(``lengths[:, None]``: ``[B]`` -> ``[B, 1]``). An axis of one entry stays unnamed, and nothing named is renamed.

Reads: the finished walk's axes, the first outermost call and the records before it. Adds: nothing to the state;
returns ``{node: axes}`` pins (:func:`.corrections.corrections` adds them), so the walk again names those ops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine import axes as ax
from shapetrace.engine.axes import Axis
from shapetrace.engine.capture import OpRecord, PassRecord
from shapetrace.engine.ops import Family, lines_up_by_broadcast

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.infer.state import Inference


def built_input_names(state: Inference, found: dict) -> dict[int, tuple[Axis, ...]]:
    """Pins for the unnamed operands of the records that built the model's seeded arguments before its call."""
    first = state.capture.module_calls.first_call
    if first is None:
        return {}
    nodes, label = state.capture.nodes, state.namer.label
    named: dict[int, tuple[Axis, ...]] = {argument.node: state.axes[argument.node] for argument in first.arguments
                                          if argument.node in state.seeded and not nodes[argument.node].entered
                                          and argument.node in state.axes}
    out: dict[int, tuple[Axis, ...]] = {}
    cut = _cut_results(state.capture.records[:first.start], nodes)
    for record in reversed(state.capture.records[:first.start]):
        if type(record) not in (OpRecord, PassRecord) or len(record.outs) != 1 or record.outs[0] not in named:
            continue
        result = named[record.outs[0]]
        for node in record.ins:
            if not isinstance(node, int) or node in found or node in named or node in cut or nodes[node].parameter:
                continue   # (a cut's result is named by where its length was read, never back: torch_brain's [:B])
            lined = _lined_up(record, tuple(nodes[node].shape), result)
            axes = state.axes.get(node) or ()
            if lined is None or any(label(a) is not None and label(a) != label(b) for a, b in zip(axes, lined)):
                continue   # (a name it has and the result's disagree: nothing is renamed)
            named[node] = lined
            if tuple(axes) != lined:
                out[node] = lined
    return out


def _cut_results(records, nodes) -> set[int]:
    """The nodes made by a slice that shortens an axis of its operand (``torch.tensor([...] * B)[:B]``)."""
    return {out for r in records if type(r) is OpRecord and r.spec.family is Family.SLICE and r.ins and r.outs
            for out in r.outs[:1] if isinstance(r.ins[0], int) and isinstance(out, int)
            and len(nodes[out].shape) == len(nodes[r.ins[0]].shape) and nodes[out].shape != nodes[r.ins[0]].shape}


#: one-operand ops that keep their operand's axes of more than one entry in order (never a transpose)
_IN_ORDER = frozenset({Family.RESHAPE, Family.SIZE_ONE_AXIS, Family.CONTIGUOUS, Family.SLICE, Family.ELEMENTWISE,
                       Family.TRIANGLE})


def _lined_up(record, shape: tuple[int, ...], result: tuple[Axis, ...]) -> tuple[Axis, ...] | None:
    """The operand's axes named after the result's: from the right for a broadcast, in order for a one-operand op
    whose axes of more than one entry are the result's (only axes of one entry added or dropped); None otherwise."""
    sizes = [a.size for a in result]
    if lines_up_by_broadcast(record.spec) and len(record.ins) >= 2 and len(shape) <= len(sizes):
        lead = len(sizes) - len(shape)
        if any(n != 1 and n != sizes[lead + j] for j, n in enumerate(shape)):
            return None
        return tuple(result[lead + j] if n > 1 else ax.Axis() for j, n in enumerate(shape))
    if len(record.ins) != 1 or record.spec.family not in _IN_ORDER or \
            [n for n in shape if n > 1] != [n for n in sizes if n > 1]:
        return None
    wide = iter(a for a in result if a.size > 1)
    return tuple(next(wide) if n > 1 else ax.Axis() for n in shape)
