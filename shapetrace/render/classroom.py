"""The trace as shown in class: full or compact table, full or brief annotations, long names.

>>> from shapetrace.app.classroom import ViewOptions
>>> ViewOptions(compact=True).compact
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from shapetrace.app.classroom import ViewOptions, names_for
from shapetrace.app.operands import equation, is_matmul
from shapetrace.render.table import (
    OpTable,
    TraceView,
    _code_text,
    fact_cells,
    indented,
    join_cells,
    sentence,
    trace_header,
)

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.report import Report
    from shapetrace.engine.tracer import Event

COMPACT_COLUMNS = ("#", "op", "shape [names]", "memory")
_COMPACT_KEEP = (0, 1, 2, 4)  # indices into table.fact_cells


def compact_cells(e: Event, long_names=None) -> list[Text]:
    """The facts of one op without strides and contiguity: index, op, shape with names, memory."""
    cells = fact_cells(e, long_names)
    return [cells[i] for i in _COMPACT_KEEP]


class CompactTable:
    """Fewer columns for narrow or zoomed terminals: ``# op shape memory``, then code and annotation."""

    def __init__(self, events: Sequence[Event], long_names=None, explain: str = "full", after_event=None):
        self.events = list(events)
        self.long_names = long_names
        self.explain = explain
        self.after_event = after_event

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        rows = [compact_cells(e, self.long_names) for e in self.events]
        widths = [max([len(c)] + [r[i].cell_len for r in rows]) for i, c in enumerate(COMPACT_COLUMNS)]
        indent = widths[0] + 2
        yield join_cells([Text(c, style="bold") for c in COMPACT_COLUMNS], widths)
        yield Text("─" * min(width, sum(widths) + 2 * (len(widths) - 1)), style="dim")
        for e, cells in zip(self.events, rows):
            yield join_cells(cells, widths)
            code = Text(" " * indent)
            code.append_text(_code_text(e.code, max(10, width - indent - 1)))
            yield code
            if is_matmul(e):
                yield from indented(Text(equation(e), style="bold"), indent, width)
            yield from indented(Text(sentence(e, self.explain), style="italic"), indent, width)
            extra = self.after_event(e) if self.after_event else None
            if extra is not None:
                yield extra


def op_table(events: Sequence[Event], options: ViewOptions, long_names=None, after_event=None,
             diagnostics=()):
    """The full :class:`OpTable` or the :class:`CompactTable`, as the options ask."""
    if options.compact:
        return OpTable(events, long_names, explain=options.explain, after_event=after_event,
                       fold=options.fold, diagnostics=diagnostics, compact=True)
    return OpTable(events, long_names, explain=options.explain, after_event=after_event,
                   fold=options.fold, diagnostics=diagnostics)


class ClassroomView(TraceView):
    """Header, table, footer and diagnostics of a trace, shaped by :class:`ViewOptions`."""

    def __init__(self, trace: Report, options: ViewOptions = ViewOptions(), after_event=None):
        table = op_table(trace.events, options, names_for(trace, options), after_event, trace.diagnostics)
        super().__init__(trace, header=trace_header(trace), after_event=after_event, table=table)


def print_classroom(trace: Report, console: Console, options: ViewOptions = ViewOptions(),
                    after_event=None) -> None:
    """Print a trace the way ``shapetrace run`` shows it with the readability options."""
    console.print(ClassroomView(trace, options, after_event))

