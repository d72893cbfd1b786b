"""``shapetrace trace SCRIPT [ARGS...]``: trace a user's own script (registered from cli.py)."""

from __future__ import annotations

import typer

from shapetrace.cli.common import (
    ALL_HELP,
    DEVICE_HELP,
    MAX_MEMORY_HELP,
    TRACEBACK_HELP,
    export_option,
    force_option,
    guarded,
    import_torch,
    out_console,
    report_error,
    static_option,
    theme_option,
    width_option,
    write_json,
)


def trace(
    script: str = typer.Argument(..., help="The Python script to run as __main__ under the tracer."),
    args: list[str] | None = typer.Argument(None, help="Arguments for the script (after -- if they "
                                                          "look like shapetrace options)."),
    dims: str | None = typer.Option(None, "--dims", help="Named sizes, e.g. B=2,T=6,D=512,H=8 (d_k = D/H "
                                                            "derived; any other names such as H_kv=2 or S=20)."),
    only: list[str] | None = typer.Option(None, "--only", help="Keep ops run under this function or "
                                                                  "method (e.g. MyAttention.forward) or in "
                                                                  "this module path (e.g. h.3.attn)."),
    layer: int | None = typer.Option(None, "--layer", metavar="N", help="Show layer N in full where "
                                     "identical layers fold (layers 1-11: the same ops as layer 0)."),
    summary: bool = typer.Option(False, "--summary", help="Print the per-module summary (ops, views, copies, "
                                 "computed bytes) under the table, also when the model has no layers."),
    include: list[str] | None = typer.Option(None, "--include", help="Keep ops written in this file or folder."),
    exclude: list[str] | None = typer.Option(None, "--exclude", help="Drop ops written in this file or folder."),
    json_out: bool = typer.Option(False, "--json", help="Print the trace as JSON (schema v1) on stdout and "
                                                        "nothing else; the script's prints go to stderr."),
    width: int | None = width_option(),
    all_ops: bool = typer.Option(False, "--all", help=ALL_HELP),
    device: str = typer.Option("auto", "--device", help=DEVICE_HELP + " With auto, the estimate comes from --dims."),
    max_memory: str = typer.Option("1GiB", "--max-memory", help=MAX_MEMORY_HELP),
    step: bool = typer.Option(False, "--step", help="Step through the ops one at a time (Enter/b/d/q)."),
    auto: float | None = typer.Option(None, "--auto", metavar="SECONDS", help="With --step: advance by itself."),
    export: str | None = export_option(),
    theme: str = theme_option(),
    force: bool = force_option(),
    static: bool = static_option(),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """Run your own script under the tracer and print every reshaping and attention op it makes."""
    with guarded(traceback):
        from shapetrace.app.script import check_script
        from shapetrace.cli.classroom import ClassroomRequest
        from shapetrace.engine.dims import parse_dims

        check_script(script)  # a missing, unreadable or broken file is answered before torch is imported
        request = ClassroomRequest.checked(width, False, "full", False, export, theme, step, auto, None, None,
                                           json_out, all_ops, force, static)
        from shapetrace.app.devices import parse_memory, pick_device
        from shapetrace.app.script import Filters, run_script, script_header
        from shapetrace.attention.memory import dims_bytes

        sizes = parse_dims(dims)
        memory = parse_memory(max_memory)
        where, note = pick_device(device, dims_bytes(sizes), memory)
        import_torch()  # after every usage check: a bad option is answered without torch
        filters = Filters(only=only or (), include=include or (), exclude=exclude or ())
        run = run_script(script, args or [], sizes, where, filters, stdout_to_stderr=json_out)
        if traceback and run.exception is not None and not isinstance(run.exception, (SystemExit, KeyboardInterrupt)):
            raise run.exception
        if layer is not None and run.exception is None:
            from shapetrace.app.layers import check_layer

            check_layer(run.trace.events, layer, filtered=bool(run.hidden))
        run.trace.header = {"lines": script_header(script, sizes, note)}
        if request.export and run.trace.events:
            from shapetrace.cli.classroom import write_export

            write_export(run.trace, request)
        if step and not json_out and run.trace.events:
            from shapetrace.cli.classroom import step_or_table

            step_or_table(run.trace, out_console(width), request)
            if run.exception is not None:
                from shapetrace.render.failure import failure_lines

                out_console(width).print(*failure_lines(run))
                raise typer.Exit(1)
            return
        _show(run, json_out, width, request.view.fold, layer, summary or None)


def _show(run, json_out: bool, width: int | None, fold: bool = True, layer: int | None = None,
          summary: bool | None = None) -> None:
    errors = any(d.severity == "error" for d in run.trace.diagnostics)
    if json_out:
        write_json(run.trace.to_json())
        if run.interrupted:
            report_error(f"interrupted at op {len(run.trace.events)} (Ctrl-C)")
            raise typer.Exit(130)
        if run.exception is not None:
            report_error(_one_line(run))
        if run.exception is not None or errors:
            raise typer.Exit(1)
        return
    from rich.console import Group

    from shapetrace.render.failure import failure_lines
    from shapetrace.render.table import TraceView

    console = out_console(width)
    if run.trace.events:
        parts = [TraceView(run.trace, header=run.trace.header["lines"], show_diagnostics=run.ok, fold=fold,
                           layers=fold, expand_layer=layer, summary=summary)]
    else:
        parts = [] if run.exception is not None and not run.hidden else [_nothing_shown(run)]
        if run.interrupted:
            parts = []
    if run.hidden:
        parts.append(_hidden_note(run.hidden))
    parts.extend(_notes(run))
    if run.interrupted:
        parts.append(_interrupted(run))
    else:
        parts.extend(failure_lines(run))
    console.print(Group(*parts))
    if run.interrupted:
        raise typer.Exit(130)
    if run.exception is not None or errors:
        raise typer.Exit(1)


def _notes(run):
    from rich.text import Text

    return [Text(f"i {note}", style="cyan") for note in run.notes]


def _interrupted(run):
    from rich.text import Text

    n = len(run.trace.events)
    return Text(f"\ninterrupted at op {n} (Ctrl-C): the table shows the {n} op{'s' if n != 1 else ''} "
                "recorded before it", style="bold yellow")


def _one_line(run) -> str:
    if run.failed is not None:
        return f"#{run.failed.index} {run.failed.op} at {run.failed.source} raised {run.failed.error}"
    exc = run.exception
    return f"the script raised {type(exc).__name__}: {exc}"


def _nothing_shown(run):
    from rich.text import Text

    return Text("no recorded op matches --only/--include/--exclude (or every op ran inside torch)",
                style="yellow")


def _hidden_note(hidden: int):
    from rich.text import Text

    return Text(f"({hidden} more op{'s' if hidden != 1 else ''} hidden by --only/--include/--exclude or "
                "run inside torch and shapetrace)", style="dim")
