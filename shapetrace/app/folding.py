"""Repeated blocks of ops, found so the table can show them once (plain data, no Rich, no torch).

k and v are split into heads exactly like q: the same two ops on the same source lines with the
same shapes and strides. The table shows the first block in full and each repeat as one line,
``k: the same two ops as q, #1-#2``; ``--all`` shows every op.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import Event

_NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}
_TARGET = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=[^=]")


@dataclass(frozen=True)
class Fold:
    """A block of ops that repeats an earlier block op for op."""

    events: tuple[Event, ...]
    original: tuple[Event, ...]
    sentence: str
    times: int = 1  #: how many times ``original`` repeats back to back (a loop's iterations)


def signature(e: Event) -> tuple:
    """What must match for two ops to be the same step: op, source line, shapes, strides, names, memory."""
    facts = tuple((t.shape, t.stride, t.dims, t.contiguous) for t in (*e.inputs, *e.outputs))
    return (e.op, e.source, e.code, e.args, facts, e.view, e.noop, e.copy_bytes, e.alloc_bytes, e.error)


def target(e: Event | None) -> str | None:
    """``q`` for an op written as ``q = ...``."""
    m = _TARGET.match(e.code) if e is not None else None
    return m.group(1) if m else None


def fold_events(events: Sequence[Event], keep: Collection[int] = (), min_ops: int = 2) -> list[Fold]:
    """Every maximal repeat of ``min_ops`` or more ops; ops in ``keep`` (diagnosed ones) never fold."""
    kept = [e.index in keep for e in events]
    repeats = find_repeats([signature(e) for e in events], kept, min_ops)
    return [_loop_fold(events, r.start, r.period, r.length) if r.period
            else _fold(events, r.start, r.original, r.length) for r in repeats]


@dataclass(frozen=True)
class Repeat:
    """Items ``start`` to ``start + length`` repeat those from ``original`` on, signature for signature;
    ``period``: the block right before repeats (a loop), ``length // period`` times; 0 otherwise."""

    start: int
    original: int
    length: int
    period: int = 0


def find_repeats(sigs: Sequence[tuple], kept: Sequence[bool], min_ops: int = 2) -> list[Repeat]:
    """Every maximal repeat of ``min_ops`` or more items of an earlier block (by their signatures),
    left to right; an item ``kept`` never folds. The forward's ops and the backward's rows alike."""
    first_seen: dict[tuple, int] = {}
    found: list[Repeat] = []
    i = 0
    while i < len(sigs):
        j = first_seen.get(sigs[i])
        length = 0
        if j is not None:
            while i + length < len(sigs) and j + length < i and sigs[j + length] == sigs[i + length] \
                    and not kept[i + length]:
                length += 1
        if length >= min_ops and j + length == i:  # the block right before repeats: a loop, maybe many times
            length = _periodic_length(sigs, kept, i, i - j)
            found.append(Repeat(i, j, length, i - j))
            i += length
            continue
        if length >= min_ops:
            found.append(Repeat(i, j, length))
            i += length
            continue
        first_seen.setdefault(sigs[i], i)
        i += 1
    return found


def _periodic_length(sigs: Sequence[tuple], kept: Sequence[bool], i: int, period: int) -> int:
    """How many items from ``i`` on repeat the ``period`` items before them, in whole periods."""
    end = i
    while end < len(sigs) and sigs[end] == sigs[end - period] and not kept[end]:
        end += 1
    return (end - i) // period * period


def _loop_fold(events: Sequence[Event], i: int, period: int, length: int) -> Fold:
    """``the same 3 ops as #0-#2, 49 more times``: a loop's later iterations as one line."""
    block, original = tuple(events[i:i + length]), tuple(events[i - period:i])
    times = length // period
    count = _NUMBER_WORDS.get(period, str(period))
    where = f"#{original[0].index}-#{original[-1].index}"
    again = "once more" if times == 1 else f"{times} more times"
    return Fold(block, original, f"the same {count} ops as {where}, {again}", times)


def _fold(events: Sequence[Event], i: int, j: int, length: int) -> Fold:
    block, original = tuple(events[i:i + length]), tuple(events[j:j + length])
    count = _NUMBER_WORDS.get(length, str(length))
    where = f"#{original[0].index}-#{original[-1].index}"
    mine = target(events[i - 1]) if i else None
    theirs = target(events[j - 1]) if j else None
    if mine and theirs and mine != theirs:
        sentence = f"{mine}: the same {count} ops as {theirs}, {where}"
    else:
        sentence = f"the same {count} ops as {where}"
    return Fold(block, original, sentence)
