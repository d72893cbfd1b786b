"""What every command shares: the consoles, the error guard, JSON output and option help texts.

Importing this module must not import torch or Rich: ``shapetrace --help`` stays fast.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
from collections.abc import Iterator

import typer
from typer._click.types import ParamType
from typer.core import TyperCommand

from shapetrace.app.classroom import MAX_WIDTH, MIN_WIDTH, ClassroomRequest, check_width
from shapetrace.app.exportpath import FORMATS, check_name_lengths
from shapetrace.attention.config import shown
from shapetrace.engine.faults import STRICT
from shapetrace.errors import ShapetraceError, UsageError

TRACEBACK_HELP = "Show the full Python traceback on errors (for bug reports)."
DEVICE_HELP = ("cpu (real tensors), cuda (real tensors on the GPU), meta (shapes and strides without data, "
               "any size) or auto (meta when real tensors would exceed --max-memory, else cuda when a GPU is "
               "available and the run fits, else cpu).")
ALL_HELP = ("Show every op: no folding of a block that repeats an earlier one (k and v split like q), the setup "
            "section open, and the elementwise math a table leaves out (rows marked ·).")
MAX_MEMORY_HELP = "Memory budget for real tensors with --device auto (e.g. 1GiB, 512MiB)."


#: True in a real ``shapetrace`` process (set by :func:`shapetrace.cli.app.main`), False under a test runner.
FREEZE_AFTER_TORCH = False


def import_torch() -> None:
    """Import torch; in a real ``shapetrace`` process, then hand every object alive to ``gc.freeze()``.

    ``import torch`` leaves about 170,000 objects that live until exit. Without the freeze, the next
    full collection of Python's cyclic garbage collector walks them all: measured 0.1-0.26 s, one
    collection that fell in the middle of ``shapetrace run`` (about half of its cost over ``import torch``).
    Frozen objects are never scanned; everything created afterwards (a traced script's objects
    included) is collected as usual. Only once per process, and not in a test process, where earlier
    tests' garbage would be frozen too.
    """
    global FREEZE_AFTER_TORCH
    import torch  # noqa: F401

    if FREEZE_AFTER_TORCH:
        import gc

        FREEZE_AFTER_TORCH = False
        gc.freeze()


def _usage_callback(check):
    """A Typer callback that runs ``check`` while the options are parsed, before any command body
    (so before torch is imported), and answers a bad value with one line and exit 2."""
    def callback(value):
        try:
            return check(value)
        except UsageError as exc:
            report_error(str(exc))
            raise typer.Exit(2) from None
    return callback


usage_callback = _usage_callback


class Given(ParamType):
    """An option's value as typed, refused when it is empty or blank: ``--dims "$DIMS"`` with the
    variable unset is a mistake, not "no dims". Checked while the options are parsed (before any command
    body, so before torch and before a script runs); ``what``: what the option wants, said in the
    message. Options whose empty value has a message of its own (``--preset``, ``--impls``, ``--host``)
    keep it."""

    name = "text"

    def __init__(self, what: str) -> None:
        self.what = what

    def get_metavar(self, param, ctx) -> str:
        return self.name.upper()

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value.strip():
            flag = max(param.opts, key=len) if param is not None else "the path"
            report_error(f"{flag} {value!r} is empty: give {self.what}")
            raise typer.Exit(2)
        return value


class PathText(Given):
    """A path option's value: typer reads ``''`` as ``Path('')``, which is ``Path('.')``, so
    ``--state-dir ''`` worked in the current folder and an error showed ``.``. Every path option takes
    this type."""

    name = "path"


class NegativeNumbers(TyperCommand):
    """A command whose arguments may be negative numbers: ``lesson -1`` gives the argument -1 (and the
    lesson-number message), not "no such option: -1". As argparse does: a word that is a number and no
    option's name is a value; every other word that starts with ``-`` is still an option."""

    def make_parser(self, ctx):
        parser = super().make_parser(ctx)
        read_option = parser._process_opts

        def read(arg: str, state) -> None:
            if _NUMBER.fullmatch(arg) and arg not in parser._short_opt and arg not in parser._long_opt:
                state.largs.append(arg)
            else:
                read_option(arg, state)

        parser._process_opts = read
        return parser


