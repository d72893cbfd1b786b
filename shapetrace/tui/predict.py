"""Predict mode on the console: walk the trace, ask before each op that changes shape or layout.

Answers come from the keyboard (a wrong spelling is asked again) or from a file or
pipe, one per line (a line that cannot be read counts as wrong, so scripts stay in
step). An empty line skips the question.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from rich.console import Console
from rich.text import Text

from shapetrace.app.classroom import ViewOptions, names_for, spell_long
from shapetrace.app.predict import (
    GradQuiz,
    Quiz,
    Score,
    Verdict,
    check_shape,
    check_strides,
    parse_answer,
    stride_reason,
)
from shapetrace.app.textinput import read_line
from shapetrace.engine.formatting import fmt_named, fmt_shape
from shapetrace.engine.sentences import annotate
from shapetrace.errors import UsageError
from shapetrace.render.backward import arrived_cells, made_line, saved_summary, spelled_long
from shapetrace.render.indent import Indent
from shapetrace.render.table import (
    fact_cells,
    footer_text,
    header_texts,
    input_lines,
    join_cells,
    setup_line,
    trace_header,
)

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.backward.rows import BackwardRow
    from shapetrace.engine.events import Event
    from shapetrace.engine.report import Report


class _OutOfAnswers(Exception):
    pass


class Asker:
    """Reads one answer per question from a stream (echoing it) or the keyboard (re-asking on typos)."""

    def __init__(self, console: Console, stream: TextIO, echo: bool, interactive: bool):
        self.console, self.stream, self.echo, self.interactive = console, stream, echo, interactive

    def ask(self, prompt: str, dims) -> tuple[object | None, str]:
        """Returns (Answer or None for a skip or an unreadable line, the error message if any)."""
        while True:
            line = self._read(prompt)
            if not line.strip():
                return None, ""
            try:
                return parse_answer(line, dims), ""
            except UsageError as exc:
                if not self.interactive:
                    return None, str(exc)
                self.console.print(f"  {exc}; try again (empty line skips)", style="yellow", highlight=False)

    def _read(self, prompt: str) -> str:
        styled = Text.assemble(("  ? ", "bold cyan"), (prompt, "bold"), " › ")
        if self.interactive:
            try:
                return self.console.input(styled)
            except EOFError:
                raise _OutOfAnswers from None
        self.console.print(styled, end="")
        line = read_line(self.stream)
        if not line:
            self.console.print()
            raise _OutOfAnswers
        if self.echo:
            self.console.print(line.rstrip("\n"), highlight=False, markup=False)
        return line


def _row(e: Event, long_names) -> Text:
    cells = fact_cells(e, long_names)
    return join_cells(cells[:3] + cells[4:5], [2, 11, 28, 0])


def _context_line(console: Console, e: Event) -> None:
    """``#10 matmul  scores = q @ k_t / math.sqrt(self.d_k)  attention.py:61``"""
    console.print(Text.assemble((f"#{e.index} {e.op}", "bold magenta"), "  ", (e.code.split("  #")[0].strip(), "bold"),
                                (f"  {e.source.rsplit('/', 1)[-1]}", "dim")))


def _context(console: Console, e: Event, long_names) -> None:
    """The op asked about: its code line and every input (both operands of a matmul, named)."""
    _context_line(console, e)
    for line in input_lines(e, long_names):
        console.print(Text("   ").append_text(line))


def _verdict(console: Console, kind: str, verdict: Verdict | None, error: str, expected: str,
             why: str) -> None:
    if verdict is not None and verdict.right:
        console.print(Indent(Text.assemble(("✓ right: ", "bold green"), expected), 3))
        return
    head = "skipped" if verdict is None and not error else "✗ not quite"
    reason = error or (verdict.reason if verdict else "")
    console.print(Indent(Text.assemble((f"{head}: ", "bold red" if head != "skipped" else "yellow"),
                                       f"the {kind} {'are' if kind == 'strides' else 'is'} ", (expected, "bold"),
                                       f" — {reason}" if reason else ""), 3))   # (a wrapped line keeps the indent)
    console.print(Indent(Text(why, style="italic"), 5))


