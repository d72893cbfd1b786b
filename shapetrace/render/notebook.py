"""A trace as a Jupyter display bundle: the same table, as HTML (Rich's own export) and plain text."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from rich.console import Console

from shapetrace.render.table import TraceView, trace_header

if TYPE_CHECKING:  # pragma: no cover

    from shapetrace.engine.report import Report

NOTEBOOK_WIDTH = 100


def mimebundle(trace: Report, width: int = NOTEBOOK_WIDTH) -> dict[str, str]:
    """``{"text/plain": ..., "text/html": ...}`` for IPython's display machinery."""
    console = Console(file=io.StringIO(), record=True, width=width, force_terminal=True,
                      color_system="truecolor", force_jupyter=False, legacy_windows=False)
    console.print(TraceView(trace, header=trace_header(trace)))
    html = console.export_html(inline_styles=True, clear=False, code_format="<pre style=\"font-family:"
                               "Menlo,'DejaVu Sans Mono',consolas,monospace;font-size:12px\">{code}</pre>")
    return {"text/plain": console.export_text(styles=False), "text/html": html}
