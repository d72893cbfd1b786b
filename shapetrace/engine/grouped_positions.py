"""Where a mask given to the attention groups positions by division: chunks, blocks and strides, not checked.

A causal triangle, a padding mask and a window are judged from the names and the mask's values. A mask made
from positions by floor division or a remainder (Llama 4's chunked attention, ``(kv_idx - pad) // chunk ==
(q_idx - pad) // chunk``; a block-local mask; a strided pattern ``(q - k) % stride == 0``) keeps every name
whichever positions it groups: an offset left out or a wrong chunk puts tokens in another group with the
same axes and the same shapes (the transformers llama4 left-padding report: chunk ids read from the padded
column). No name can check that, so the verdict says it was not checked: ``?``, never ``✓``.

Positions are the integer values made by ``arange`` and by integer arithmetic on them (an offset read from a
mask, ``kv_idx - left_pad``); a grouping is a floor division or a remainder of positions; what a grouping
makes is followed through any op to a call that takes a mask (``masked_fill``, an attention kernel's
``attn_mask``, a softmax or an addition onto scores). Reads: a finished trace's capture. Plain data out.
"""

from __future__ import annotations

import torch

from shapetrace.engine.capture import OpRecord, PassRecord
from shapetrace.engine.diagnostic import Diagnostic
from shapetrace.engine.kinds import Kind
from shapetrace.engine.mask_parts import takes_a_mask
from shapetrace.engine.ops import Family
from shapetrace.engine.opspec import LAYOUT_FAMILIES

#: the ops that group integers: floor division and remainders (``//``, ``%``, ``torch.remainder``)
GROUPING = frozenset({"floor_divide", "__floordiv__", "__rfloordiv__", "__mod__", "remainder", "fmod"})


def grouped_position_masks(trace) -> list[Diagnostic]:
    """A note (the verdict ``?``) at the first call that takes a mask made from positions grouped by division."""
    capture, rows = trace.capture, trace._inferred().event_of_record
    positions: set[int] = set()
    grouped: set[int] = set()
    for r, record in enumerate(capture.records):
        if type(record) not in (OpRecord, PassRecord):
            continue
        operands = [n for n in record.ins if isinstance(n, int)]
        outs = [n for n in record.outs if isinstance(n, int)]
        if takes_a_mask(record) and any(n in grouped for n in operands):
            event = rows.get(r)
            where = f"`{record.spec.name}`" + (f" #{event}" if event is not None else "")
            return [Kind.POSITIONS_GROUPED.found(event, (
                f"not checked: which positions share a group. {where} takes a mask made from positions grouped by "
                "division (chunks, blocks or strides: `//`, `%`); an offset left out or a wrong chunk groups other "
                "tokens with the same names and shapes, so no name can check it."))]
        if any(n in grouped for n in operands):
            grouped.update(outs)
        elif record.spec.sized == "count":
            positions.update(outs)
        elif any(n in positions for n in operands) and record.spec.name in GROUPING:
            grouped.update(outs)   # (``remainder`` is known to the registry on the meta device only: any family)
        elif any(n in positions for n in operands) and _arithmetic(record):
            positions.update(outs)
    return []


def _arithmetic(record) -> bool:
    """Does ``record`` move positions or compute with them, into positions (never a float: scores, weights)?"""
    raw = getattr(record, "out_raw", None)
    if raw and any(r[3].is_floating_point or r[3] == torch.bool for r in raw):
        return False
    return record.spec.family is Family.ELEMENTWISE or record.spec.family in LAYOUT_FAMILIES
