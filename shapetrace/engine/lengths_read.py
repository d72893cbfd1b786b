"""Where the padding contract (:mod:`.padding`) was not measured on a padding mask the model builds from its lengths:
a tensor of one value per batch entry given to the model's first call (a ``[B]`` of sequence lengths, named by
:func:`.infer.seeds.batch_seed`; not one the library makes inside, as transformers' masks index the batch with an
``arange(batch_size)``) and whose values alone, compared with positions, make a boolean mask with a token
axis (``arange(T)[None, :] >= lengths[:, None]``). No name or shape says that the model hides those pads from
every attention (rosinality/mac-network-pytorch issue #7: the lengths turned into a mask, the control attention
given none of it), and the padding contract reads a mask given as an argument, not one built inside the model: the
verdict is then ``?``, never ``✓``, whichever entry point ran the trace. Plain data out.
"""

from __future__ import annotations

import torch

from shapetrace.engine.capture import OpRecord, PassRecord
from shapetrace.engine.diagnostic import Diagnostic
from shapetrace.engine.indices import node_labels
from shapetrace.engine.kinds import Kind
from shapetrace.engine.padding import PADDING


def unmeasured_lengths(trace) -> list[Diagnostic]:
    """A note (the verdict ``?``) where a finished ``trace`` builds a padding mask from lengths it was given (see
    the module) and the padding contract did not hold: the first such mask's op and the lengths' shape said."""
    if PADDING in trace.contracts:
        return []
    inferred, capture = trace._inferred(), trace.capture
    labels = node_labels(inferred.axes, trace.namer)
    role = trace.namer.role
    first = capture.module_calls.first_call
    given = {argument.node for argument in first.arguments} if first is not None else set()
    lengths = {n for n in given if isinstance(n, int) and not capture.nodes[n].parameter
               and len(capture.nodes[n].shape) == 1 and [role(label) for label in labels(n) if label] == ["batch"]}
    if not lengths:
        return []
    made, free = set(lengths), set()   # (free: made by the code from no tensor it was given: ``arange(T)``)
    for r, record in enumerate(capture.records):
        if type(record) not in (OpRecord, PassRecord):
            continue
        operands = [n for n in record.ins if isinstance(n, int)]
        if all(n in free for n in operands):
            free.update(n for n in record.outs if isinstance(n, int))
        if not any(n in made for n in operands) or any(n not in made and n not in free and not _index(record, i)
                                                       for i, n in enumerate(record.ins) if isinstance(n, int)):
            continue
        made.update(n for n in record.outs if isinstance(n, int))
        for j, n in enumerate(record.outs):
            if isinstance(n, int) and _bool(record, j) and "tokens" in {role(label) for label in labels(n) if label}:
                event = inferred.event_of_record.get(r)
                where = f"`{record.spec.name}`" + (f" #{event}" if event is not None else "")
                return [Kind.LENGTHS_UNMEASURED.found(event, (
                    f"not measured on the values: whether the padding stays unread. {where} builds a padding mask "
                    f"from lengths the model was given, one per batch entry; no name or shape says that every "
                    "attention hides those pads, and the padding contract reads a mask given as an argument, "
                    "not one the model builds from its lengths."))]
    return []


def _index(record, i: int) -> bool:
    """Is operand ``i`` of ``record`` integers or booleans (positions, ``arange(T)``), not traced values?"""
    raw = getattr(record, "in_raw", None)
    return raw is not None and i < len(raw) and not raw[i][3].is_floating_point


def _bool(record, j: int) -> bool:
    """Is result ``j`` of ``record`` a boolean tensor of two axes or more?"""
    raw = getattr(record, "out_raw", None)
    return raw is not None and j < len(raw) and raw[j][3] == torch.bool and len(raw[j][0]) >= 2
