"""The Typer app: every command and command group is wired here, in one place.

Each command lives in its own module (``run.py``, ``strides.py``, ``trace.py``, ``lessons.py``,
``exercise.py``, ``compare.py``); this module adds them to the app in the order ``--help`` lists them.
Importing it must not import torch: ``shapetrace --help`` and the lesson lists stay fast, and every
command imports the engine inside its body.
"""

from __future__ import annotations

import os

import typer

from shapetrace.cli import compare, exercise, lessons, run, strides, trace

app = typer.Typer(
    name="shapetrace",
    help="See every view, transpose and matmul of multi-head attention: shapes, named axes, "
         "strides, views and copies.",
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    """``--version``: eager, so it answers before Typer asks for a command."""
    if not value:
        return
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed_version

    try:
        typer.echo(f"shapetrace {installed_version('shapetrace')}")
    except PackageNotFoundError:  # run from a checkout that was never installed
        typer.echo("shapetrace (not installed: pip install -e .)")
    raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit.", is_eager=True,
                                 callback=_print_version),
) -> None:
    """shapetrace: multi-head attention, op by op."""


app.command()(run.run)
app.command()(strides.strides)
app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(trace.trace)
app.add_typer(exercise.exercise_app, name="exercise")
app.command()(lessons.lessons)
app.command()(lessons.lesson)
app.command()(lessons.quiz)
app.command()(compare.compare)


#: The longest single argument accepted: longer ones (a 4,500-digit size) get one line, not a panel
#: that repeats them.
MAX_ARG_CHARS = 4096


def _check_argument_lengths(argv: list[str]) -> None:
    for arg in argv:
        if len(arg) > MAX_ARG_CHARS:
            from shapetrace.cli.common import report_error

            report_error(f"an argument of {len(arg)} characters is too long (at most {MAX_ARG_CHARS}): "
                         f"{arg[:24]}…")
            raise SystemExit(2)


def main() -> None:
    """Console-script entry point."""
    import sys

    from shapetrace.cli import common

    if os.environ.get("NO_COLOR") == "":
        os.environ.pop("NO_COLOR")
    _check_argument_lengths(sys.argv[1:])
    common.FREEZE_AFTER_TORCH = True
    app()
