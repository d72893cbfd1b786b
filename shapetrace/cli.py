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
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)

TRACEBACK_HELP = "Show the full Python traceback on errors (for bug reports)."
DEVICE_HELP = ("cpu (real tensors), meta (shapes and strides without data, any size) or auto "
               "(meta when real tensors would exceed --max-memory).")
MAX_MEMORY_HELP = "Memory budget for real tensors with --device auto (e.g. 1GiB, 512MiB)."


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


def _preset_help() -> str:
    from .presets import help_text

    return help_text()


@app.command()
def run(
    ctx: typer.Context,
    d_model: int = typer.Option(512, "--d-model", help="Model width D (d_k = D / heads)."),
    heads: int = typer.Option(8, "--heads", help="Number of attention heads H."),
    batch: int = typer.Option(2, "--batch", help="Batch size B."),
    seq_len: int = typer.Option(6, "--seq-len", help="Sequence length T."),
    seed: int = typer.Option(0, "--seed", help="Random seed for weights and input."),
    json_out: bool = typer.Option(False, "--json", help="Print the trace as JSON (schema v1) and nothing else."),
    width: Optional[int] = typer.Option(None, "--width", help="Render at this many columns."),
    compact: bool = typer.Option(False, "--compact", help="Fewer columns (no strides) for narrow or zoomed terminals."),
    explain: str = typer.Option("full", "--explain", help="Annotations: full sentences or brief symbols.",
                                metavar="full|brief"),
    long_names: bool = typer.Option(False, "--long-names", help="Spell out axes: batch, seq_len, d_model, heads, d_head."),
    export: Optional[str] = typer.Option(None, "--export", metavar="PATH",
                                         help="Also write the trace to PATH: .svg, .html, .md or .txt."),
    theme: str = typer.Option("light", "--theme", metavar="light|dark", help="Colours of an --export."),
    step: bool = typer.Option(False, "--step", help="Step through the ops one at a time (Enter/b/d/q)."),
    auto: Optional[float] = typer.Option(None, "--auto", metavar="SECONDS", help="With --step: advance by itself."),
    predict: bool = typer.Option(False, "--predict", help="Before each op that changes shape or layout, the class "
                                 "predicts its output shape; '--predict strides' asks for the strides too."),
    predict_what: Optional[str] = typer.Argument(None, hidden=True, metavar="[shape|strides]"),
    answers: Optional[str] = typer.Option(None, "--answers", metavar="FILE",
                                          help="With --predict: read the answers from FILE, one per line."),
    diagrams: bool = typer.Option(False, "--diagrams",
                                  help="Draw the memory layout under each view/transpose/contiguous/reshape."),
    diagram: Optional[int] = typer.Option(None, "--diagram", metavar="N",
                                          help="Draw the memory layout under record N only."),
    device: str = typer.Option("auto", "--device", help=DEVICE_HELP),
    max_memory: str = typer.Option("1GiB", "--max-memory", help=MAX_MEMORY_HELP),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
    causal: bool = typer.Option(False, "--causal", help="Causal mask [T, T]: no query sees later keys."),
    mask: str = typer.Option("none", "--mask", help="Key mask: none or padding (a [B, T] mask seen as [B, 1, 1, T])."),
    pad: Optional[str] = typer.Option(None, "--pad", help="Padding tokens per sequence, e.g. 0,2 (with --mask padding)."),
    pad_side: str = typer.Option("right", "--pad-side", help="Where padding sits: right or left (left + --causal gives NaN rows)."),
    kv_len: Optional[int] = typer.Option(None, "--kv-len", help="Cross-attention: keys/values from a second sequence of this length (T_k)."),
    kv_heads: Optional[int] = typer.Option(None, "--kv-heads", help="Grouped-query attention: key/value heads H_kv (1 = multi-query)."),
    impl: str = typer.Option("manual", "--impl", help="manual (the reference), einops, fused-qkv, sdpa, or torch=nn.MultiheadAttention."),
    preset: Optional[str] = typer.Option(None, "--preset", help=_preset_help()),
    broken: Optional[str] = typer.Option(None, "--break", help="Run a classic bug from the catalogue ('--break list' shows them)."),
    dropout: float = typer.Option(0.0, "--dropout", help="Attention dropout probability p (acts with --train)."),
    train: bool = typer.Option(False, "--train", help="Train mode (dropout active)."),
    safe_softmax: bool = typer.Option(False, "--safe-softmax", help="Zero fully masked rows after softmax instead of NaN."),
) -> None:
    """Trace one forward pass of multi-head self-attention and print every op."""
    with guarded(traceback):
        from .config import AttentionConfig
        from .devices import parse_memory, pick_device, reference_bytes
        from .session import trace_reference

        from .cli_classroom import ClassroomRequest, predict_mode, show_classroom

        request = ClassroomRequest.checked(width, compact, explain, long_names, export, theme, step, auto,
                                           predict_mode(predict, predict_what), answers, json_out)
        from .cli_variants import run_variants, variant_requested

        options = dict(causal=causal, mask=mask, pad=pad, pad_side=pad_side, kv_len=kv_len, kv_heads=kv_heads,
                       impl=impl, preset=preset, broken=broken, dropout=dropout, train=train,
                       safe_softmax=safe_softmax)
        if variant_requested(options):
            base = dict(d_model=d_model, heads=heads, batch=batch, seq_len=seq_len, seed=seed)
            return run_variants(ctx, base, options, json_out, request, (diagrams, diagram),
                                device, parse_memory(max_memory))
        config = AttentionConfig(d_model=d_model, heads=heads, batch=batch, seq_len=seq_len, seed=seed)
        where, note = pick_device(device, reference_bytes(config), parse_memory(max_memory))
        trace = trace_reference(config, where, note)
        if json_out:
            write_json(trace.to_json())
            return
        hook = None
        if diagrams or diagram is not None:
            from .render.diagram import run_diagram_hook

            hook = run_diagram_hook(trace, diagram, out_console(width).width)
        show_classroom(trace, request, after_event=hook)
        if any(d.severity == "error" for d in trace.diagnostics):
            raise typer.Exit(1)


def main() -> None:
    """Console-script entry point."""
    if os.environ.get("NO_COLOR") == "":
        os.environ.pop("NO_COLOR")
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
from . import cli_strides  # noqa: E402,F401
from . import cli_trace  # noqa: E402,F401
from . import cli_lessons  # noqa: E402,F401
from . import cli_compare  # noqa: E402,F401
