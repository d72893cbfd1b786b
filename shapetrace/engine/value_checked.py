"""Ops whose layout a contract read on the values checks, where no name can (issue 33 item 1).

A rotary table is built from positions and a buffer of frequencies (transformers' Llama
``inv_freq[None, :, None] @ position_ids``, GPT-NeoX's ``cos_cached[position_ids]``, Phi's
``torch.cat((freqs, freqs), dim=-1)``): its feature axis counts frequencies, which nothing the input
declares names, so the ops that build it have an unnamed axis and the verdict could never be ``✓``.
Where :mod:`.rotary` read both tables' values and found that they pair features exactly as the
rotation pairs them (``PAIRED``: the rotation's data moves replayed on coordinates, the tables'
equal columns compared) and that their angles change along the axes the rotated tensor's names say
hold tokens and along no other (a table whose angles stay the same along the tokens is an error of
:mod:`.rules.rotary`; one of a single position, a decode step's, shows nothing), the tables' layout is
checked where they meet the data: the ops that built them, and the data moves of the rotation,
are counted as checked, on the values.

Only ops that no element of the rotated tensor's data passed through: the records that made a table
(back through every operand, before the rotation) when none of them is a record the rotated tensor
was made from. A table computed from the data itself gets nothing; nor does an unread or mismatched
one.

Reads: a capture's records, the rotaries found in it and the row of each record. Adds: the rows so
checked (:func:`note_value_checked` marks their events).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from shapetrace.engine.hidden import note_hidden_copies
from shapetrace.engine.rotary import PAIRED, Rotary, rotaries_of


def rotary_checked_rows(records: Sequence, rotaries: Iterable, event_of_record: Mapping[int, int],
                        along_tokens: Callable[[Rotary], bool]) -> frozenset[int]:
    """The rows of the ops that only built a rotary table read and found right, or moved the data of
    its rotation. ``along_tokens(rotary)``: do its angles change along the tokens and along nothing else
    (the names of the rotated tensor say which axes hold tokens)?"""
    made: dict[int, list[int]] = {}
    for index, record in enumerate(records):
        for node in getattr(record, "outs", ()):
            if isinstance(node, int):
                made.setdefault(node, []).append(index)
    rows: set[int] = set()
    for rotary in rotaries:
        if rotary.outcome != PAIRED or rotary.rotated is None or rotary.at is None or not along_tokens(rotary):
            continue
        tables, read = _ancestry(records, made, rotary.tables, rotary.at)
        if read & _ancestry(records, made, (rotary.rotated,), rotary.at)[1]:
            continue   # (a table made from the data, or from what the data was made from: not the table's alone)
        rows.update(event_of_record[i] for i in (*tables, *rotary.moves) if i in event_of_record)
    return frozenset(rows)


def _ancestry(records: Sequence, made: Mapping[int, list[int]], nodes: Iterable[int],
              before: int) -> tuple[set[int], set[int]]:
    """Every record before ``before`` that made one of ``nodes`` or what such a record read, and every
    node reached (``nodes`` and the inputs no record made included)."""
    found: set[int] = set()
    stack = [(node, before) for node in nodes]
    reached = set(nodes)
    while stack:
        node, bound = stack.pop()
        for index in made.get(node, ()):
            if index < bound and index not in found:
                found.add(index)
                ins = [n for n in records[index].ins if isinstance(n, int)]
                reached.update(ins)
                stack.extend((n, index) for n in ins)
    return found, reached


def note_value_checked(events: Sequence, rows: frozenset[int]) -> None:
    """Mark the events of ``rows`` as checked on the values (:attr:`.events.Event.checked_on_values`)."""
    for event in events:
        if event.index in rows:
            event.checked_on_values = True


def note_final(inference, capture) -> None:
    """The passes over a concluded inference's events, once its names are final: each event's hidden
    copies (:func:`.hidden.note_hidden_copies`) and the ops checked on the values."""
    note_hidden_copies(inference.events)
    rows, events, namer = inference.event_of_record, inference.events, inference.namer

    def along_tokens(rotary: Rotary) -> bool:   # (the rotated tensor's row: the rotation's last data move)
        if rotary.event is None or rotary.event >= len(events) or not events[rotary.event].outputs:
            return False
        dims = events[rotary.event].outputs[0].dims
        return bool(rotary.varies) and all(j < len(dims) and namer.plain_role(dims[j]) == "tokens"
                                           for j in rotary.varies)

    note_value_checked(events, rotary_checked_rows(capture.records, rotaries_of(capture, rows), rows, along_tokens))
