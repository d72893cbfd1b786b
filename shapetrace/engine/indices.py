"""What index values count, and picks made with them along another axis (issue 33 item 3: sizes and
indices carry their provenance).

The indices ``argsort`` and ``argmax`` / ``argmin`` give count positions along the axis they ran over
(MAE's ``ids_shuffle = torch.argsort(noise, dim=1)`` counts the patches, and so does
``ids_restore = torch.argsort(ids_shuffle, dim=1)``); ``torch.arange(n)`` with ``n`` read from an axis
(:mod:`.sizes`) counts that axis. The count passes through the ops that only move, repeat, cast or offset
values (a slice, ``unsqueeze``, ``repeat``, ``expand``, ``cat`` of indices that count one axis, ``.long()``,
``+ past``) and ends at any other op. A call that picks along an axis by an index tensor (``gather``,
``index_select``, ``take_along_dim``: ``spec.picks_by_index``) with indices that count an axis of one role,
along an axis of its input of another role (or unnamed), while another axis of that input has the role the
indices count, picks along the wrong axis: MAE's unshuffle ``torch.gather(x_, dim=2, index=ids_restore...)``
moves features by patch positions. The roles come from the names; no size decides anything.

``topk``'s indices count positions along the axis it ran over too, and over a slice (``scores[:, p:]``, named
``T[2:5]``) they count from the slice's start: adding that start (``+ p``) makes them count the whole axis, and a
pick along a range of the same axis that starts elsewhere (``x[:, :-w]``, ``T[0:5]``) with indices that still
count from the slice's start picks other tokens than those chosen (Linking-ai/SCOPE issue #6). A ``cat`` passes
on the one count its parts carry (a part made by ``arange(p)`` of a plain number counts nothing known).

Reads: a capture's records (rows and calls without one), the inferred axes of each node, the namer, and
the rows of the picks (their input's names and ``dim``). Adds: the :class:`MisIndexed` picks, for
:mod:`.rules.indices`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from shapetrace.engine.axes import cut_from
from shapetrace.engine.opspec import LAYOUT_FAMILIES, Family
from shapetrace.engine.thawed import thaw_args

#: families whose ops keep the values of their one operand (moved, repeated, cast or offset by a number)
KEEPS_VALUES = LAYOUT_FAMILIES | {Family.SPLIT, Family.JOIN, Family.ELEMENTWISE}


class Count(NamedTuple):
    """What the values of a tensor count: positions along ``label``, made by ``op``."""

    label: str
    op: str


class MisIndexed(NamedTuple):
    """A pick along axis ``dim`` (named ``picked``, or None) of the row ``event``, with indices that count
    ``count``, while axis ``held`` of its input (``held_label``) has the role they count; ``held`` -1: the picked
    axis is a range of the axis they count that starts elsewhere (``T[0:5]`` picked with positions of ``T[2:5]``)."""

    event: int
    dim: int
    picked: str | None
    count: Count
    held: int
    held_label: str


def misindexed_of(records: Sequence, labels_of: Callable[[int], tuple], role_of: Callable[[str | None], str | None],
                  event_of_record: Mapping[int, int], events: Sequence) -> tuple[MisIndexed, ...]:
    """Every pick by an index tensor along another axis than the one its indices count, in call order.
    ``labels_of(node)``: the names of a node's axes; ``role_of(label)``: a plain name's role or None."""
    counts: dict[int, Count] = {}
    borrowed: dict[int, tuple] = {}    # an argsort's result -> its input's names (its ranks run along them)
    found: list[MisIndexed] = []
    for index, record in enumerate(records):
        spec = getattr(record, "spec", None)
        if spec is None or getattr(record, "error", None):
            continue
        ins = [n for n in record.ins if isinstance(n, int)]
        outs = [n for n in record.outs if isinstance(n, int)]
        if spec.picks_by_index and index in event_of_record and len(ins) >= 2 and ins[1] in counts:
            wrong = _wrong_pick(events[event_of_record[index]], counts[ins[1]], role_of)
            if wrong is not None:
                found.append(wrong)
        made = _made_count(record, ins, outs, counts, borrowed, labels_of)
        if made is not None:
            for node in outs[1:] if spec.counts.startswith("k,") else outs:   # (topk: its values count nothing)
                counts[node] = made
            source = (borrowed.get(ins[0]) or labels_of(ins[0])) if spec.counts and ins else ()
            borrowed.update((node, source) for node in outs if source and len(labels_of(node)) == len(source))
    return tuple(found)


def node_labels(axes: Mapping[int, tuple], namer) -> Callable[[int], tuple]:
    """``labels_of`` for :func:`misindexed_of`: a node's axis names as inference left them in ``axes``
    (nothing is inferred anew: no names where it has none)."""
    def labels(node: int) -> tuple:
        found = axes.get(node)
        return namer.dims_of(found) if found else ()
    return labels


def _made_count(record, ins: list, outs: list, counts: dict, borrowed: dict, labels_of) -> Count | None:
    """What the results of ``record`` count, or None."""
    spec = record.spec
    if spec.counts and len(ins) == 1:
        return _counted_along(record, borrowed.get(ins[0]) or labels_of(ins[0]))
    if spec.sized == "count" and len(outs) == 1:
        label = (labels_of(outs[0]) or (None,))[0]
        return Count(label, spec.name) if label else None
    known = [counts.get(n) for n in ins]
    if spec.family is Family.JOIN:   # (each part keeps its values: the one count the parts carry holds of them)
        known = [c for c in known if c is not None]
    if not known or any(c is None for c in known) or len(set(known)) != 1:
        return None
    if spec.family is Family.ELEMENTWISE and len(known) > 1:
        return None   # positions combined with positions: ``q_ids[:, None] - k_ids[None, :]`` is a distance
    if spec.family is Family.ELEMENTWISE:
        return _offset(record, known[0])
    if spec.family in KEEPS_VALUES or spec.sized == "grown":
        return known[0]
    return None


def _start(label: str | None) -> tuple[str, int] | None:
    """``"T[2:5]"`` -> ``("T", 2)``, ``"T"`` -> ``("T", 0)``: the axis a range of positions lies on and where
    it starts; None for a range counted from the end (``T[-1:]``) or no name."""
    cut = cut_from(label)
    if cut is None:
        return (label, 0) if label and "[" not in label else None
    base, start, _ = cut
    return (base, start or 0) if start is None or start >= 0 else None


def _offset(record, count: Count) -> Count:
    """The count of ``count + n`` (a plain number): where ``n`` is the start of the slice the indices count
    along, they count the whole axis (``T[2:5]`` + 2: positions of ``T``); any other offset keeps the count."""
    args, kwargs = thaw_args(record.frozen)
    number = [a for a in (*args, *kwargs.values()) if type(a) is int]
    where = _start(count.label)
    if record.spec.additive and len(number) == 1 and where and where[1] and number[0] == where[1]:
        return Count(where[0], count.op)
    return count


def _counted_along(record, labels: tuple) -> Count | None:
    """The axis an ``argsort`` / ``argmax`` ran over (its ``dim``; a flat index counts no one axis)."""
    args, kwargs = thaw_args(record.frozen)
    at = 2 if record.spec.counts.startswith("k,") else 1   # (``topk(x, k, dim)``)
    dim = kwargs.get("dim", args[at] if len(args) > at else (-1 if record.spec.counts.endswith("or last") else None))
    if type(dim) is not int or not labels or not -len(labels) <= dim < len(labels):
        return None
    label = labels[dim]
    return Count(label, record.spec.name) if label else None


def _wrong_pick(event, count: Count, role_of) -> MisIndexed | None:
    """The pick of ``event`` when it runs along an axis of another role than ``count``'s while its input
    holds that role on another axis; None otherwise (or where a role is not known)."""
    wanted = role_of(count.label)
    dim = event.params.get("dim") if event.params else None
    if wanted is None or type(dim) is not int or not event.inputs:
        return None
    labels = event.inputs[0].dims
    if not -len(labels) <= dim < len(labels):
        return None
    dim %= len(labels)
    theirs, mine = _start(count.label), _start(labels[dim])
    if theirs and mine and theirs[0] == mine[0] and theirs[1] != mine[1]:   # (one axis, counted from elsewhere)
        return MisIndexed(event.index, dim, labels[dim], count, -1, labels[dim])
    if role_of(labels[dim]) == wanted:
        return None
    held = next((j for j, label in enumerate(labels) if j != dim and role_of(label) == wanted), None)
    return None if held is None else MisIndexed(event.index, dim, labels[dim], count, held, labels[held])
