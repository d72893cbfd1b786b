"""``shapetrace strides SHAPE CHAIN``: apply a chain of tensor methods step by step and draw memory."""

from __future__ import annotations

import json

import typer

from shapetrace.cli.common import TRACEBACK_HELP, check_width, guarded, out_console, width_option, write_json

CHAIN_HELP = ("Tensor methods to apply, e.g. \"view(2, 6, 8, 64).transpose(1, 2)\". Allowed: view, reshape, "
              "transpose, permute, contiguous, expand, unsqueeze, squeeze, flatten, unflatten, narrow, select, "
              "mT and indexing [...] with ints and slices; arguments are whole numbers, + - * // %, and axis "
              "names (B, T, D, H, d_k...). Parsed with Python's ast, never evaluated.")



def strides(
    shape: str = typer.Argument(..., metavar="SHAPE", help="Start shape: 2x6x512 or 2,6,512. Above "
                                "16,777,216 elements the meta device is used (shapes and strides, no data)."),
    chain: str = typer.Argument(..., metavar="CHAIN", help=CHAIN_HELP),
    dims: str | None = typer.Option(None, "--dims", help="Axis names of SHAPE, e.g. B,T,D "
                                       "(default: B,T,D for 3 axes, B,T,H,d_k for 4)."),
    heads: int | None = typer.Option(None, "--heads", help="Number of heads H (names H and d_k when D is split)."),
    json_out: bool = typer.Option(False, "--json", help="Print each step as JSON and nothing else."),
    no_diagrams: bool = typer.Option(False, "--no-diagrams", help="Only the facts line of each step."),
    rows: int = typer.Option(4, "--rows", min=3, max=12, help="Storage strip rows per diagram."),
    width: int | None = width_option(),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """Apply a chain of view/transpose/contiguous to a fresh tensor and draw memory at each step.

    Starts from a contiguous tensor of SHAPE whose values are their own addresses, applies CHAIN
    step by step, and shows each step's named shape, strides, view or copy, and where every element
    lives. Exits 1 when a step fails (the steps before it are still shown) or an error is
    diagnosed, as run does.
    """
    with guarded(traceback):
        check_width(width)
        from shapetrace.app.strides import plan_chain  # parsed and checked before torch is imported

        plan = plan_chain(shape, chain, dims=dims, heads=heads)
        from shapetrace.app.strides import run_chain

        run = run_chain(shape, chain, plan=plan)
        if json_out:
            write_json(_json(run))
        else:
            from shapetrace.render.chain_view import ChainView

            out_console(width).print(ChainView(run, diagrams=not no_diagrams, rows=rows))
        if run.failed or any(d.severity == "error" for d in run.trace.diagnostics):
            raise typer.Exit(1)


def _json(run) -> str:
    return json.dumps(run.to_dict(), indent=2)
