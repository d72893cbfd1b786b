"""Tables looked up by one ids tensor and summed: two tables read by the same ids are one table of their sums.

BERT's embeddings add three lookups per token, each by its own ids (``input_ids``, ``token_type_ids``,
``position_ids``). Where one ids tensor reads two of the tables that are then added (HKU-MedAI/MGCA issue #13:
``position_ids=token_type_ids``, so the position table is read by the token types), one of them is read by
the ids of the other: what the second table should add (the word order) is not there. Read from the records:
which ``embedding`` calls (each in its own module: its own table) read which node, and which of them an
addition sums (through further additions). Plain data out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def ids_read_twice(records: Sequence, rows: Mapping[int, int]) -> tuple[tuple[int, int], ...]:
    """``(event, event)`` of each pair of ``embedding`` calls in two modules (two tables) that read the same ids
    node and whose results one addition sums; ``rows``: record -> event (calls without a row are left out)."""
    made: dict[int, int] = {}                       # node -> the record that made it
    summed: dict[int, frozenset[int]] = {}          # record -> the lookups it is, or adds up
    found: list[tuple[int, int]] = []
    for index, record in enumerate(records):
        spec = getattr(record, "spec", None)   # (None: a declared name, no op)
        if spec is None:
            pass
        elif spec.looks_up and record.ins and record.module >= 0:   # (``embedding``: a table per module)
            summed[index] = frozenset({index})
        elif spec.additive:   # (``a + b``, ``a += b``: the registry's additions)
            parts = frozenset().union(*(summed.get(made.get(n, -1), frozenset()) for n in record.ins))
            if parts:
                summed[index] = parts
                found += _same_ids(records, parts, found)
        for node in getattr(record, "outs", ()):
            made[node] = index
    return tuple((rows[a], rows[b]) for a, b in found if a in rows and b in rows)


def _same_ids(records: Sequence, parts: frozenset[int], found: list) -> list[tuple[int, int]]:
    ordered = sorted(parts)
    return [(a, b) for i, a in enumerate(ordered) for b in ordered[i + 1:]
            if records[a].ins[0] == records[b].ins[0] and records[a].module != records[b].module
            and (a, b) not in found]
