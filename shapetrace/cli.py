"""The command line: parse, call the engine, call a renderer, map errors to exit codes.

Importing this module must not import torch: ``shapetrace --help`` and the
lesson lists stay fast. Every command imports the engine inside its body.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Iterator, Optional

import typer

app = typer.Typer(
    name="shapetrace",
    help="See every view, transpose and matmul of multi-head attention: shapes, named axes, "
         "strides, views and copies.",
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)

TRACEBACK_HELP = "Show the full Python traceback on errors (for bug reports)."


def err_console():
    from rich.console import Console

    return Console(stderr=True)


def out_console(width: Optional[int] = None):
    from rich.console import Console

    return Console(width=width) if width else Console()


@contextlib.contextmanager
def guarded(traceback: bool = False) -> Iterator[None]:
    """Turn shapetrace errors into one red message on stderr and an exit code.

    Usage errors exit 2, failed runs exit 1; ``--traceback`` re-raises.
    """
    from .errors import ShapetraceError

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

    err_console().print(Text.assemble(("error: ", "bold red"), message))


def write_json(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    """shapetrace: multi-head attention, op by op."""
    if version:
        from . import __version__

        typer.echo(f"shapetrace {__version__}")
        raise typer.Exit(0)


@app.command()
def run(
    d_model: int = typer.Option(512, "--d-model", help="Model width D (d_k = D / heads)."),
    heads: int = typer.Option(8, "--heads", help="Number of attention heads H."),
    batch: int = typer.Option(2, "--batch", help="Batch size B."),
    seq_len: int = typer.Option(6, "--seq-len", help="Sequence length T."),
    seed: int = typer.Option(0, "--seed", help="Random seed for weights and input."),
    json_out: bool = typer.Option(False, "--json", help="Print the trace as JSON (schema v1) and nothing else."),
    width: Optional[int] = typer.Option(None, "--width", help="Render at this many columns."),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """Trace one forward pass of multi-head self-attention and print every op."""
    with guarded(traceback):
        from .config import AttentionConfig
        from .session import trace_reference

        config = AttentionConfig(d_model=d_model, heads=heads, batch=batch, seq_len=seq_len, seed=seed)
        trace = trace_reference(config)
        if json_out:
            write_json(trace.to_json())
            return
        from .render.table import print_trace

        print_trace(trace, out_console(width))
        if any(d.severity == "error" for d in trace.diagnostics):
            raise typer.Exit(1)


def main() -> None:
    """Console-script entry point."""
    if os.environ.get("NO_COLOR") == "":
        os.environ.pop("NO_COLOR")
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
from . import cli_lessons  # noqa: E402,F401
