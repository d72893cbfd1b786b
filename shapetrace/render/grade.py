"""The class table of ``exercise grade``: students down, exercises across (plain cell data in, Rich out)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rich.table import Table
from rich.text import Text

MARK = {"pass": ("✓ pass", "green"), "timed out": ("⏱ timed out", "yellow"), "refused": ("refused", "magenta"),
        "unverified": ("? unverified", "yellow"), "missing": ("—", "dim")}
#: Characters of a failing verdict's first line shown in its cell.
FAIL_TEXT = 48


def cell_text(cell) -> Text:
    if cell.status == "fail":
        line = cell.first_line
        line = line if len(line) <= FAIL_TEXT else line[:FAIL_TEXT - 1] + "…"
        return Text(f"✗ {cell.verdict}: {line}", style="red")
    text, style = MARK.get(cell.status, (cell.status, ""))
    return Text(text, style=style)


def grade_table(cells: Sequence) -> Table:
    """One row per student, one column per exercise, then the student's passes."""
    students = list(dict.fromkeys(c.student for c in cells))
    exercises = list(dict.fromkeys(c.exercise for c in cells))
    by = {(c.student, c.exercise): c for c in cells}
    table = Table(title="exercise grade", show_lines=True)
    table.add_column("student", no_wrap=True)
    for ex in exercises:
        table.add_column(ex, overflow="fold")
    table.add_column("passed", justify="right")
    for s in students:
        row = [by[s, e] for e in exercises]
        table.add_row(s, *[cell_text(c) for c in row], f"{sum(c.status == 'pass' for c in row)}/{len(row)}")
    return table


def summary_line(cells: Sequence) -> str:
    counts = Counter(c.status for c in cells)
    return ", ".join(f"{n} {status}" for status, n in counts.most_common())
