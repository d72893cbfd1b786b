"""``shapetrace trace SCRIPT [ARGS...]``: trace a user's own script (registered from cli.py)."""

from __future__ import annotations

import contextlib
import math
import os
import sys

import typer

from shapetrace.app.classroom import ClassroomRequest
from shapetrace.app.devices import DEFAULT_DEVICE, DEFAULT_MAX_MEMORY, parse_memory, pick_device
from shapetrace.app.layers import check_layer, check_layer_number
from shapetrace.attention.config import check_named_sizes, shown
from shapetrace.attention.memory import dims_bytes
from shapetrace.cli.common import (
    ALL_HELP,
    DEVICE_HELP,
    MAX_MEMORY_HELP,
    TRACEBACK_HELP,
    Given,
    PathText,
    export_option,
    force_option,
    guarded,
    import_torch,
    out_console,
    report_error,
    static_option,
    theme_option,
    usage_callback,
    width_option,
    write_json,
)
from shapetrace.engine.dims import parse_dims
from shapetrace.errors import UsageError

#: ``trace``'s default limits: a training loop or an endless script still ends with a table that is
#: quick to analyse (about 0.3 s for 10,000 ops) and to read (loop iterations fold into one line).
DEFAULT_MAX_OPS, MAX_OPS_LIMIT, DEFAULT_SECONDS = 10_000, 1_000_000, 60.0
#: What --only and --loss want (said when one is given empty).
ONLY_WHAT = "a function or method (MyAttention.forward) or a module path (h.3.attn)"
LOSS_WHAT = "the name of a variable at the script's top level"


def check_max_ops(n: int) -> int:
    if not 1 <= n <= MAX_OPS_LIMIT:
        raise UsageError(f"--max-ops {shown(n)}: use a whole number from 1 to {MAX_OPS_LIMIT:,}")
    return n


def check_trace_seconds(seconds: float) -> float:

    if not (math.isfinite(seconds) and 0.1 <= seconds <= 86400):
        raise UsageError(f"--time-limit {seconds}: use a number of seconds from 0.1 to 86400")
    return seconds