_NUMBER = re.compile(r"-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def path_option(default, *names: str, what: str, **settings):
    """A ``typer.Option`` for a path (:class:`PathText`): ``what`` says what it wants."""
    return typer.Option(default, *names, click_type=PathText(what), **settings)


def _option(default, *names: str, panel: str | None = None, **settings):
    """A ``typer.Option`` written as a parameter's default (``width: int | None = width_option()``), or,
    given a help ``panel``, one for ``Annotated`` (``width: Annotated[int | None, width_option(panel="Output")]
    = None``), whose default follows the ``=`` (typer refuses one inside ``Annotated``)."""
    if panel is None:
        return typer.Option(default, *names, **settings)
    return typer.Option(*names, rich_help_panel=panel, **settings)


def width_option(panel: str | None = None):
    """``--width``, checked at parse time (40 to 1000 columns)."""
    return _option(None, "--width", panel=panel, help=f"Render at this many columns ({MIN_WIDTH} to {MAX_WIDTH}).",
                   callback=_usage_callback(check_width))


def check_seed(seed: int | None) -> int | None:
    """A seed torch accepts: 0 to 2**64 - 1."""

    if seed is not None and not 0 <= seed < 2**64:
        raise UsageError(f"--seed {shown(seed)}: use a whole number from 0 to 2**64 - 1")
    return seed


def seed_option(help: str, default: int | None = None, panel: str | None = None):
    """``--seed``, checked at parse time against what torch.manual_seed accepts."""
    return _option(default, "--seed", panel=panel, help=help, callback=_usage_callback(check_seed))


def check_workspace(path):
    """``--workspace`` must be a folder (or not exist yet: it is created when needed, so the nearest
    folder that exists must be a folder, not a file like ``/dev/null``); names the system can hold."""

    if path is None:
        return path
    check_name_lengths("--workspace", path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"--workspace {path} is a file; give a folder for your exercise files")
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise UsageError(f"--workspace {path}: {parent} is a file, so no folder can be made under it")
    return path


STATE_DIR_HELP = ("Folder of your progress file progress.json (default: $SHAPETRACE_STATE_DIR, else "
                  "~/.local/state/shapetrace). One progress for every folder you work in.")


def check_state_dir(path):
    """``--state-dir``: a folder (or one that can be made); it is where progress.json is read and
    written, for this command (it sets SHAPETRACE_STATE_DIR, which the progress module reads)."""

    if path is None:
        return path
    check_name_lengths("--state-dir", path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"--state-dir {path} is a file; give a folder for your progress")
    os.environ["SHAPETRACE_STATE_DIR"] = os.path.abspath(path)
    return path


def state_dir_option():
    """``--state-dir``, on every command that reads or writes progress."""
    return path_option(None, "--state-dir", what="a folder for your progress", help=STATE_DIR_HELP,
                       callback=_usage_callback(check_state_dir))


def workspace_option(help: str):
    """``--workspace``, checked at parse time."""
    return path_option(None, "--workspace", what="a folder for your exercise files", help=help,
                       callback=_usage_callback(check_workspace))


def check_time_limit(seconds: float) -> float:
    """``--time-limit``: a finite number of seconds from 0.1 to 3600 (nan and inf are refused)."""


    if not (math.isfinite(seconds) and 0.1 <= seconds <= 3600):
        raise UsageError(f"--time-limit {seconds}: use a number of seconds from 0.1 to 3600")
    return seconds


def time_limit_option():
    """``--time-limit``, checked at parse time."""
    return typer.Option(10.0, "--time-limit", help="Seconds your function may run (0.1 to 3600).",
                        callback=_usage_callback(check_time_limit))


#: What --pad wants (said when it is given empty).
PAD_WHAT = "the padding tokens of each sequence, e.g. 0,2"
#: What ``--export`` wants (said when it is given empty).
EXPORT_WHAT = f"a file name ending in {', '.join(FORMATS[:-1])} or {FORMATS[-1]}"


def export_option(panel: str | None = None):
    """``--export PATH``: the formats an export can take."""
    return _option(ClassroomRequest.export, "--export", panel=panel, metavar="PATH",
                   click_type=PathText(EXPORT_WHAT),
                   help="Also write the trace to PATH: .html (an interactive page: arrow keys step through "
                   "the ops), .svg (static, for slides), .md or .txt.")


def theme_option(panel: str | None = None):
    return _option(ClassroomRequest.theme, "--theme", panel=panel, metavar="light|dark",
                   help="Colours of an --export.")


def force_option(panel: str | None = None):
    return _option(ClassroomRequest.force, "--force", panel=panel, help="Let --export replace an existing file.")


def static_option(panel: str | None = None):
    return _option(ClassroomRequest.static, "--static", panel=panel, help="With --export PATH.html: the table as "
                   "printed (for slides, like .svg) instead of the interactive page.")


def err_console():
    from rich.console import Console

    return Console(stderr=True)


def out_console(width: int | None = None):
    """The console commands print to. Piped or redirected, every line is written without the spaces
    Rich pads it with (in a terminal they are invisible, and live screens rely on them)."""
    from rich.console import Console

    file = None if sys.stdout.isatty() else TrimmedLines(sys.stdout)
    return Console(width=width, file=file) if width else Console(file=file)


class TrimmedLines:
    """A text stream that drops the spaces at the end of each line it passes on (before the newline,
    and before any colour codes that close the line)."""

    _TAIL = re.compile(r" +((?:\x1b\[[0-9;]*m)*)\n")

    def __init__(self, stream) -> None:
        self.stream, self.pending = stream, ""

    def write(self, text: str) -> int:
        head, newline, self.pending = (self.pending + text).rpartition("\n")
        if newline:
            self.stream.write(self._TAIL.sub(r"\1\n", head + newline))
        return len(text)

    def flush(self) -> None:
        if self.pending:
            self.stream.write(self.pending)
            self.pending = ""
        self.stream.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self.stream, "encoding", "utf-8")


