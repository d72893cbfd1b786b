"""The Report: everything one traced run found, as plain data.

Renderers format a Report and ``--json`` prints its :meth:`Report.to_dict`; neither traces anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.diagnostic import Diagnostic
    from shapetrace.engine.events import Event
    from shapetrace.engine.hidden import HiddenCopy

SCHEMA_VERSION = 1


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

    @property
    def hidden_copies(self) -> dict[int, list[HiddenCopy]]:
        """Event index -> the copies torch made inside that matmul without being asked."""
        return {e.index: copies for e in self.events if (copies := e.hidden_copies)}

    def to_dict(self) -> dict[str, Any]:
        """The JSON schema (version 1): dims, events (each with its hidden copies), diagnostics."""
        out: dict[str, Any] = {
            "version": SCHEMA_VERSION,
            "dims": dict(self.dims),
            "events": [e.to_dict() for e in self.events],
            "diagnostics": [d.to_dict() for d in self.diagnostics],
        }
        if self.nan_rows:
            out["nan_rows"] = [list(r) for r in self.nan_rows]
        if self.notes:
            out["notes"] = list(self.notes)
        if self.setup:
            out["setup"] = [e.to_dict() for e in self.setup]
        return out

    def to_json(self, indent: int | None = 2) -> str:
        """:meth:`to_dict` as JSON text, as ``--json`` prints it."""

        return json.dumps(self.to_dict(), indent=indent)
