"""The class table of ``exercise grade``: students down, exercises across (plain grade data in, Rich out).

Every string shown came through :func:`shapetrace.exercises.untrusted.clean`; it is still printed as
``Text`` (never as markup), so a student's ``[bold]`` is shown as typed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rich.console import Group
from rich.table import Table
from rich.text import Text

MARK = {"pass": ("✓ pass", "green"), "timed out": ("⏱ timed out", "yellow"), "refused": ("refused", "magenta"),
        "unverified": ("? unverified", "yellow"), "missing": ("—", "dim")}


def cell_text(cell) -> Text:
    """A cell: its mark; a fail with its verdict and the whole of its summary (never cut)."""
    if cell.status == "fail":
        return Text(f"✗ {cell.verdict}: {cell.detail}", style="red")
    if cell.status == "refused":
        return Text(cell.detail or "refused", style="magenta")
    text, style = MARK.get(cell.status, (cell.status, ""))
    return Text(text, style=style)


def assigned_line(result) -> str:
    """What each score is out of, and where that came from."""
    names = ", ".join(result.exercises)
    if result.assigned:
        return f"assigned (--exercises): {names}; each score is out of {len(result.exercises)}"
    return (f"assigned: not given (--exercises a,b); each score is out of the {len(result.exercises)} "
            f"exercises someone handed in: {names}")


def grade_table(result) -> Table:
    """One row per student, one column per graded exercise, then the student's passes out of them."""
    table = Table(title="exercise grade", show_lines=True)
    table.add_column("student", no_wrap=True)
    for ex in result.exercises:
        table.add_column(ex, overflow="fold")
    table.add_column("passed", justify="right", no_wrap=True)
    for s in result.students:
        row = result.row(s)
        table.add_row(Text(s), *[cell_text(c) for c in row], f"{result.passed(s)}/{len(result.exercises)}")
    return table


def strays_view(result) -> Group | None:
    """Per student, the files found but not graded and why (None when there are none)."""
    lines = []
    for s in result.students:
        for stray in result.strays.get(s, []):
            lines.append(Text.assemble((s, "bold"), ": ", (stray.file, "cyan"), f" — {stray.why}"))
    if not lines:
        return None
    return Group(Text("found but not graded:", style="bold yellow"), *lines)


def summary_line(cells: Sequence) -> str:
    counts = Counter(c.status for c in cells)
    return ", ".join(f"{n} {status}" for status, n in counts.most_common())


def grade_view(result) -> Group:
    """The whole report: what was assigned, the table, the files not graded, and the counts."""
    parts = [Text(assigned_line(result)), grade_table(result)]
    strays = strays_view(result)
    if strays is not None:
        parts.append(strays)
    parts.append(Text(summary_line(result.cells)))
    return Group(*parts)
