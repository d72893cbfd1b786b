"""The trace as shown in class: full or compact table, full or brief annotations, long names.

>>> from shapetrace.app.classroom import ViewOptions
>>> ViewOptions(compact=True).compact
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console

from shapetrace.app.classroom import ViewOptions, names_for
from shapetrace.render.table import (
    OpTable,
    TraceView,
    extras_of,
    header_of,
    trace_header,
)

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import Event
    from shapetrace.engine.report import Report


def op_table(events: Sequence[Event], options: ViewOptions, long_names=None, after_event=None,
             diagnostics=(), steps=(), extras=None):
    """The :class:`OpTable`, full or compact (no strides, no layout column), as the options ask
    (``steps``: where each step of a decode run begins; ``extras``: its setup and unnumbered rows,
    :func:`~shapetrace.render.table.extras_of`)."""
    return OpTable(events, long_names, explain=options.explain, after_event=after_event,
                   fold=options.fold, diagnostics=diagnostics, steps=steps, compact=options.compact,
                   **(extras or {}))


class ClassroomView(TraceView):
    """Header, table, footer and diagnostics of a trace, shaped by :class:`ViewOptions`."""

    def __init__(self, trace: Report, options: ViewOptions = ViewOptions(), after_event=None):
        table = op_table(trace.events, options, names_for(trace, options), after_event, trace.diagnostics,
                         header_of(trace).get("steps", ()), extras_of(trace, trace.events))
        super().__init__(trace, header=trace_header(trace), after_event=after_event, table=table)


def print_classroom(trace: Report, console: Console, options: ViewOptions = ViewOptions(),
                    after_event=None) -> None:
    """Print a trace the way ``shapetrace run`` shows it with the readability options."""
    console.print(ClassroomView(trace, options, after_event))

