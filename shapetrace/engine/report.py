"""The Report: everything one traced run found, as plain data.

Renderers format a Report and ``--json`` prints its :meth:`Report.to_dict`; neither traces anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sequence

    from shapetrace.engine.diagnostic import Diagnostic
    from shapetrace.engine.events import Event
    from shapetrace.engine.hidden import HiddenCopy
    from shapetrace.engine.verdict import Verdict

SCHEMA_VERSION = 2   # 2: the ``backward`` object (``run --backward``)


@dataclass
class Report:
    """One run's events, diagnostics, hidden copies, NaN rows and notes.

    Attributes:
        dims: the named sizes the run was traced with.
        events: every recorded op, in order.
        diagnostics: findings, errors first.
        nan_rows: ``(batch, head, query)`` of each all-NaN attention row; None when values were not
            available (the meta device) or not checked.
        notes: why something was not checked or where the run went (plain sentences).
        header: title lines for the table.
        exception: what the traced code raised, if anything.
        setup: the ops that ran while a model was built (its constructor, a deep copy, ``.to()``),
            outside any module's forward: shown apart, out of the totals.
        left_out: the calls that ran without a row of their own (elementwise math, casts), by op name,
            with how many times each ran (:meth:`~shapetrace.engine.tracer.Trace.left_out`).
        contracts: the dependency contracts measured on the values that held (a broken one is a
            finding among the diagnostics).
        unmeasured: the dependency contracts that were not measured, each with why (``"heads (no heads
            axis found)"``).
        unrowed: the calls without a row, as events numbered as the row each ran before, when the run
            recorded every call (``--all``: :mod:`~shapetrace.engine.unrowed`); else empty.
        stopped: what stopped the run before its end (``"Ctrl-C"``, ``"--max-ops 50"``), None when it
            ran to its end or raised: the verdict is then ``?`` at best.
        backward: the backward pass (:class:`~shapetrace.engine.backward.rows.BackwardReport`) when the
            trace was asked for it (``trace(backward=True)``, ``run --backward``); else None.
    """

    dims: dict[str, int]
    events: list[Event]
    diagnostics: list[Diagnostic]
    nan_rows: list[tuple[int, int | None, int]] | None = None
    notes: list[str] = field(default_factory=list)
    header: dict[str, Any] = field(default_factory=dict)
    exception: BaseException | None = None
    title: str = "traced forward pass"
    left_out: dict[str, int] = field(default_factory=dict)   # ops that ran without a row: name -> times
    setup: list[Event] = field(default_factory=list)   # ops that built the model, outside the forward
    contracts: list[str] = field(default_factory=list)
    unmeasured: list[str] = field(default_factory=list)
    unrowed: list[Event] = field(default_factory=list)   # --all: the calls without a row, as events
    backward: Any = None
    stopped: str | None = None

    @property
    def verdict(self) -> Verdict:
        """The one verdict line's data: what was checked and what it adds up to."""
        from shapetrace.engine.verdict import verdict_of

        return verdict_of(self.events, self.diagnostics, self.contracts, self.unmeasured, self.exception,
                          self.stopped)

    @property
    def hidden_copies(self) -> dict[int, list[HiddenCopy]]:
        """Event index -> the copies torch made inside that matmul without being asked."""
        return {e.index: copies for e in self.events if (copies := e.hidden_copies)}

    def to_dict(self) -> dict[str, Any]:
        """The JSON schema (version 2): dims, events (each with its hidden copies), diagnostics, verdict, and
        the backward when there is one."""
        out: dict[str, Any] = {
            "version": SCHEMA_VERSION,
            "dims": dict(self.dims),
            "events": [e.to_dict() for e in self.events],
            "diagnostics": [d.to_dict() for d in self.diagnostics],
            "verdict": self.verdict.to_dict(),
        }
        if self.nan_rows:
            out["nan_rows"] = [list(r) for r in self.nan_rows]
        if self.notes:
            out["notes"] = list(self.notes)
        if self.setup:
            out["setup"] = [e.to_dict() for e in self.setup]
        if self.unrowed:   # (--all) each numbered as the row it ran before
            out["unrowed"] = [e.to_dict() for e in self.unrowed]
        if self.backward is not None:
            out["backward"] = self.backward.to_dict()
        return out

    def to_json(self, indent: int | None = 2) -> str:
        """:meth:`to_dict` as JSON text, as ``--json`` prints it."""

        return json.dumps(self.to_dict(), indent=indent)



def report_of(trace, header: dict[str, Any] | None, title: str | None, notes: Sequence[str]) -> Report:
    """The :class:`Report` of a :class:`~shapetrace.engine.tracer.Trace` (what ``Trace.report`` returns):
    its forward events apart from the setup ones (the ops that built the model), its findings, and the
    dependency contracts that held once the run ended."""
    from shapetrace.engine.readings import names_in_every_reading
    from shapetrace.engine.unrowed import unrowed_events

    extra = {} if title is None else {"title": title}
    setup = trace.setup_indices()
    events = [e for e in trace.events if e.index not in setup]   # the forward pass: what the table is about
    events = names_in_every_reading(trace, events)   # (no name that another reading of equal sizes denies)
    return Report(
        dims=dict(trace.dims), events=events, diagnostics=list(trace.diagnostics),
        setup=[e for e in trace.events if e.index in setup],
        nan_rows=trace.nan_rows, header=dict(header or {}),
        notes=[n for n in (*notes, trace._value_note) if n], exception=trace.exception,
        left_out=trace.left_out(), contracts=trace.contracts, unrowed=unrowed_events(trace),
        unmeasured=trace.unmeasured, backward=trace.backward, **extra,
    )
