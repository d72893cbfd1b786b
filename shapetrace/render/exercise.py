"""Rich views for exercises: the learner's traced table, the verdict itself, lists, hints.

``trace_table`` runs in the checker's child (it has the learner's trace); everything
else renders plain verdict data in the parent and never needs torch. A verdict never
shows the reference's trace: that comes with the solution, after a pass or ``--give-up``.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.tracer import Trace



def _plain(renderable, width: int) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None, force_terminal=False,
            legacy_windows=False).print(renderable)
    return buf.getvalue().rstrip("\n")


def _code_only(code: str) -> str:
    return code.split("  #")[0].rstrip()


def trace_table(trace: Trace | None, width: int) -> str:
    """The traced table of one run as plain text ("" when nothing was traced), then what it leaves out
    and how to show it (``--all``), or, when it shows them (the run recorded every call), what its ``·``
    rows are."""
    if trace is None or not trace.events:
        return ""
    return _plain(_with_left_out(trace), width)


def _with_left_out(trace: Trace) -> Group:
    """A trace's table, then what it leaves out and that ``--all`` shows it, or, when it shows them (the
    run recorded every call), what its ``·`` rows are."""
    from shapetrace.render.table import OpTable, extras_of, left_out_sentence

    report = trace.report()
    parts: list[Any] = [OpTable(report.events, **extras_of(report, report.events))]
    left = left_out_sentence(report, shown=bool(report.unrowed))
    if left:
        parts.append(Text(left, style="dim"))
    return Group(*parts)


def verdict_view(v: dict[str, Any], file: str = "", show_tables: bool = True):
    """A renderable for a verdict dictionary (as the checker returns it)."""
    passed = v["verdict"] == "pass"
    parts: list[Any] = [Text.assemble(("✓ pass" if passed else f"✗ {v['verdict']}",
                                       "bold green" if passed else "bold red"), "  ", (v["exercise"], "bold"))]
    if v.get("case") and not passed:
        parts[0].append(f"  ({v['case']} sizes: {v['sizes']})", style="dim")
    parts.append(Text(v["summary"]))
    details: list[Any] = []
    if v.get("line"):
        name = file.rsplit("/", 1)[-1] if file else "your file"
        details.append(Text.assemble((f"your line ({name}:{v['line']}): ", "dim"),
                                     (_code_only(v.get("code", "")), "bold")))
    for line in v.get("explanation", []):
        if line != v["summary"]:
            details.append(Text(line))
    for d in v.get("diagnostics", []):
        style = {"error": "bold red", "warning": "bold yellow"}.get(d["severity"], "cyan")
        where = f" at #{d['event']}" if d.get("event") is not None else ""
        details.append(Text.assemble((f"tracer {d['severity']} {d['kind']}{where}: ", style), d["message"]))
    if details:
        parts += [Text("")] + details
    if show_tables and v.get("table") and not passed:
        parts += [Text("\nyour function, traced:", style="bold"), Text(v["table"])]
    if v.get("output"):
        more = v.get("output_total", 0) - len(v["output"])
        shown = v["output"].rstrip("\n")
        parts.append(Text("\nyour function printed:", style="dim"))
        parts.append(Text(shown + (f"\n… ({more:,} more characters not shown)" if more > 0 else "")))
    return Group(*parts)


def print_verdict(v: dict[str, Any], console: Console, file: str = "", show_tables: bool = True) -> None:
    console.print(verdict_view(v, file, show_tables))


def exercises_table(rows: Sequence[dict[str, Any]]) -> Table:
    """One row per exercise: status mark, id, title, lesson, and what kind of exercise it is. Only the
    title wraps (within its column) when the terminal is narrow."""
    table = Table.grid(padding=(0, 2))
    table.add_column(no_wrap=True)
    table.add_column(no_wrap=True, style="bold")
    table.add_column()
    table.add_column(no_wrap=True, style="dim")
    table.add_column(no_wrap=True, style="magenta")
    marks = {"passed": ("✓", "green"), "edited": ("~", "yellow"), "started": ("·", "cyan")}
    for r in rows:
        mark, style = marks.get(r.get("status", ""), (" ", ""))
        table.add_row(Text(f" {mark}", style=style), r["id"], r["title"], f"lesson {r['lesson']}",
                      "write a test" if r.get("kind") == "test" else "")
    return table


def hint_view(exercise_id: str, level: int, total: int, hint: str, why: str = ""):
    """The hint in a panel titled ``hint 2/3 · split-heads``; ``why`` (which hint, and which were
    skipped) on a line of its own above it."""
    panel = Panel(Text(hint), title=f"hint {level}/{total} · {escape(exercise_id)}", title_align="left",
                  border_style="cyan")
    return Group(Text(why, style="dim"), panel) if why else panel


def question_view(number: int, total: int, q) -> Group:
    """One quiz question: its code and what is asked."""
    from rich.syntax import Syntax

    return Group(
        Text.assemble((f"\nquestion {number}/{total}", "bold"), (f"  ·  {q.topic}  ·  {q.id}", "dim")),
        Syntax(q.code, "python", theme="ansi_dark", background_color="default"),
        Text.assemble((q.prompt, "bold"), (f"  ({q.how})", "dim")),
    )


def quiz_feedback(q, typed: str, understood: bool, right: bool, trace: Any = None) -> Group:
    """Right or wrong, the right answer, why, and the traced ops that prove it."""
    from shapetrace.exercises.answers import show_answer

    parts: list[Any] = []
    shown = show_answer(q.ask, q.answer)
    if right:
        parts.append(Text.assemble(("✓ right: ", "bold green"), shown))
    elif not understood:
        parts.append(Text.assemble(("? could not read ", "bold yellow"), repr(typed), f"; the answer is {shown}"))
    else:
        parts.append(Text.assemble(("✗ the answer is ", "bold red"), (shown, "bold"), f" (you said {typed.strip()})"))
    if q.note:
        parts.append(Text(q.note, style="italic"))
    if q.detail.get("error"):
        parts.append(Text(f"torch says: {q.detail['error']}", style="dim"))
    if trace is not None and trace.events and not right:
        parts.append(_with_left_out(trace))
        if getattr(trace, "backward", None) is not None and trace.exception is None:   # a grad question: its backward
            from shapetrace.render.backward import BackwardView

            parts.append(BackwardView(trace.backward))
    return Group(*parts)


def progress_bar(done: int, total: int, width: int = 30) -> Text:
    """``[██████░░░░] 7/16 done``"""
    filled = round(width * done / total) if total else 0
    return Text.assemble("[", ("█" * filled, "green"), ("░" * (width - filled), "dim"), f"] {done}/{total} done")


def watch_status(ex, file: str, mode: str, done: int, total: int, passed: bool, last: bool) -> Group:
    """Below the verdict in watch mode: the exercise, the progress bar, where to edit, the keys."""
    if passed:
        keys = "q: quit" if last else "n or Enter: next exercise · q: quit"
    else:
        keys = f"h: a hint · q: quit · waiting for your next save ({mode})"
    return Group(Text(""), Text.assemble((ex.id, "bold"), f" · {ex.title} (lesson {ex.lesson})"),
                 progress_bar(done, total), Text.assemble(("edit ", "dim"), (file, "cyan")),
                 Text(keys, style="bold" if passed else "dim"))
