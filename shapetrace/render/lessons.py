"""Rich views for the curriculum and for one lesson with its live traced examples."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Sequence

from rich.console import Console, Group
from rich.markdown import Markdown
from rich.syntax import Syntax
from rich.text import Text
from .indent import Indent


if TYPE_CHECKING:  # pragma: no cover
    from ..exercises.content import Lesson

STATUS_MARK = {"passed": ("✓", "green"), "edited": ("~", "yellow"), "started": ("·", "cyan"),
               "": (" ", "")}


def curriculum_view(lessons: Sequence[dict[str, Any]]) -> Group:
    """Every lesson with its exercises and their status marks."""
    parts: list[Any] = []
    for lesson in lessons:
        done = sum(1 for e in lesson["exercises"] if e["status"] == "passed")
        total = len(lesson["exercises"])
        head = Text.assemble((f"{lesson['lesson']:>2}  ", "bold"), (lesson["title"], "bold"),
                             (f"  {done}/{total}", "green" if done == total and total else "dim"))
        parts.append(head)
        if lesson.get("summary"):
            parts.append(Indent(Text(lesson["summary"], style="dim"), 4))
        for e in lesson["exercises"]:
            mark, style = STATUS_MARK.get(e["status"], STATUS_MARK[""])
            parts.append(Text.assemble("    ", (mark, style), " ", (e["id"], "bold cyan"), f"  {e['title']}"))
    parts.append(Text("\n✓ passed  ~ passed, then edited (check again)  · started", style="dim"))
    parts.append(Text("read a lesson: shapetrace lesson N\nstart an exercise: shapetrace exercise start ID",
                      style="dim"))
    return Group(*parts)


def _live_block(code: str, name: str, dims: str, run: bool) -> Iterable[Any]:
    yield Syntax(code.rstrip("\n"), "python", theme="ansi_dark", background_color="default")
    if not run:
        return
    from ..exercises.live import run_example
    from .table import OpTable, diagnostic_lines, footer_text

    trace = run_example(code, name, dims)
    yield Text("traced:", style="dim")
    if trace.events:
        yield OpTable(trace.events)
        yield footer_text(trace, trace.events)
    shown = [d for d in trace.diagnostics if d.severity != "note"]
    if shown or trace.exception is None:
        yield from diagnostic_lines(shown)
    if trace.exception is not None:
        yield Text(f"raised {type(trace.exception).__name__}: {trace.exception}", style="bold red")
    yield Text("")


def print_lesson(lesson: "Lesson", console: Console, exercises: Sequence[dict[str, Any]] = (),
                 run: bool = True) -> None:
    """Print a lesson: its Markdown, and under each live example the traced table."""
    from ..exercises.live import split_live

    for n, (kind, body, dims) in enumerate(split_live(lesson.text())):
        if kind == "text":
            console.print(Markdown(body))
        else:
            for part in _live_block(body, f"lesson {lesson.number} example {n}", dims, run):
                console.print(part)
    if exercises:
        console.print(Text("\nExercises in this lesson:", style="bold"))
        for e in exercises:
            mark, style = STATUS_MARK.get(e["status"], STATUS_MARK[""])
            console.print(Text.assemble("  ", (mark, style), " ", (e["id"], "bold cyan"), f"  {e['title']}"))
        console.print(Text("start one with `shapetrace exercise start ID`", style="dim"))
