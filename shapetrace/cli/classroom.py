"""The classroom modes of ``shapetrace run`` and ``trace``: the table, step mode, predict mode, export.

The options arrive validated, as a :class:`~shapetrace.app.classroom.ClassroomRequest`; ``run`` hands the
finished trace to :func:`show_classroom`. Rich and the renderers are imported only here, inside the functions.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import typer

from shapetrace.app.oprange import ops_in_range
from shapetrace.app.textinput import read_answers
from shapetrace.cli.common import err_console, out_console, stdin_is_terminal, stdin_stream

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.app.classroom import ClassroomRequest
    from shapetrace.engine.report import Report


def show_classroom(report: Report, request: ClassroomRequest, after_event=None, doubled=None) -> None:
    """Show a run's report (plain data, whatever ran) as the request asks (table, step or predict
    mode), then write any export (``doubled``: with a backward, the same model's at 2T, for its summary).

    Raises:
        typer.Exit: with code 1 when the trace has error diagnostics (table and predict modes).
    """

    console = out_console(request.view.width)
    if request.step:
        step_or_table(report, console, request, doubled)
    elif request.predict:
        predict(report, console, request)
    else:
        from shapetrace.render.classroom import print_classroom

        print_classroom(report, console, request.view, after_event=after_event)
    if request.export:
        write_export(report, request, doubled)


def step_or_table(trace: Report, console, request: ClassroomRequest, doubled=None) -> None:
    """Step mode on a terminal (the backward's screens after the forward's, when it was traced); elsewhere
    one line on stderr and the plain table (exit 0)."""
    from shapetrace.render.classroom import print_classroom
    from shapetrace.tui.step import run_step_mode, step_mode_available

    if not step_mode_available():
        err_console().print("step mode needs an interactive terminal (stdin and stdout); "
                            "showing the plain table instead", style="yellow", highlight=False)
        print_classroom(trace, console, request.view)
        return
    code = run_step_mode(trace, console, auto=request.auto, options=request.view, doubled=doubled)
    if code:
        raise typer.Exit(code)


def predict(trace: Report, console, request: ClassroomRequest) -> None:
    """Predict mode, with answers from --answers FILE, piped stdin or the keyboard."""
    from shapetrace.tui.predict import run_predict_mode

    if request.answers and request.answers != "-":

        answers = io.StringIO("".join(line + "\n" for line in read_answers(request.answers, "--answers")))
        run_predict_mode(trace, console, answers, strides=request.predict == "strides",
                         echo=True, options=request.view)
    else:
        run_predict_mode(trace, console, stdin_stream(), strides=request.predict == "strides",
                         echo=not stdin_is_terminal(), options=request.view)


def write_export(trace: Report, request: ClassroomRequest, doubled=None) -> None:
    """Write the --export file and say where it went (on stderr, so stdout stays the table)."""
    from shapetrace.render.export import export_trace

    if request.ops is not None:
        trace = ops_in_range(trace, *request.ops)
    path = export_trace(trace, request.export, request.view, request.theme, request.force, request.static,
                        doubled)
    colours = f" ({request.theme} theme)" if path.suffix.lower() in (".svg", ".html") else ""
    if path.suffix.lower() == ".html" and not request.static:
        colours += ": open it in a browser; → / Space step through the ops, ← goes back, t switches the theme"
    err_console().print(f"exported to {path}{colours}", style="green", highlight=False)
