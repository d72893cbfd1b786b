"""Ops whose layout a contract read on the values checks, where no name can (issue 33 item 1): the ops
that build a rotary table, or a causal mask, read and found right.

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

A causal mask built from literal sizes (transformers' OPT ``_make_causal_mask``: ``torch.full((tgt_len,
tgt_len), min)``, ``mask.masked_fill_(mask_cond < (mask_cond + 1).view(mask.size(-1), 1), 0)``, then
``mask[None, None, :, :].expand(bsz, 1, tgt_len, tgt_len)``; Llama's ``torch.full((seqlen, seqlen),
-inf).triu(1)`` made before the model runs) has axes no input names. Where :mod:`.directions` read the
keys it hides on the scores whose last two axes the names say are the queries and the keys, and it
hides exactly the keys after each query in every slice (``hides_side == "future"``), its effect on
the scores is read whole, whatever its layout: the ops that built it are checked on its values. A
mask that also hides padding, or any other pattern, earns nothing (nor does a bias: which head a
slope lands on is not read from the values).

Only ops that no element of the data passed through: the records that made a table or a mask (back
through every operand, before its use) when none of the nodes they reach is one the rotated tensor
(or the scores) was made from. A table computed from the data itself gets nothing; nor does an
unread or mismatched one.

Reads: a capture's records, the rotaries found in it and the row of each record. Adds: the rows so
checked (:func:`note_value_checked` marks their events).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from shapetrace.engine.axes import unknown_axes
from shapetrace.engine.axis_reshape import reshape_axes
from shapetrace.engine.directions import HIDES
from shapetrace.engine.hidden import note_hidden_copies
from shapetrace.engine.ops import Family, family_of
from shapetrace.engine.rotary import PAIRED, Rotary, rotaries_of, step_token_label
from shapetrace.engine.rotary_positions import one_position_per_token, turns_in_every_entry


def rotary_checked_rows(records: Sequence, rotaries: Iterable, event_of_record: Mapping[int, int],
                        along_tokens: Callable[[Rotary], bool], counted: frozenset[int]) -> frozenset[int]:
    """The rows of the ops that only built a rotary table read and found right, or moved the data of
    its rotation. ``along_tokens(rotary)``: do its angles change along the tokens and along nothing else
    (the names of the rotated tensor say which axes hold tokens)? ``counted``: :func:`counted_nodes`."""
    made = _makers(records)
    rows: set[int] = set()
    earlier: set[int] = set()   # the tables of the rotations before this one (found in call order)
    for rotary in sorted(rotaries, key=lambda r: -1 if r.at is None else r.at):
        if rotary.outcome == PAIRED and rotary.rotated is not None and rotary.at is not None and along_tokens(rotary):
            tables, read = _ancestry(records, made, rotary.tables, rotary.at)
            # (a table made from the data, or from what the data was made from, is not the table's alone; the
            # data reaches earlier rotations' tables, a layer's or a decode step's before, through them only)
            data, data_read = _ancestry(records, made, (rotary.rotated,), rotary.at, stop=earlier)
            if not (read & data_read) - counted:
                rows.update(event_of_record[i] for i in (*(set(tables) - data), *rotary.moves)
                            if i in event_of_record and not _cuts_a_merge(records, made, i))
        earlier.update(rotary.tables)
    return frozenset(rows)


def counted_nodes(records: Sequence) -> frozenset[int]:
    """The nodes of integer or boolean tensors (ids, padding masks, positions): a table and the data may both be
    made from one (positions counted along ``attention_mask``, the ids the mask padded, when a script builds its
    inputs under the trace): what the data was made from then is a count or a mask, never the data's values, and
    the ops they share stay the data's (their names are checked, not the table's values)."""
    found: set[int] = set()
    for record in records:
        for nodes, raws in ((getattr(record, "ins", ()), getattr(record, "in_raw", ())),
                            (getattr(record, "outs", ()), getattr(record, "out_raw", ()))):
            for node, raw in zip(nodes, raws):
                dtype = raw[3] if isinstance(node, int) and len(raw) > 3 else None
                if dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
                    found.add(node)
    return frozenset(found)


def mask_checked_rows(records: Sequence, events: Sequence, event_of_record: Mapping[int, int],
                      tokens: Callable[[str | None], bool], counted: frozenset[int]) -> frozenset[int]:
    """The rows of the ops that only built a causal mask whose hidden keys were read on the scores and are
    exactly the future ones. ``tokens(label)``: does a name say its axis holds tokens?"""
    made = _makers(records)
    rows: set[int] = set()
    for index, row in event_of_record.items():
        split = _causal_mask_use(records[index], events[row], tokens) if row < len(events) else None
        if split is None:
            continue
        masks, scores = split
        built, read = _ancestry(records, made, masks, index)
        data, data_read = _ancestry(records, made, scores, index)
        if not (read & data_read) - counted:
            rows.update(event_of_record[i] for i in built - data if i in event_of_record)
    return frozenset(rows)


def _causal_mask_use(record, event, tokens) -> tuple[list[int], list[int]] | None:
    """``(mask nodes, scores nodes)`` of a call that hides exactly the future keys of the scores, read on
    its values, where the names say which axes are the queries and the keys; None otherwise."""
    if event.params.get("hides_side") != "future" or len(record.ins) != len(event.inputs) or not event.outputs:
        return None
    family, ins = family_of(event.op), list(record.ins)
    if family is Family.FUSED_ATTENTION:
        q, k = event.inputs[0], event.inputs[1]
        named = all(len(t.dims) >= 2 and tokens(t.dims[-2]) for t in (q, k))
        return (ins[3:], ins[:3]) if named and event.params.get("has_mask") and len(ins) >= 4 else None
    value = event.params.get("value")
    hides = isinstance(value, (int, float)) and value <= HIDES if family is Family.MASK_FILL \
        else bool(event.params.get("hides"))
    out = event.outputs[0]
    if not hides or [a.role for a in out.axes[-2:]] != ["query", "key"]:
        return None
    scores = [j for j, t in enumerate(event.inputs) if t.shape == out.shape and t.dims == out.dims]
    if len(scores) != 1:
        return None
    return [n for j, n in enumerate(ins) if j != scores[0]], [ins[scores[0]]]


def _cuts_a_merge(records: Sequence, made: Mapping[int, list[int]], index: int) -> bool:
    """Does record ``index`` cut (a shorter slice) an axis that a reshape just merged from several
    (sglang's fused rope reading ``positions.reshape(-1)[:num_tokens]`` of M-RoPE's ``[3, T]`` ids)? The
    table's values show the angles it turns each token by, never which pieces of the merge the cut kept:
    the first ``T`` of ``[3, T]`` flattened (one row) and of ``[T, 3]`` flattened (three ids of a third of
    the tokens) both vary along the tokens; so the cut is not checked on the values."""
    record = records[index]
    spec = getattr(record, "spec", None)
    if spec is None or spec.family is not Family.SLICE or len(record.ins) != 1 or not getattr(record, "out_raw", ()):
        return False
    shape_in, shape_out = tuple(record.in_raw[0][0]), tuple(record.out_raw[0][0])
    makers = [i for i in made.get(record.ins[0], ()) if i < index]
    if len(shape_in) != len(shape_out) or not makers:
        return False
    maker = records[makers[-1]]
    if getattr(maker, "spec", None) is None or maker.spec.family is not Family.RESHAPE or not maker.in_raw:
        return False
    merged = reshape_axes(unknown_axes(tuple(maker.in_raw[0][0])), shape_in)
    return any(n < m and sum(a.size > 1 for a in merged[j].atoms) > 1
               for j, (m, n) in enumerate(zip(shape_in, shape_out)))


def _makers(records: Sequence) -> dict[int, list[int]]:
    """node -> the records that made it (in-place writes included), in order."""
    made: dict[int, list[int]] = {}
    for index, record in enumerate(records):
        for node in getattr(record, "outs", ()):
            if isinstance(node, int):
                made.setdefault(node, []).append(index)
    return made


def _ancestry(records: Sequence, made: Mapping[int, list[int]], nodes: Iterable[int],
              before: int, stop: frozenset[int] | set[int] = frozenset()) -> tuple[set[int], set[int]]:
    """Every record before ``before`` that made one of ``nodes`` or what such a record read, and every
    node reached (``nodes`` and the inputs no record made included); the walk neither enters nor counts
    the nodes of ``stop``."""
    found: set[int] = set()
    stack = [(node, before) for node in nodes]
    reached = set(nodes)
    while stack:
        node, bound = stack.pop()
        for index in made.get(node, ()):
            if index < bound and index not in found:
                found.add(index)
                ins = [n for n in records[index].ins if isinstance(n, int) and n not in stop]
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
        out = events[rotary.event].outputs[0]
        if not rotary.varies:   # (one position: its angles are the position its token belongs at)
            axis = rotary.placed[0] if rotary.placed else len(out.dims)
            return rotary.position is not None and rotary.position == rotary.expected and axis < len(out.dims) \
                and out.shape[axis] == 1 and namer.plain_role(step_token_label(events, rotary, out)) == "tokens"
        roles = {j: namer.plain_role(out.dims[j]) if j < len(out.dims) else None for j in rotary.varies}
        tokens, batch = ([j for j, role in roles.items() if role == r] for r in ("tokens", "batch"))
        # (positions per batch entry, a left-padded row's offset by its padding, vary along the batch too: then
        # along the tokens in every entry)
        return bool(tokens) and len(tokens) + len(batch) == len(roles) \
            and turns_in_every_entry(rotary.angles, tuple(out.shape), batch, tokens) \
            and one_position_per_token(rotary.angles)   # (a 2-D rotary's grid positions are not read)

    def tokens(label: str | None) -> bool:
        return namer.plain_role(label) == "tokens"

    counted = counted_nodes(capture.records)
    note_value_checked(events, rotary_checked_rows(capture.records, rotaries_of(capture, rows), rows, along_tokens,
                                                   counted) | mask_checked_rows(capture.records, events, rows, tokens,
                                                                                counted))