@contextlib.contextmanager
def guarded(traceback: bool = False) -> Iterator[None]:
    """Turn shapetrace errors into one red message on stderr and an exit code.

    Usage errors exit 2, failed runs exit 1; ``--traceback`` re-raises.
    """

    if traceback:   # a fault of the inference or of a check raises too, rather than become a note
        os.environ[STRICT] = "1"
    try:
        yield
    except typer.Exit:
        raise
    except ShapetraceError as exc:
        if traceback:
            raise
        report_error(str(exc))
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except BrokenPipeError:   # the reader of our output went away (`| head -1`): it has what it wanted
        from shapetrace.cli.terminal import reader_gone

        reader_gone()
        raise typer.Exit(0) from None
    except OSError as exc:  # the system refused a file shapetrace reads or writes: say which, in one line
        from shapetrace.cli.terminal import output_refused

        refused = None if traceback else output_refused(exc)
        if refused:
            report_error(refused)
            raise typer.Exit(1) from None
        if traceback or exc.filename is None:
            if traceback:
                raise
            _internal_error(exc)
        report_error(f"{exc.filename}: {exc.strerror or exc}")
        raise typer.Exit(1) from None
    except Exception as exc:  # a bug in shapetrace itself: still one line, and a way to see more
        if traceback:
            raise
        _internal_error(exc)


def _internal_error(exc: BaseException) -> None:
    from shapetrace.engine.verdict import exception_message

    report_error(f"internal error: {type(exc).__name__}: {exception_message(exc)} (run again with --traceback "
                 "and report it)")
    raise typer.Exit(1) from None


def report_error(message: str) -> None:
    """``error: MESSAGE`` on stderr, in one line (the terminal wraps it). A stderr that refuses it
    (``2>/dev/full``) loses the line but not the exit code that follows: the refusing device is swapped for
    /dev/null under the same descriptor, so what is left in stderr's buffer cannot fail the interpreter's
    last flush either (without ``PYTHONUNBUFFERED`` that flush failed and made the exit code 120)."""
    from rich.text import Text

    try:
        err_console().print(Text.assemble(("error: ", "bold red"), one_line(message)), soft_wrap=True)
    except OSError:
        _stderr_to_null()


def _stderr_to_null() -> None:
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stderr.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


def one_line(message: str) -> str:
    """``message`` with its control characters written as escapes (a value given with a newline or an
    escape sequence, ``--export $'a\\nb'``, is shown as typed, on the error's one line)."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], message)


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def write_json(text: str) -> None:
    """Print JSON ``text`` on standard output, with its newline: the one way every command prints JSON
    (the text itself is built elsewhere: Report.to_json, a run's to_json, json.dumps)."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def stdin_stream():
    """``sys.stdin``, or an empty stream when the process has none (started with stdin closed,
    ``<&-``): reading it then ends at once, as at the end of a file."""
    import io

    return sys.stdin if sys.stdin is not None else io.StringIO("")


def stdin_is_terminal() -> bool:
    """Is stdin a terminal? False when it is closed or missing."""
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False
