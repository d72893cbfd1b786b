"""The classroom options of ``shapetrace run``: export, readability, step mode and predict mode.

``run`` parses the options and hands the finished trace to :func:`show_classroom`;
Rich and the renderers are imported only here, inside the functions.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

import typer

from shapetrace.app.classroom import EXPLAIN_MODES, THEMES, ViewOptions
from shapetrace.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.report import Report

PREDICT_MODES = ("shape", "strides")


@dataclass(frozen=True)
class ClassroomRequest:
    """The validated classroom options of one ``run``."""

    view: ViewOptions = ViewOptions()
    export: str | None = None
    theme: str = "light"
    step: bool = False
    auto: float | None = None
    predict: str | None = None
    answers: str | None = None
    force: bool = False
    static: bool = False
    ops: tuple[int, int] | None = None  #: --ops FIRST-LAST: export only these ops

    @classmethod
    def checked(cls, width, compact, explain, long_names, export, theme, step, auto, predict,
                answers, json_out: bool = False, all_ops: bool = False, force: bool = False,
                static: bool = False, ops: str | None = None) -> ClassroomRequest:
        """Validate the options before any tensor is traced (UsageError on bad input)."""
        if json_out and (step or predict or export):
            raise UsageError("--json prints only the JSON trace: use it without --step, --predict or --export")
        _check_choice("--explain", explain, EXPLAIN_MODES)
        _check_choice("--theme", theme, THEMES)
        from shapetrace.cli.common import check_width

        check_width(width)
        if export is not None:
            from shapetrace.app.exportpath import check_export_path

            check_export_path(export, force)
        elif force or static:
            raise UsageError(f"{'--force' if force else '--static'} only works with --export PATH")
        _check_modes(step, auto, predict, answers)
        op_range = _checked_op_range(ops, export)
        return cls(ViewOptions(width, compact, explain, long_names, fold=not all_ops), export, theme, step, auto,
                   predict, answers, force, static, op_range)


def _checked_op_range(ops: str | None, export: str | None) -> tuple[int, int] | None:
    if ops is None:
        return None
    if export is None:
        raise UsageError("--ops FIRST-LAST only works with --export PATH (a range of ops for a slide)")
    from shapetrace.app.oprange import parse_op_range

    return parse_op_range(ops)


def _check_choice(flag: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise UsageError(f"{flag} {value!r}: choose one of {', '.join(choices)}")


def _check_modes(step: bool, auto: float | None, predict: str | None, answers: str | None) -> None:
    if step and predict:
        raise UsageError("--step and --predict are separate modes: use one at a time")
    if auto is not None and not step:
        raise UsageError("--auto SECONDS only works with --step")
    if auto is not None and not auto > 0:
        raise UsageError(f"--auto {auto:g}: use a number of seconds above 0")
    if predict is not None:
        _check_choice("--predict", predict, PREDICT_MODES)
    if answers is not None and predict is None:
        raise UsageError("--answers FILE only works with --predict")
    if answers is not None and answers != "-":
        from shapetrace.app.textinput import read_answers

        read_answers(answers, "--answers")  # missing, a folder, too large, not UTF-8: answered now


def predict_mode(predict: bool, what: str | None) -> str | None:
    """``--predict`` alone means shape; ``--predict strides`` (a word after the flag) asks for strides too."""
    if what is not None and not predict:
        if what in PREDICT_MODES:
            raise UsageError(f"unexpected argument {what!r} (did you mean --predict {what}?)")
        raise UsageError(f"unexpected argument {what!r}: this command takes options only (see --help)")
    if what is not None:
        _check_choice("--predict", what, PREDICT_MODES)
    return (what or "shape") if predict else None


def show_classroom(report: Report, request: ClassroomRequest, after_event=None) -> None:
    """Show a run's report (plain data, whatever ran) as the request asks (table, step or predict
    mode), then write any export.

    Raises:
        typer.Exit: with code 1 when the trace has error diagnostics (table and predict modes).
    """
    from shapetrace.cli.common import out_console

    console = out_console(request.view.width)
    if request.step:
        step_or_table(report, console, request)
    elif request.predict:
        predict(report, console, request)
    else:
        from shapetrace.render.classroom import print_classroom

        print_classroom(report, console, request.view, after_event=after_event)
    if request.export:
        write_export(report, request)


def step_or_table(trace: Report, console, request: ClassroomRequest) -> None:
    """Step mode on a terminal; elsewhere one line on stderr and the plain table (exit 0)."""
    from shapetrace.render.classroom import print_classroom
    from shapetrace.tui.step import run_step_mode, step_mode_available

    if not step_mode_available():
        from shapetrace.cli.common import err_console

        err_console().print("step mode needs an interactive terminal (stdin and stdout); "
                            "showing the plain table instead", style="yellow", highlight=False)
        print_classroom(trace, console, request.view)
        return
    code = run_step_mode(trace, console, auto=request.auto, options=request.view)
    if code:
        raise typer.Exit(code)


def predict(trace: Report, console, request: ClassroomRequest) -> None:
    """Predict mode, with answers from --answers FILE, piped stdin or the keyboard."""
    from shapetrace.tui.predict import run_predict_mode

    if request.answers and request.answers != "-":
        import io

        from shapetrace.app.textinput import read_answers

        answers = io.StringIO("".join(line + "\n" for line in read_answers(request.answers, "--answers")))
        run_predict_mode(trace, console, answers, strides=request.predict == "strides",
                         echo=True, options=request.view)
    else:
        run_predict_mode(trace, console, sys.stdin, strides=request.predict == "strides",
                         echo=not sys.stdin.isatty(), options=request.view)


def write_export(trace: Report, request: ClassroomRequest) -> None:
    """Write the --export file and say where it went (on stderr, so stdout stays the table)."""
    from shapetrace.cli.common import err_console
    from shapetrace.render.export import export_trace

    if request.ops is not None:
        from shapetrace.app.oprange import ops_in_range

        trace = ops_in_range(trace, *request.ops)
    path = export_trace(trace, request.export, request.view, request.theme, request.force, request.static)
    colours = f" ({request.theme} theme)" if path.suffix.lower() in (".svg", ".html") else ""
    if path.suffix.lower() == ".html" and not request.static:
        colours += ": open it in a browser; → / Space step through the ops, ← goes back, t switches the theme"
    err_console().print(f"exported to {path}{colours}", style="green", highlight=False)
