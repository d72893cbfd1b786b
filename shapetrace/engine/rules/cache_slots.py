"""A cache read back past a slot this run skipped (issue 33 item 3: where each element came from).

A static cache is a buffer written in slices and read back in slices: meta-llama's ``Attention``
writes ``cache_k[:bsz, start_pos : start_pos + seqlen] = xk`` and reads ``cache_k[:bsz, : start_pos +
seqlen]``. Which slots of the buffer this run wrote is exact from the writes' own indices (the ints of
their slices, never a size); a read that cuts the buffer along an axis and takes a slot no write of this
run reached, *after* one a write of this run reached along that axis, reads what the buffer held before:
zeros, or another sequence's keys. That is the decode step written at the wrong place (``cache_k[:bsz,
:seqlen] = xk``, ``start_pos`` forgotten: each step overwrites slot 0 and the slot read last was never
filled). Slots before every written one are not a finding: a trace that starts at a decode step reads the
prompt's slots, written before it began. Nor is a read that takes back none of the slots this run wrote along
that axis: a cache read returns the step just written with what came before it, while a read beside the writes
takes another part of the buffer (Pix2Struct's patches carry their row and column ids in features 0 and 1,
written there, and the patch is read from feature 2 on: fields of one record, not the steps of a sequence).

Only writes and reads by basic indexing of ints and slices are followed (an ``index_copy_`` by a tensor of
positions, or a write through another view, says nothing about which slots it reached: the buffer is
then not judged). The buffer is followed through the writes that made each version of it (``sources``).

Reads: the events, their frozen arguments and sources. Adds: ``cache-slot-skipped`` findings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family, write_kind
from shapetrace.engine.thawed import thaw_args

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic
    from shapetrace.engine.events import Event

Span = tuple[int, int]   # [start, stop) along one axis


def skipped_cache_slots(analysis: Analysis) -> list[Diagnostic]:
    """A finding at each slice of a written buffer that reads a slot skipped by this run's writes."""
    out = []
    for e in analysis.events:
        if e.spec.family is not Family.SLICE or not e.inputs or not e.sources or e.sources[0] is None:
            continue
        writes = _writes_behind(analysis.events, e.sources[0][0])
        read = _spans(e, e.inputs[0].shape)
        if not writes or read is None:
            continue
        found = _skipped(writes, read, e.inputs[0].shape)
        if found is not None:
            out.append(_finding(analysis, e, writes, *found))
    return out


def _writes_behind(events, index: int) -> list[tuple[Event, tuple[Span, ...]]] | None:
    """The writes that made this version of a buffer, each with the span it wrote along every axis,
    oldest first; None where one of them wrote by anything but ints and slices (or none did)."""
    found = []
    while index is not None:
        w = events[index]
        if w.spec.family is not Family.WRITE or write_kind(w.spec) != "index" or not w.inputs:
            return None
        spans = _spans(w, w.inputs[0].shape)
        if spans is None:
            return None
        found.append((w, spans))
        index = w.sources[0][0] if w.sources and w.sources[0] is not None else None
    return found[::-1] or None


def _spans(e: Event, shape) -> tuple[Span, ...] | None:
    """``target[index]``'s span along each axis of ``target`` (an int is one slot), or None for any
    index but ints and slices of step 1."""
    raw = e.raw_args
    if raw is None or len(raw[1]) < 2:
        return None
    args, _ = thaw_args((raw[1], raw[2] or ()))
    items = args[1] if isinstance(args[1], tuple) else (args[1],)
    if len(items) > len(shape):
        return None
    spans = []
    for item, n in zip(items + (slice(None),) * (len(shape) - len(items)), shape):
        if type(item) is slice and item.step in (None, 1) and all(
                v is None or isinstance(v, int) for v in (item.start, item.stop)):
            start, stop, _ = item.indices(n)
            spans.append((start, stop))
        elif isinstance(item, int) and not isinstance(item, bool):
            spans.append((item % n, item % n + 1))
        else:
            return None
    return tuple(spans)


def _skipped(writes, read: tuple[Span, ...], shape) -> tuple[int, int, int] | None:
    """``(axis, the slot skipped, a slot written before it)`` along an axis the read cuts, the written slot
    among those it reads, or None."""
    for axis, (start, stop) in enumerate(read):
        if (start, stop) == (0, shape[axis]):
            continue   # (read whole: a cache read whole is masked where it is empty)
        reached: set[int] = set()
        for _, spans in writes:
            reached.update(range(*spans[axis]))
        for slot in range(start, stop):
            before = [s for s in reached if start <= s < slot]
            if slot not in reached and before:
                return axis, slot, max(before)
    return None


def _finding(analysis: Analysis, e: Event, writes, axis: int, slot: int, written: int) -> Diagnostic:
    target = e.inputs[0]
    name = target.dims[axis] if axis < len(target.dims) and target.dims[axis] else f"axis {axis}"
    last, spans = writes[-1]
    wrote = f"{spans[axis][0]}:{spans[axis][1]}"
    return Kind.CACHE_SLOT_SKIPPED.found(e.index, (
        f"{e.op} #{e.index} reads the buffer {fmt_named(target.dims, target.shape)} up to slot {slot} along "
        f"{name} (axis {axis}), but no write of this run reached slot {slot}, while slot {written} was written "
        f"(the last write, {last.op} #{last.index}, filled slots {wrote} along it): the read takes what the buffer "
        "held before, zeros or another sequence's entries, where this step's keys or values belong."),
        "Write each step at its own positions: cache[:bsz, start_pos : start_pos + seqlen] = xk, with start_pos "
        "the number of tokens already cached.")