def trace(
    script: str = typer.Argument(..., help="The Python script to run as __main__ under the tracer."),
    args: list[str] | None = typer.Argument(None, help="Arguments for the script (after -- if they "
                                                          "look like shapetrace options)."),
    dims: str | None = typer.Option(None, "--dims", click_type=Given("named sizes such as B=2,T=6,D=512,H=8"),
                                    help="Named sizes, e.g. B=2,T=6,D=512,H=8 (d_k = D/H derived; give d_k where a "
                                         "head's width is set apart, as Gemma's head_dim; any other names such as "
                                         "H_kv=2 or S=20)."),
    only: list[str] | None = typer.Option(None, "--only", click_type=Given(ONLY_WHAT),
                                          help="Keep ops run under this function or method (e.g. "
                                               "MyAttention.forward) or in this module path (e.g. h.3.attn)."),
    layer: int | None = typer.Option(None, "--layer", metavar="N", help="Show layer N in full where "
                                     "identical layers fold (layers 1-11: the same ops as layer 0).",
                                     callback=usage_callback(check_layer_number)),
    summary: bool = typer.Option(False, "--summary", help="Print the per-module summary (ops, views, copies, "
                                 "computed bytes) under the table, also when the model has no layers."),
    backward: bool = typer.Option(False, "--backward", help="Trace the backward pass too: the script's own "
                                  ".backward() calls (the first in full, the others counted), else the backward "
                                  "of --loss or of the last result's sum."),
    loss: str | None = typer.Option(None, "--loss", metavar="NAME", click_type=Given(LOSS_WHAT),
                                    help="The scalar loss (a variable at the script's top level) whose backward "
                                    "--backward traces when the script runs none; implies --backward."),
    include: list[str] | None = typer.Option(None, "--include", click_type=PathText("a file or folder"),
                                             help="Keep ops written in this file or folder."),
    exclude: list[str] | None = typer.Option(None, "--exclude", click_type=PathText("a file or folder"),
                                             help="Drop ops written in this file or folder."),
    json_out: bool = typer.Option(False, "--json", help="Print the trace as JSON (schema v2) on stdout and "
                                                        "nothing else; the script's prints go to stderr."),
    width: int | None = width_option(),
    all_ops: bool = typer.Option(False, "--all", help=ALL_HELP),
    device: str = typer.Option(DEFAULT_DEVICE, "--device",
                               help=DEVICE_HELP + " With auto, the estimate comes from --dims."),
    max_memory: str = typer.Option(DEFAULT_MAX_MEMORY, "--max-memory", help=MAX_MEMORY_HELP),
    max_ops: int = typer.Option(DEFAULT_MAX_OPS, "--max-ops", metavar="N",
                                help=f"Stop recording after N ops and show them (1 to {MAX_OPS_LIMIT:,}).",
                                callback=usage_callback(check_max_ops)),
    time_limit: float = typer.Option(DEFAULT_SECONDS, "--time-limit", metavar="S",
                                     help="Stop the script after S seconds and show the ops recorded so far "
                                     "(0.1 to 86400). A live count of ops shows on stderr after 2 s; Ctrl-C "
                                     "also stops it and shows the table so far.",
                                     callback=usage_callback(check_trace_seconds)),
    step: bool = typer.Option(False, "--step", help="One op at a time: Enter next, b back, d diagram, "
                              "g N Enter go to op #N, e next error, q quit."),
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

        check_script(script)  # a missing, unreadable or broken file is answered before torch is imported
        request = ClassroomRequest.checked(width=width, export=export, theme=theme, step=step, auto=auto,
                                           json_out=json_out, all_ops=all_ops, force=force, static=static)
        backward = backward or loss is not None
        if backward:
            check_backward_options(step=step, export=export, only=only, include=include, exclude=exclude)
        from shapetrace.app.script import Filters, Limits, run_script, script_header

        sizes = parse_dims(dims)
        if dims is not None and not sizes:   # (',': blank ones are refused as the options are read)
            raise UsageError(f"--dims {dims!r} names no size: write NAME=SIZE pairs such as 'B=2,T=6,D=512,H=8'")
        check_named_sizes(sizes)
        memory = parse_memory(max_memory)
        where, note = pick_device(device, dims_bytes(sizes), memory)
        import_torch()  # after every usage check: a bad option is answered without torch
        _import_what_shows_the_table()  # now, not after Ctrl-C: the table so far follows it at once
        filters = Filters(only=only or (), include=include or (), exclude=exclude or ())
        limits = Limits(max_ops=max_ops, seconds=time_limit, progress=_LiveCount(max_ops, time_limit),
                        on_stuck=_end_stuck_script)
        try:
            with _every_call(not request.view.fold):
                run = run_script(script, args or [], sizes, where, filters, stdout_to_stderr=json_out, limits=limits,
                                 backward=backward, loss=loss)
        finally:
            limits.progress.clear()
        if traceback and run.exception is not None and not isinstance(run.exception, (SystemExit, KeyboardInterrupt)):
            raise run.exception
        if layer is not None and run.exception is None:
            check_layer(run.trace.events, layer, filtered=bool(run.hidden))
        from shapetrace.app.script import backward_notes, how_to_name, unused_sizes_note

        events = run.trace.events   # (inferred: the heads' width the model proves is known from here)
        run.header = {"lines": script_header(script, sizes, note, run.trace.head_width),
                      "how_to_name": how_to_name(events, sizes)}
        unused = unused_sizes_note(run.trace.events, sizes)
        if unused:
            run.notes.append(unused)
        run.notes.extend(backward_notes(run, backward, loss))
        if request.export and run.trace.events:
            from shapetrace.cli.classroom import write_export

            write_export(run.report(), request)
        if step and not json_out and run.trace.events:
            from shapetrace.cli.classroom import step_or_table

            step_or_table(run.report(), out_console(width), request)
            if run.exception is not None:
                from shapetrace.render.failure import failure_lines

                out_console(width).print(*failure_lines(run))
                raise typer.Exit(1)
            return
        _show(run, json_out, width, request.view.fold, layer, summary or None)


def check_backward_options(**given) -> None:
    """``--backward`` shows the whole trace's backward after its table: not (yet) with the step view, the
    exports, or a filter (which renumbers the forward's rows the backward's rows point to)."""
    for name, value in given.items():
        if value:
            flag = "--" + name.replace("_", "-")
            raise UsageError(f"--backward cannot be combined with {flag} yet: run it without {flag} to see the "
                             "backward table after the forward one")


def _every_call(on: bool):
    """``--all``: the script traced with every call kept, so that the table shows the ops without a row too."""
    from shapetrace.engine.unrowed import recording_every_call

    return recording_every_call() if on else contextlib.nullcontext()


def _show(run, json_out: bool, width: int | None, fold: bool = True, layer: int | None = None,
          summary: bool | None = None) -> None:
    errors = any(d.severity == "error" for d in run.trace.diagnostics)
    if json_out:
        write_json(run.report().to_json())
        for line in (*run.notes, run.stopped):
            if line:
                print(line, file=sys.stderr)
        if run.interrupted:
            report_error(f"interrupted at op {len(run.trace.events)} ({run.by})")
            raise typer.Exit(run.interrupted_exit)
        if run.exception is not None:
            report_error(_one_line(run))
        if run.exception is not None or errors:
            raise typer.Exit(1)
        return
    from rich.console import Group

    from shapetrace.render.failure import failure_lines
    from shapetrace.render.table import TraceView

    console = out_console(width)
    if run.interrupted and len(run.trace.events) > INTERRUPTED_FULL_TABLE:
        console.print(Group(*_interrupted_tail(run, console.width)))
        _exit_at_once(run.interrupted_exit)
    if run.trace.events:
        refused = not run.ok and any(d.kind == "inplace-on-saved" for d in run.trace.diagnostics)
        parts = [TraceView(run.report(), header=run.header["lines"], show_diagnostics=run.ok or refused, fold=fold,
                           layers=fold, expand_layer=layer, summary=summary)]
    else:
        parts = [] if run.exception is not None and not run.hidden else [_nothing_shown(run)]
        if run.interrupted:
            parts = []
    if run.trace.backward is not None and run.trace.events:
        from shapetrace.render.backward import BackwardView
        parts.append(BackwardView(run.trace.backward))
    if run.hidden:
        parts.append(_hidden_note(run.hidden))
    parts.extend(_notes(run))
    from shapetrace.render.indent import Hanging

    if run.stopped:
        parts.append(Hanging(_stopped(run)))
    if run.interrupted:
        parts.append(Hanging(_interrupted(run)))
    else:
        parts.extend(failure_lines(run))
    console.print(Group(*parts))
    if run.interrupted:
        _exit_at_once(run.interrupted_exit)
    if run.exception is not None or errors:
        raise typer.Exit(1)


def _notes(run):
    from rich.text import Text

    return [Text(f"i {note}", style="cyan") for note in run.notes]


def _stopped(run):
    from rich.text import Text

    n = len(run.trace.events) + run.hidden
    return Text(f"\n{run.stopped}; the table shows the {n:,} op{'s' if n != 1 else ''} recorded until then "
                "(the script had not finished; raise the limit to record more)", style="bold yellow")


def _import_what_shows_the_table() -> None:
    import shapetrace.engine.rules.diagnose  # noqa: F401
    import shapetrace.render.failure  # noqa: F401
    import shapetrace.render.table  # noqa: F401


def _end_stuck_script(why: str, ops: int) -> None:
    """The script catches the stop and keeps running: end the process (one line, exit 1), as time and
    memory must stay bounded. Runs in the watcher thread, so it writes to file descriptor 2 itself."""

    line = (f"\rerror: {why}, but the script caught the stop and kept running; it was ended after "
            f"{ops:,} ops, with no table (a bare except: or except BaseException: swallows Ctrl-C too)\x1b[K\n")
    if not os.isatty(2):
        line = line.replace("\r", "").replace("\x1b[K", "")
    try:
        os.write(2, line.encode())
    finally:
        os._exit(1)


class _LiveCount:
    """``recording… 12,345 ops, 3 s (stops at 10,000 ops or 60 s; Ctrl-C shows the table so far)`` on
    stderr while a script runs long: rewritten in place on a terminal, a line every 5 s otherwise."""

    def __init__(self, max_ops: int, seconds: float) -> None:
        self.max_ops, self.seconds = max_ops, seconds
        self.tty = sys.stderr.isatty()
        self.shown = False
        self.last = -5.0

    def __call__(self, ops: int, elapsed: float) -> None:
        if not self.tty and elapsed - self.last < 5:
            return
        self.last = elapsed
        line = (f"recording… {ops:,} ops, {elapsed:.0f} s (stops at {self.max_ops:,} ops or {self.seconds:g} s; "
                "Ctrl-C shows the table so far)")
        try:
            sys.stderr.write(f"\r{line}\x1b[K" if self.tty else line + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            return
        self.shown = True

    def clear(self) -> None:
        if self.shown and self.tty:
            try:
                sys.stderr.write("\r\x1b[K")
                sys.stderr.flush()
            except (OSError, ValueError):
                pass


#: Up to this many ops, Ctrl-C shows the whole table; beyond, only the last INTERRUPTED_TAIL rows and the
#: totals, without the checks: folding, checking and formatting 10,000 rows took seconds, and Ctrl-C must
#: answer at once.
INTERRUPTED_FULL_TABLE, INTERRUPTED_TAIL = 300, 20


def _interrupted_tail(run, width: int) -> list:
    """Header, the last ops as a table, the totals of every op recorded, and what was left out."""
    from rich.text import Text

    from shapetrace.render.indent import Hanging
    from shapetrace.render.table import OpTable, footer_text, header_texts

    events = run.trace.events
    n, shown = len(events), events[-INTERRUPTED_TAIL:]
    header = [*header_texts(run.header["lines"], width), Text("")]
    note = Text(f"\ninterrupted at op {n:,} ({run.by}): the table shows the last {len(shown)} of the {n:,} ops "
                f"recorded before it (#{shown[0].index}-#{shown[-1].index}), and the totals of all; the checks "
                f"were skipped to answer at once (--max-ops {n} records as many and shows the whole table)",
                style="bold yellow")
    return [*header, OpTable(shown), Hanging(footer_text(run.trace, events)), Hanging(note)]


def _exit_at_once(code: int) -> None:
    """After Ctrl-C, once the table is written: end the process without the interpreter's teardown, which
    took over a second with 10,000 ops recorded (the answer to Ctrl-C is the prompt coming back). In
    process (a test's CliRunner owns stdout) it raises typer.Exit as usual."""
    if sys.stdout is not sys.__stdout__:
        raise typer.Exit(code)

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _interrupted(run):
    from rich.text import Text

    n = len(run.trace.events)
    return Text(f"\ninterrupted at op {n} ({run.by}): the table shows the {n} op{'s' if n != 1 else ''} "
                "recorded before it", style="bold yellow")


def _one_line(run) -> str:
    """Why the run failed, on one line without control characters (the script's message is its own text)."""
    from shapetrace.engine.verdict import one_line, raised_text

    if run.failed is not None:
        return f"#{run.failed.index} {run.failed.op} at {run.failed.source} raised {one_line(run.failed.error or '')}"
    return f"the script raised {raised_text(run.exception)}"


def _nothing_shown(run):
    from rich.text import Text

    return Text("no recorded op matches --only/--include/--exclude (or every op ran inside torch)",
                style="yellow")


def _hidden_note(hidden: int):
    from rich.text import Text

    return Text(f"({hidden} more op{'s' if hidden != 1 else ''} hidden by --only/--include/--exclude or "
                "run inside torch and shapetrace)", style="dim")
