"""Tables looked up by one ids tensor and summed: two tables read by the same ids are one table of their sums.

BERT's embeddings add three lookups per token, each by its own ids (``input_ids``, ``token_type_ids``,
``position_ids``). Where one ids tensor reads two of the tables that are then added (HKU-MedAI/MGCA issue #13:
``position_ids=token_type_ids``, so the position table is read by the token types), one of them is read by
the ids of the other: what the second table should add (the word order) is not there. Read from the records:
which ``embedding`` calls (each in its own module: its own table) read which node, and which of them an
addition sums (through further additions). Plain data out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from shapetrace.engine.infer.counted import counted_values
from shapetrace.engine.sizes import SizeOf
from shapetrace.engine.thawed import thaw_args


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


def restarted_positions(records: Sequence, rows: Mapping[int, int]) -> tuple[tuple[int, int, int, int, int], ...]:
    """``(earlier lookup, later lookup, join, its dim, entries before)`` (events) for each lookup of a table by a
    run of consecutive positions the trace counted itself (``wpe(arange(start, start + n))``, a sinusoidal
    buffer's ``index_select``) that starts where an earlier lookup of the same table started, while a join right
    after it appends what it feeds after entries made before it (a KV cache: ``cat([past_k, k], dim)``). The
    step's tokens are then embedded at the positions of the sequence's first tokens again (transformers issue
    #15736; mosaicml/examples PR #244). Values decide, never sizes: positions whose values are not known (given
    by the caller, computed from other tensors) are not read."""
    made, readers = made_and_read(records)

    def producer(node: int):
        return records[made[node]] if node in made else None

    runs: list[tuple[int, object, int]] = []   # (record, table, first position)
    found = []
    for index, record in enumerate(records):
        looked = _position_run(record, producer)
        if looked is None:
            continue
        table, first = looked
        earlier = next((i for i, t, f in runs if t == table and f == first), None)
        join = _appended_after(records, index, made) if earlier is not None and _added(records, readers, index) \
            else None
        if join is not None:
            found.append((earlier, index, *join))
        runs.append((index, table, first))
    return tuple((rows[a], rows[b], rows[j], dim, before) for a, b, j, dim, before in found
                 if a in rows and b in rows and j in rows)


#: how many records after a lookup the join of its step's keys is looked for
_JOIN_REACH = 80


def made_and_read(records: Sequence) -> tuple[dict[int, int], dict[int, list[int]]]:
    """``(made, readers)``: the record that first made each node, and the records that read it, in order."""
    made: dict[int, int] = {}
    readers: dict[int, list[int]] = {}
    for index, record in enumerate(records):
        for node in getattr(record, "ins", ()):
            readers.setdefault(node, []).append(index)
        for node in getattr(record, "outs", ()):
            made.setdefault(node, index)
    return made, readers


def _position_run(record, producer) -> tuple[object, int] | None:
    """``(table, first position)`` of a lookup (``embedding``, ``index_select`` along a table's rows) by
    positions the trace counted that make one run of consecutive values; None otherwise."""
    spec, ins = getattr(record, "spec", None), getattr(record, "ins", ())
    if spec is not None and spec.looks_up and len(ins) == 1 and record.module >= 0:
        ids, table = ins[0], ("module", record.module)   # (``nn.Embedding``: its weight is its module's own)
    elif spec is not None and spec.looks_up and len(ins) == 2:
        ids, table = ins
    elif spec is not None and spec.name == "index_select" and len(ins) == 2 and \
            _dim_of(thaw_args(record.frozen), 1) == 0:
        table, ids = ins
    else:
        return None
    values = counted_values(ids, producer)
    if values is None or values.numel() == 0:
        return None
    distinct = values.unique()   # (sorted)
    first = int(distinct[0])
    return (table, first) if int(distinct[-1]) - first + 1 == distinct.numel() else None


def _added(records: Sequence, readers: Mapping[int, list[int]], index: int, depth: int = 3) -> bool:
    """Are the rows record ``index`` looked up added to other values (an embedding summed into the token
    stream: ``wte(ids) + wpe(positions)``), through at most ``depth`` one-operand ops? A table whose rows turn
    the features (a rotary's sinusoids) is read by ``rules/rotary`` instead."""
    frontier = list(getattr(records[index], "outs", ()))
    for _ in range(depth):
        later = []
        for node in frontier:
            for reader in readers.get(node, ()):
                spec = getattr(records[reader], "spec", None)
                if spec is not None and spec.additive:
                    return True
                if spec is not None and len(records[reader].ins) == 1:
                    later += list(records[reader].outs)
        frontier = later
    return False


def _dim_of(arguments, position: int, default: int | None = None) -> int | None:
    args, kwargs = arguments
    dim = kwargs.get("dim", args[position] if len(args) > position else default)
    return dim if isinstance(dim, int) and not isinstance(dim, bool) else None


def _appended_after(records: Sequence, index: int, made: Mapping[int, int]) -> tuple[int, int, int] | None:
    """``(join record, dim, entries before)`` of the first ``cat`` after record ``index`` whose first part was made
    before it and has entries (a cache the step's keys are appended to), within :data:`_JOIN_REACH` records."""
    for later in range(index + 1, min(len(records), index + 1 + _JOIN_REACH)):
        record = records[later]
        spec = getattr(record, "spec", None)
        if spec is None or spec.name != "cat" or len(record.ins) < 2 or made.get(record.ins[0], -1) >= index:
            continue
        args, kwargs = thaw_args(record.frozen)
        dim, shape = _dim_of((args, kwargs), 1, 0), tuple(record.in_raw[0][0])
        if dim is not None and -len(shape) <= dim < len(shape) and shape[dim] > 0:
            return later, dim % len(shape), shape[dim]
    return None


def picked_at_length(records: Sequence, rows: Mapping[int, int], shapes: Callable[[int], tuple | None],
                     stamp: int, start: int = 0) -> tuple[tuple[int, str, int], ...]:
    """``(pick event, the addition's op, the tokens' length)`` for each entry of a table that entered the code
    (a buffer, a parameter: nothing the run made) picked by one integer that is a length read from a tensor
    (``x.shape[1]``, a :class:`~.sizes.SizeOf` of this capture, ``stamp``), then added to that very tensor, along
    whose axis of that length the picked entry broadcasts: every token gets the one entry at position ``T``, one
    past the last (DiffPoseTalk issue #20: ``x + self.pe[:, x.shape[1], :]`` for ``self.pe[:, :x.shape[1], :]``).
    The length's node and axis decide, never a size: a decoding step's ``pe[:, past]`` read from the cache and
    added to the new token is no such pick. ``shapes(node)``: a node's shape; ``start``: the first record of the
    model's call (a table the script built before it, a ``register_buffer`` filled at construction, entered)."""
    made, readers = made_and_read(records)
    found = []
    for index, record in enumerate(records):
        length = _picked_by_length(record, made, stamp, start)
        if length is None:
            continue
        for later in readers.get(record.outs[0], ()):
            spec, ins = getattr(records[later], "spec", None), records[later].ins
            if spec is None or not spec.additive or length.node not in ins:
                continue
            over = shapes(length.node)
            picked = tuple(record.out_raw[0][0])
            place = length.axis - (len(over) - len(picked)) if over is not None else -1
            if over is not None and over[length.axis] == int(length) > 1 and (place < 0 or picked[place] == 1):
                found.append((index, records[later].spec.name, int(length)))
    return tuple((rows[a], op, n) for a, op, n in found if a in rows)   # (the addition may have no row)


def _picked_by_length(record, made: Mapping[int, int], stamp: int, start: int):
    """The one :class:`~.sizes.SizeOf` of this capture among the integers ``record`` indexes an entered table
    with (``table[:, n, :]``, ``table.select(1, n)``), or None."""
    spec, ins = getattr(record, "spec", None), getattr(record, "ins", ())
    if spec is None or not spec.picks or len(ins) != 1 or made.get(ins[0], -1) >= start or \
            not getattr(record, "outs", ()):
        return None
    args, _ = thaw_args(record.frozen)
    where = args[1:] if spec.name != "__getitem__" else \
        (args[1] if len(args) > 1 and isinstance(args[1], tuple) else args[1:2])
    lengths = [a for a in where if type(a) is SizeOf and a.stamp == stamp]
    return lengths[0] if len(lengths) == 1 else None
