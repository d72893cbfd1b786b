"""The axis a ``stack`` makes, where nothing needs it named (part of :mod:`.verdict`).

A stack's new axis counts its operands; nothing names it (a size never decides a name). Two ways of reading it
back give the operands' own elements, each with its own axes, and so leave no element whose layout that axis
could spoil:

- taken apart along it (flash-attn's and Phi-2's ``qkv = torch.stack([q, k, v], dim=2)`` for a rotary call,
  then ``q, k, v = qkv.unbind(dim=2)``; or a ``select`` along it): the pieces come out as the operands went in;
- reduced along it alone (timm's parallel blocks, ``torch.stack([attn(x) for attn in self.attns]).sum(dim=0)``;
  a mean of branches): the reduction combines the operands element by element, as ``a + b`` would, and each
  output element is the same place in every operand. This holds only where the operands agree: every operand
  carries the same names on every axis of more than one entry (a stack of ``(B, T, D)`` and a transposed
  ``(B, D, T)`` at T = D adds tokens to features, and keeps needing a name), and only where the reduction reads
  the stack itself: a call without a row between them (the Feedback Transformer's ``(hiddens * weights).sum(0)``,
  tests/corpus/reports22) broadcasts another operand against that axis, and nothing checks that it lines up.

A stack read any other way (a reshape, a product, a cut or a reduction along another axis) keeps needing one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shapetrace.engine.events import readers_of
from shapetrace.engine.ops import Family, family_of
from shapetrace.engine.reductions import axes_along

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import Event

#: the position in a key ``(event index, ALONG_OPERAND, axis)`` that means "the axis of its first operand the
#: op computes along", beside ``(event index, result position, axis)`` for a result's axis
ALONG_OPERAND = -1


def unpacked_stacks(events: Sequence[Event]) -> frozenset[tuple[int, int, int]]:
    """``(event index, 0, axis)`` of the axis a stack made where every op that read its result takes it apart
    along that same axis, or reduces along it alone the operands that agree (see the module's docstring); and
    for each such reduction, ``(its index, ALONG_OPERAND, axis)``: the axis it computes along needs no name."""
    readers = readers_of(events)
    found: set[tuple[int, int, int]] = set()
    for e in events:
        if not e.spec.stacks or len(e.outputs) != 1 or not readers.get((e.index, 0)):
            continue
        rank = len(e.outputs[0].shape)
        dim = e.params.get("dim", 0)
        if not isinstance(dim, int) or not rank:
            continue
        axis, read = dim % rank, readers[(e.index, 0)]
        if all(_takes_apart_along(r, axis, rank) for r, _ in read):
            found.add((e.index, 0, axis))
        elif _operands_agree(e) and all(at == 0 and not (r.carried and r.carried[0]) and _reduces_along(r, axis, rank)
                                        for r, at in read):
            found.add((e.index, 0, axis))
            found.update((r.index, ALONG_OPERAND, axis) for r, _ in read)
    return frozenset(found)


def _takes_apart_along(reader: Event, axis: int, rank: int) -> bool:
    """Does ``reader`` take its one operand apart along ``axis`` (``unbind(dim)``, ``select(dim, i)``)?"""
    dim = reader.params.get("dim", 0)
    return bool(reader.spec.cuts_at) and reader.spec.family in (Family.SPLIT, Family.SLICE) \
        and len(reader.inputs) == 1 and isinstance(dim, int) and dim % rank == axis


def _reduces_along(reader: Event, axis: int, rank: int) -> bool:
    """Does ``reader`` reduce its one operand along ``axis`` and no other (``sum(dim=0)``, ``mean(0)``)?"""
    return family_of(reader.op) is Family.REDUCE and len(reader.inputs) == 1 \
        and axes_along(Family.REDUCE.value, reader.params, rank) == (axis,)


def _operands_agree(stack: Event) -> bool:
    """Do all the stack's operands carry one and the same name on every axis of more than one entry?"""
    first = stack.inputs[0] if stack.inputs else None
    return first is not None and len(stack.inputs) >= 2 and all(
        tuple(t.shape) == tuple(first.shape) and all(
            a is not None and a == b for a, b, n in zip(t.dims, first.dims, t.shape) if n > 1)
        for t in stack.inputs)
