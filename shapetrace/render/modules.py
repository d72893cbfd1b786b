"""The per-module summary of a whole model: ops, views, copies and computed bytes per layer-level path."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from shapetrace.app.layers import ModuleRow, module_summary
from shapetrace.engine.formatting import fmt_bytes

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import Event

HEADERS = ("module", "ops", "views", "copies", "computed")


def row_cells(row: ModuleRow) -> list[str]:
    """``h.1-11 (each)``, ops, views, ``copies (bytes)``, computed bytes."""
    path = f"{row.path} (each)" if row.each else row.path
    return [path, str(row.ops), str(row.views), f"{row.copies} ({fmt_bytes(row.copy_bytes)})",
            fmt_bytes(row.computed_bytes)]


class ModuleSummary:
    """A Rich renderable: one aligned line per module path at the layer level."""

    def __init__(self, events: Sequence[Event]):
        self.rows = module_summary(events)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        cells = [list(HEADERS)] + [row_cells(r) for r in self.rows]
        widths = [max(len(c[i]) for c in cells) for i in range(len(HEADERS))]
        for n, line in enumerate(cells):
            text = "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths)))
            yield Text(text.rstrip(), style="bold" if n == 0 else "")