def _ask_event(asker: Asker, console: Console, e: Event, dims, strides: bool, score: Score,
               long_names, explain: str = "full") -> None:
    _context(console, e, long_names)
    o = e.output
    answer, error = asker.ask("output shape", dims)
    verdict = check_shape(answer, o) if answer else (Verdict(False) if error else None)
    score.record("shape", verdict)
    _verdict(console, "shape", verdict, error, fmt_shape(o, long_names), spell_long(annotate(e, explain), long_names))
    if strides:
        answer, error = asker.ask("output strides", dims)
        verdict = check_strides(answer, o) if answer else (Verdict(False) if error else None)
        score.record("stride", verdict)
        expected = "(" + ", ".join(map(str, o.stride)) + ")"
        _verdict(console, "strides", verdict, error, expected, stride_reason(e))


def _intro(console: Console, trace: Report, quiz: Quiz, strides: bool, grads: GradQuiz | None = None) -> None:
    for line in header_texts(trace_header(trace), console.width):
        console.print(line, highlight=False)
    if setup_line(trace):   # above the first op, as the table folds it
        console.print(Text(setup_line(trace), style="dim"), highlight=False)
    sizes = " ".join(f"{k}={v}" for k, v in trace.dims.items() if k not in ("qkv", "kv"))
    what = "output shape and strides" if strides else "output shape"
    example = "x".join(map(str, format_example(trace)))
    console.print(Text.assemble(("\npredict mode: ", "bold cyan"),
                                f"{len(quiz.asked)} questions on the {what} of each op that changes shape or "
                                f"layout{_then_grads(grads)}. Sizes: {sizes}. Write sizes like {example} or "
                                f"[{example.replace('x', ', ')}], or the axis names separated by commas; "
                                "an empty line skips.\n"))


def _then_grads(grads: GradQuiz | None) -> str:
    if grads is None or not grads.count:
        return ""
    return (f", then {grads.count} on the shape of each grad the backward sends back that differs from the grad "
            "that arrived")


def format_example(trace: Report) -> tuple[int, ...]:
    """A made-up shape for the format example that is no op's output shape nor strides in this trace."""
    taken = {tuple(e.output.shape) for e in trace.events if e.output}
    taken |= {tuple(e.output.stride) for e in trace.events if e.output}
    for candidate in ((5, 1, 7), (7, 1, 5), (5, 1, 1, 7), (11, 1, 13), (1, 1, 1, 1, 1)):
        if candidate not in taken:
            return candidate
    return (1,) * (max(len(t) for t in taken) + 1)


def run_predict_mode(trace: Report, console: Console, answers: TextIO, strides: bool = False,
                     echo: bool = False, options: ViewOptions = ViewOptions(),
                     interactive: bool | None = None) -> Score:
    """Walk the trace, asking for predictions; prints each verdict and the final score.

    Args:
        trace: the recorded forward pass.
        console: where questions and verdicts go.
        answers: the stream answers are read from (a file, a pipe or the keyboard's stdin).
        strides: also ask for the strides of each output.
        echo: print each answer read from a stream (so a transcript shows it).
        options: readability options (long names).
        interactive: ask again after a typo; defaults to ``answers.isatty()``.

    Returns:
        The score.
    """
    if interactive is None:
        interactive = bool(getattr(answers, "isatty", lambda: False)())
    quiz, grads = Quiz.of(trace), GradQuiz.of(trace.backward, trace.events)
    long_names = names_for(trace, options)
    asker = Asker(console, answers, echo, interactive)
    score = Score()
    _intro(console, trace, quiz, strides, grads)
    remaining = list(quiz.asked)
    for e in trace.events:
        if remaining and e.index == remaining[0]:
            remaining.pop(0)
            try:
                _ask_event(asker, console, e, trace.dims, strides, score, long_names, options.explain)
            except _OutOfAnswers:
                score.unanswered = len(remaining) + 1
                console.print("   (no more answers: the rest of the trace is shown without questions)",
                              style="yellow")
                remaining = []
        else:
            _shown(console, e, quiz, long_names)
    console.print()
    console.print(footer_text(trace, trace.events, setup_shown=True))
    if trace.backward is not None and trace.backward.rows:
        _walk_backward(asker, console, trace, grads, score, long_names, asking=not score.unanswered)
    console.print(Text(score.summary(), style="bold green" if score.right == score.asked else "bold"))
    return score


