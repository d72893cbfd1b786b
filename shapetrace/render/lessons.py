"""Rich views for the curriculum and for one lesson with its live traced examples."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.markdown import Markdown
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from shapetrace.render.indent import Indent

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.app.lessons import LessonBlock

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
        if lesson["exercises"]:
            parts.append(Indent(_exercise_rows(lesson["exercises"]), 4))
    parts.append(Text("\n✓ passed  ~ passed, then edited (check again)  · started", style="dim"))
    parts.append(Text("read a lesson: shapetrace lesson N\nstart an exercise: shapetrace exercise start ID",
                      style="dim"))
    return Group(*parts)


def _exercise_rows(exercises: Sequence[dict[str, Any]]) -> Table:
    """Mark, id and kind in columns that never wrap; the title wraps within its own column, so a long
    title goes on under itself, not at the left margin."""
    table = Table.grid(padding=(0, 2))
    table.add_column(no_wrap=True)
    table.add_column()
    for e in exercises:
        mark, style = STATUS_MARK.get(e["status"], STATUS_MARK[""])
        kind = ("  (write a test)", "magenta") if e.get("kind") == "test" else ""
        table.add_row(Text.assemble((mark, style), " ", (e["id"], "bold cyan"), kind), e["title"])
    return table


def live_block(block: LessonBlock) -> Iterable[Any]:
    """A live example: its code (indented, a blank line either side, so it stands apart from the prose
    without colour too), then its traced table and any findings, without the run's bookkeeping.

    A ``question`` shows the code and asks for the shape; an example with ``predict`` asks first and
    answers under its table; a bug example says so above its code, and says it when the trace did not
    show what it is there for."""
    yield from live_code(block)
    yield from live_traced(block)


def live_code(block: LessonBlock) -> Iterable[Any]:
    """What a live example shows before its trace: the question or warning, then its code."""
    if block.predict or block.expect:
        yield Text("")
    if block.predict:   # (Indent: a question that wraps leaves no trailing space)
        yield Indent(Text.assemble(("predict: ", "bold magenta"), "what is the shape of ", (block.predict, "bold"),
                                   "? Work it out before the trace is shown."))
    if block.answer_first and block.answer is not None:
        yield Indent(answer_line(block))
    if block.expect:
        yield Text.assemble(("a bug, on purpose: ", "bold red"), expected_words(block.expect))
    yield Text("")
    yield Indent(Syntax(block.body.rstrip("\n"), "python", theme="ansi_dark", background_color="default"), 4)
    yield Text("")


def live_traced(block: LessonBlock) -> Iterable[Any]:
    """What a live example shows under its code: its traced table, its findings and its answer."""
    if block.trace is None:
        return
    yield from traced_parts(block)
    if block.predict and block.answer is not None and not block.answer_first:
        yield Indent(answer_line(block))
    if block.expect_met is False:
        yield Text(f"shapetrace did not show the {block.expect} this example is meant to show: please "
                   "report it", style="bold red")
    yield Text("")


def expected_words(expect: str) -> str:
    """What a bug example is there to show, in words."""
    if expect == "raises":
        return "torch refuses it: its message is under the table"
    return f"watch for the {expect} error under the table"


def traced_parts(block: LessonBlock) -> Iterable[Any]:
    """The table of a traced example (with the memory diagram under op ``diagram``), what it leaves out
    and how to show it (the block's ``show_all``), its findings and its error."""
    from shapetrace.render.diagram import diagram_hook
    from shapetrace.render.table import OpTable, diagnostic_lines, extras_of, left_out_sentence

    trace = block.trace
    # the example's number, as its rows cite it (<lesson 1 example 2>:3)
    yield Text("traced:" if block.number is None else f"example {block.number}, traced:", style="dim")
    report = trace.report()
    if trace.events:
        hook = diagram_hook(trace, block.diagram) if block.diagram is not None else None
        yield OpTable(trace.events, after_event=hook, **extras_of(report, report.events))
    left = left_out_sentence(report, block.show_all, shown=bool(report.unrowed))
    if left:
        yield Indent(Text(left, style="dim"))
    shown = [d for d in trace.diagnostics if d.severity != "note"]
    if shown:
        yield from diagnostic_lines(shown)
    if trace.exception is not None:
        yield Indent(Text(f"raised {type(trace.exception).__name__}: {trace.exception}", style="bold red"))
    if trace.backward is not None and trace.exception is None:   # traced with ``backward``: under its table
        from shapetrace.render.backward import BackwardView

        yield Text("")
        yield BackwardView(trace.backward)


def answer_line(block: LessonBlock) -> Text:
    """``answer: scores is [1, 2, 1, 5], named [B=1, H=2, T_new=1, T+1=5]``."""
    shape = "[" + ", ".join(map(str, block.answer or ())) + "]"
    line = Text.assemble(("answer: ", "bold magenta"), (block.predict or "", "bold"), f" is {shape}")
    if block.answer_named and block.answer_named != shape:
        line.append(f", named {block.answer_named}")
    return line


def block_units(blocks: Sequence[LessonBlock]) -> list[list[Any]]:
    """The renderables of a run of lesson blocks, in the units a screen keeps together: a text block's
    prose; a live example's code (with its question or warning); its trace (the table with its findings,
    errors and answer: a finding is never shown apart from the table it explains)."""
    units: list[list[Any]] = []
    for block in blocks:
        if block.kind == "text":  # Rich pads prose to the full width: Indent trims each line
            units.append([Indent(Markdown(block.body))])
        else:
            units += [unit for unit in (list(live_code(block)), list(live_traced(block))) if unit]
    return units


def block_parts(blocks: Sequence[LessonBlock]) -> list[Any]:
    """The renderables of a run of lesson blocks."""
    return [part for unit in block_units(blocks) for part in unit]


def print_lesson(blocks: Sequence[LessonBlock], console: Console,
                 exercises: Sequence[dict[str, Any]] = ()) -> None:
    """Print a lesson's blocks (Markdown, and under each live example the traced table)."""
    for part in block_parts(blocks):
        console.print(part)
    if exercises:
        console.print(Text("\nExercises in this lesson:", style="bold"))
        wide = max(len(e["id"]) for e in exercises)
        for e in exercises:  # titles in one column
            mark, style = STATUS_MARK.get(e["status"], STATUS_MARK[""])
            console.print(Text.assemble("  ", (mark, style), " ", (e["id"].ljust(wide), "bold cyan"),
                                        f"  {e['title']}"))
        console.print(Text("start one with `shapetrace exercise start ID`", style="dim"))
