"""Scores whose queries and keys were not both turned by a rotary embedding (EleutherAI/gpt-neox's partial
rotary with ``key_layer = torch.cat((key_rot, key_pass), dim=-1)`` written where ``key_rot`` was to be the rotated
one: the keys' rotation is computed and dropped).

RoPE gives the scores relative positions only where both sides are turned by one table: ``q_m·k_n`` then
depends on ``m - n``. Each operand of a product whose operands are the queries and the keys (the projections'
``q`` and ``k``, :attr:`.events.Event.projections`) is walked back through the capture's records, every call
(with a row or not) that made it, down to the projection that made it: it was turned where a rotary's cos or
sin table (:class:`.rotary.Rotary`) is among what made it. Nothing past a projection is walked (a layer's input
carries the rotations of the layers before it).
"""

from __future__ import annotations

from collections.abc import Sequence

from shapetrace.engine.ops import Family

#: the most nodes walked back from one operand (a model's whole forward is never walked: a projection stops it)
_MOST = 4096


def one_sided_rotations(records: Sequence, rows: dict[int, int], events: Sequence,
                        rotaries: Sequence) -> tuple[tuple[int, str], ...]:
    """``(product event, "q" or "k")``: each product of the queries and the keys where only that side was turned
    by a rotary table of the run (none where the run has no rotary)."""
    tables = {n for rotary in rotaries for n in (rotary.tables or ()) if isinstance(n, int)}
    if not tables:
        return ()
    view_of: dict[int, int] = {}
    made_by: dict[int, list[int]] = {}   # node -> the records that made it or wrote into it (or into a view of it)
    for i, record in enumerate(records):
        spec, ins = getattr(record, "spec", None), getattr(record, "ins", ())
        for n in getattr(record, "outs", ()):
            made_by.setdefault(n, []).append(i)
        if spec is not None and spec.inplace and ins:   # (``kv[:, :, 0] = rotate(...)``: written into kv)
            made_by.setdefault(ins[0], []).append(i)
        if spec is not None and spec.memory == "view" and ins and getattr(record, "outs", ()):
            view_of.setdefault(record.outs[0], ins[0])
    for n, base in view_of.items():   # (a write into a view writes into what it views)
        made_by.setdefault(base, []).extend(r for r in made_by.get(n, ()) if records[r].spec.inplace)
    record_of = {event: record for record, event in rows.items()}
    found = []
    for e in events:
        letters = tuple(p for p in e.projections if p)
        if sorted(letters) != ["k", "q"] or e.spec is None or e.spec.family is not Family.PRODUCT:
            continue
        ins = getattr(records[record_of[e.index]], "ins", ()) if e.index in record_of else ()
        turned = {p: _turned(ins[i], tables, made_by, records) for i, p in enumerate(e.projections)
                  if p and i < len(ins)}
        if set(turned) == {"q", "k"} and turned["q"] != turned["k"]:
            found.append((e.index, "q" if turned["q"] else "k"))
    return tuple(found)


def _turned(node, tables: set[int], made_by: dict[int, list[int]], records: Sequence) -> bool:
    """Is a rotary table among what made ``node``, back to the projection that made it?"""
    seen, todo = set(), [node]
    while todo and len(seen) < _MOST:
        n = todo.pop()
        if not isinstance(n, int) or n in seen:
            continue
        if n in tables:
            return True
        seen.add(n)
        for r in made_by.get(n, ()):
            record = records[r]
            spec = getattr(record, "spec", None)
            if spec is None or spec.family is not Family.PROJECTION:
                todo.extend(getattr(record, "ins", ()))
    return False
