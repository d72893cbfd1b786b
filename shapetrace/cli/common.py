"""What every command shares: the consoles, the error guard, JSON output and option help texts.

Importing this module must not import torch or Rich: ``shapetrace --help`` stays fast.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import typer

TRACEBACK_HELP = "Show the full Python traceback on errors (for bug reports)."
DEVICE_HELP = ("cpu (real tensors), meta (shapes and strides without data, any size) or auto "
               "(meta when real tensors would exceed --max-memory).")
ALL_HELP = "Show every op: no folding of a block that repeats an earlier one (k and v split like q)."
MAX_MEMORY_HELP = "Memory budget for real tensors with --device auto (e.g. 1GiB, 512MiB)."


def err_console():
    from rich.console import Console

    return Console(stderr=True)


def out_console(width: int | None = None):
    from rich.console import Console

    return Console(width=width) if width else Console()


@contextlib.contextmanager
def guarded(traceback: bool = False) -> Iterator[None]:
    """Turn shapetrace errors into one red message on stderr and an exit code.

    Usage errors exit 2, failed runs exit 1; ``--traceback`` re-raises.
    """
    from shapetrace.errors import ShapetraceError

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
    except Exception as exc:  # a bug in shapetrace itself: still one line, and a way to see more
        if traceback:
            raise
        report_error(f"internal error: {type(exc).__name__}: {exc} (run again with --traceback "
                     "and report it)")
        raise typer.Exit(1) from None


def report_error(message: str) -> None:
    from rich.text import Text

    err_console().print(Text.assemble(("error: ", "bold red"), message), soft_wrap=True)  # one line: the terminal wraps


def write_json(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
