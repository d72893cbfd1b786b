"""The Typer app: every command and command group is wired here, in one place.

Each command lives in its own module (``run.py``, ``strides.py``, ``trace.py``, ``lessons.py``,
``exercise.py``, ``compare.py``); this module adds them to the app in the order ``--help`` lists them.
Importing it must not import torch: ``shapetrace --help`` and the lesson lists stay fast, and every
command imports the engine inside its body.
"""

from __future__ import annotations

import os
import sys

import typer
from typer._click import exceptions as click_errors

from shapetrace.cli import common, compare, exercise, lessons, live, run, strides, trace
from shapetrace.cli.common import report_error
from shapetrace.cli.terminal import output_refused, prepare_streams, reader_gone

app = typer.Typer(
    name="shapetrace",
    help="See every view, transpose and matmul of multi-head attention: shapes, named axes, "
         "strides, views and copies.",
    epilog="Start here: `shapetrace run` traces a multi-head attention forward pass op by op; "
           "`shapetrace lessons` lists the lessons and exercises; `shapetrace trace your_script.py` "
           "traces your own code.",
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
        line = f"shapetrace {installed_version('shapetrace')}"
    except PackageNotFoundError:  # run from a checkout that was never installed
        line = "shapetrace (not installed: pip install -e .)"
    try:
        typer.echo(line)
    except BrokenPipeError:   # (Typer would end a broken pipe with exit 1, as a failed run)
        reader_gone()
    raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit.", is_eager=True,
                                 callback=_print_version),
) -> None:
    """shapetrace: multi-head attention, op by op."""


app.command(cls=run.RunCommand)(run.run)
app.command()(strides.strides)
app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(trace.trace)
app.add_typer(exercise.exercise_app, name="exercise")
app.command()(lessons.lessons)
app.command(cls=common.NegativeNumbers)(lessons.lesson)
app.command()(lessons.quiz)
app.command()(compare.compare)
app.command()(live.live)


#: The longest single argument accepted: longer ones (a 4,500-digit size) get one line, not a panel
#: that repeats them.
MAX_ARG_CHARS = 4096


def _check_argument_lengths(argv: list[str]) -> None:
    for arg in argv:
        if len(arg) > MAX_ARG_CHARS:
            report_error(f"an argument of {len(arg)} characters is too long (at most {MAX_ARG_CHARS}): "
                         f"{arg[:24]}…")
            raise SystemExit(2)


def main() -> None:
    """Console-script entry point."""


    if os.environ.get("NO_COLOR") == "":
        os.environ.pop("NO_COLOR")
    prepare_streams()
    _check_argument_lengths(sys.argv[1:])
    common.FREEZE_AFTER_TORCH = True
    sys.exit(_run_app())


def _run_app() -> int:
    """Run the app; Typer's usage errors become the one-line ``error:`` every other error uses
    (exit 2), not a boxed panel."""


    try:
        code = app(standalone_mode=False)
    except click_errors.NoArgsIsHelpError as exc:
        print(exc.ctx.get_help())
        return 2
    except click_errors.UsageError as exc:
        report_error(_usage_line(exc))
        return 2
    except click_errors.ClickException as exc:
        report_error(exc.format_message())
        return exc.exit_code
    except getattr(click_errors, "Abort", ()):   # (not in every Typer's vendored click)
        return 130
    except BrokenPipeError:   # (outside a command's guard: --version piped into `head -c 1`)
        reader_gone()
        return 0
    except OSError as exc:   # (outside a command's guard: --help or --version into /dev/full)
        refused = output_refused(exc)
        if refused is None:
            raise
        report_error(refused)
        return 1
    return code if isinstance(code, int) else 0


def _usage_line(exc) -> str:
    """``No such option: --nope (Possible options: --force)`` with where to look, in one line."""
    message = " ".join(exc.format_message().split()).rstrip(".")
    path = exc.ctx.command_path.replace("python -m shapetrace", "shapetrace") if exc.ctx else _command_path()
    path = "shapetrace" + path.split("shapetrace", 1)[1] if "shapetrace" in path else path
    return f"{message[:1].lower()}{message[1:]} (see {path} --help)"


def _command_path() -> str:
    """``shapetrace exercise list`` from the command line, for an error click raised without its context
    (an option given no value: ``exercise list --state-dir``): the leading words that name commands."""
    import typer.main

    command, words = typer.main.get_command(app), ["shapetrace"]
    for arg in sys.argv[1:]:
        sub = getattr(command, "commands", {}).get(arg)
        if sub is None:
            break
        command = sub
        words.append(arg)
    return " ".join(words)
