"""The calls without a row of their own, as events, for a table that shows every op (``--all``).

Elementwise math whose names simply pass on (``x * 2``, ``gelu``, ``scores / s``), casts and unknown
ops are recorded without a row: the table leaves them out and its footer says so. ``--all`` must be
able to show them. While :func:`recording_every_call` is active, a new :class:`~.tracer.Trace` records
with :class:`EveryCallCapture`, which keeps, beside each such call's usual record, what a row needs
(its call site and layouts); nothing the analysis reads changes, so names, findings and the verdict are
the same with and without it. After the run, :func:`unrowed_events` turns those calls into events,
each numbered as the row it ran before (it runs between row ``index - 1`` and row ``index``), with the
axes the inference gave its results. No rule ever reads these events.
"""

from __future__ import annotations

import contextlib
import contextvars
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from shapetrace.engine.capture import (
    Capture,
    OpRecord,
    PassRecord,
    _error_text,
    _memory_verdict,
    freeze_args,
    raw_layout,
)
from shapetrace.engine.op_args import all_operands
from shapetrace.engine.sites import site

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import Event
    from shapetrace.engine.tracer import Trace

_EVERY_CALL = contextvars.ContextVar("shapetrace_every_call", default=False)


@contextlib.contextmanager
def recording_every_call() -> Iterator[None]:
    """Traces started inside this block keep what a row needs for every call (``--all``)."""
    token = _EVERY_CALL.set(True)
    try:
        yield
    finally:
        _EVERY_CALL.reset(token)


def new_capture() -> Capture:
    """The capture a new trace records with: :class:`EveryCallCapture` inside
    :func:`recording_every_call`, else the plain one."""
    return EveryCallCapture() if _EVERY_CALL.get() else Capture()


class EveryCallCapture(Capture):
    """A :class:`Capture` that also keeps, for each call recorded without a row, the full record a row
    is made from (``shadows``: record index -> :class:`OpRecord`)."""

    def __init__(self) -> None:
        super().__init__()
        self.shadows: dict[int, OpRecord] = {}

    def carry(self, op, spec, func, args, kwargs):
        before = len(self.records)
        result = super().carry(op, spec, func, args, kwargs)
        if len(self.records) > before and type(self.records[-1]) is PassRecord:
            self.shadows[len(self.records) - 1] = _shadow(self.records[-1], op, args, kwargs, result)
        return result


def _shadow(record: PassRecord, op: str, args, kwargs, result) -> OpRecord:
    """The row's record of a call recorded without one: its site, its operands' and results' layouts
    (read after the call), whether it made a new buffer; an op the registry does not know is shown by
    its own name (``op``), not as ``?``."""
    spec = record.spec if record.spec.name != "?" or not op else replace(record.spec, name=op.strip("_") or op)
    inputs = all_operands(args, kwargs)
    outs = [result] if isinstance(result, torch.Tensor) else [r for r in _flat(result) if isinstance(r, torch.Tensor)]
    device = outs[0].device if outs else inputs[0].device if inputs else torch.device("cpu")
    return OpRecord(spec, site(3), record.module, record.ins, tuple(raw_layout(t) for t in inputs),
                    record.outs, tuple(raw_layout(o) for o in outs), freeze_args(args, kwargs), None,
                    _memory_verdict(record.spec, inputs, outs), None, None, None, device)


def _flat(result) -> list:
    return list(result) if isinstance(result, (tuple, list)) else []


def unrowed_events(trace: Trace) -> list[Event]:
    """The forward calls recorded without a row, as events (empty unless the trace recorded every
    call): each numbered as the row it ran before, its results named as the inference named them."""
    capture = trace.capture
    if not isinstance(capture, EveryCallCapture):
        return []
    from shapetrace.engine.infer.rows import event_of

    state = trace._inferred()
    rows = state.event_of_record
    rowed = sorted(rows)
    found = []
    for index, record in enumerate(capture.records):
        if index in rows or index in capture.setup or type(record) not in (OpRecord, PassRecord):
            continue
        full = record if type(record) is OpRecord else capture.shadows.get(index)
        if full is None or len(full.out_raw) != len(full.outs) or len(full.in_raw) != len(full.ins):
            continue
        position = bisect_left(rowed, index)
        number = rows[rowed[position]] if position < len(rowed) else len(state.events)
        in_axes = [state.axes_of(n) for n in full.ins]
        out_axes = [state.axes_of(n) for n in full.outs]
        found.append(event_of(state, number, full.spec, full, in_axes, out_axes, {}, None))
    return found


def ending_failure(capture: Capture, rows: dict[int, int], exception: BaseException | None) -> OpRecord | None:
    """The call without a row that raised the exception ending the traced block (``q * cos`` whose
    broadcast torch refuses), when it was the last call recorded: it gets a row, where the run ended. A
    failure the code caught and went on from leaves no row."""
    if exception is None or not capture.records:
        return None
    last = len(capture.records) - 1
    record = capture.records[last]
    if type(record) is not OpRecord or record.error is None or last in rows:
        return None
    return record if record.error == _error_text(exception) else None


def add_ending_failure(inference, capture: Capture, exception: BaseException | None) -> None:
    """The row of :func:`ending_failure`'s call, if any, appended to the inference's events."""
    last = ending_failure(capture, inference.event_of_record, exception)
    if last is not None:
        inference.event_of_record[len(capture.records) - 1] = len(inference.events)
        inference.events.append(inference.failed_event(last))