def _walk_backward(asker: Asker, console: Console, trace: Report, grads: GradQuiz, score: Score,
                   long_names, asking: bool) -> None:
    """The backward's rows in the order autograd ran them, asking for the grads :class:`GradQuiz` picked
    (shown with the forward's long names; answers checked against the forward's own labels). ``asking``
    False: the answers ran out in the forward, so every grad question counts as not asked."""
    backward = trace.backward
    shown = spelled_long(backward, long_names) if long_names else backward
    console.print(Text("\nthe backward, in the order autograd runs it:", style="bold cyan"))
    left = grads.count
    if not asking:
        score.unanswered += left
    for row, spelled in zip(backward.rows, shown.rows):
        if not row.arrived:
            continue
        ask = grads.asked.get(row.order, ()) if asking else ()
        _grad_row(console, spelled, grads.repeats.get(row.order), trace if ask else None)
        for i in [i for i in range(len(row.made)) if i not in ask] + list(ask):   # (the questions last)
            text = spelled.made[i]
            if asking and i in ask:
                try:
                    _ask_grad(asker, console, row.made[i], text, spelled.sentence, trace.dims, score)
                    left -= 1
                    continue
                except _OutOfAnswers:
                    console.print("   (no more answers: the rest of the backward is shown without questions)",
                                  style="yellow")
                    score.unanswered += left
                    asking = False
            console.print(made_line(text, 5))
    for line in saved_summary(backward, None, 0):
        console.print(Text(line, style="dim"), highlight=False)


def _grad_row(console: Console, row: BackwardRow, repeats: int | None, trace: Report | None) -> None:
    """``7  grad #10 matmul  [B=2, H=8, T=6, T=6]  (288, 36, 6, 1)  2.2 KiB`` (its strides left out where the line
    is too wide), under the forward op's code line when it is asked about (``trace``), or with ``(same as row
    7)`` for a row that repeats one."""
    if trace is not None:
        event = next((e for e in trace.events if e.index == row.event), None)
        if event is not None:
            _context_line(console, event)
    cells = arrived_cells(row)
    note = f"  (same as row {repeats})" if repeats is not None else ""
    line = _cells_line(cells, note)
    if line.cell_len > console.width:
        line = _cells_line(cells[:3] + cells[4:], note)
    if line.cell_len > console.width and note:   # (the note on a line of its own, never cut by the wrap)
        line = _cells_line(cells[:3] + cells[4:], "\n   " + note)
    console.print(line)


def _cells_line(cells: list[Text], note: str) -> Text:
    return Text("  ").append_text(Text("  ").join(cells)).append(note, style="dim")


def _ask_grad(asker: Asker, console: Console, g, text, sentence: str, dims, score: Score) -> None:
    """One question: the shape of the grad ``g`` sends back (``text``: the same, spelled for display)."""
    answer, error = asker.ask(f"grad shape for {g.of}", dims)
    verdict = check_shape(answer, g, noun="grad") if answer else (Verdict(False) if error else None)
    score.record("grad", verdict)
    _verdict(console, f"grad for {text.of}", verdict, error, fmt_named(text.dims, text.shape), sentence)


def _shown(console: Console, e: Event, quiz: Quiz, long_names) -> None:
    note = f"same as #{quiz.repeats[e.index]}" if e.index in quiz.repeats else ""
    row = _row(e, long_names)
    if note:
        row.append(f"  ({note})", style="dim")
    console.print(row)
