"""``shapetrace live``: a live classroom. Students predict each step on their phones; the projector shows
the spread of answers, then torch's answer and what each wrong one means. The work is in
:mod:`shapetrace.live`; this module reads the options and prints the join details."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from shapetrace.app.classroom import ViewOptions
from shapetrace.app.devices import pick_device
from shapetrace.app.request import RunRequest
from shapetrace.cli.common import TRACEBACK_HELP, PathText, guarded, import_torch, out_console, seed_option
from shapetrace.cli.terminal import can_encode
from shapetrace.errors import UsageError

MODEL, SERVER = "Model", "Server"
#: The characters the terminal QR code is drawn with (segno's compact mode: half blocks).
QR_BLOCKS = "▀▄█"
#: What --csv wants (said when it is given empty).
ANSWERS_CSV = "a file name for the answers, e.g. answers.csv"



def live(
    ctx: typer.Context,
    host: Annotated[str, typer.Option("--host", help="Address to listen on: 127.0.0.1 (this machine only, the "
                                      "default) or 0.0.0.0 (every network: phones in the room).",
                                      rich_help_panel=SERVER)] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on (0: any free port).",
                                      rich_help_panel=SERVER)] = 8000,
    csv: Annotated[str | None, typer.Option("--csv", metavar="PATH", click_type=PathText(ANSWERS_CSV),
                                            help="Where the answers go (default "
                                            "shapetrace-live-DATE-TIME.csv here); never an existing file.",
                                            rich_help_panel=SERVER)] = None,
    d_model: Annotated[int, typer.Option("--d-model", help="Model width D.",
                                         rich_help_panel=MODEL)] = RunRequest.d_model,
    heads: Annotated[int, typer.Option("--heads", help="Attention heads H.",
                                       rich_help_panel=MODEL)] = RunRequest.heads,
    batch: Annotated[int, typer.Option("--batch", help="Batch size B.", rich_help_panel=MODEL)] = RunRequest.batch,
    seq_len: Annotated[int, typer.Option("--seq-len", help="Sequence length T.",
                                         rich_help_panel=MODEL)] = RunRequest.seq_len,
    seed: Annotated[int, seed_option("Random seed.", panel=MODEL)] = RunRequest.seed,
    preset: Annotated[str | None, typer.Option("--preset", help="A named model's sizes (see run --help).",
                                               rich_help_panel=MODEL)] = RunRequest.preset,
    causal: Annotated[bool, typer.Option("--causal", help="Causal mask.", rich_help_panel=MODEL)] = RunRequest.causal,
    kv_len: Annotated[int | None, typer.Option("--kv-len", help="Cross-attention: keys of length T_k.",
                                               rich_help_panel=MODEL)] = RunRequest.kv_len,
    kv_heads: Annotated[int | None, typer.Option("--kv-heads", help="Grouped-query attention: H_kv.",
                                                 rich_help_panel=MODEL)] = RunRequest.kv_heads,
    impl: Annotated[str, typer.Option("--impl", help="manual, einops, fused-qkv, sdpa or torch.",
                                      rich_help_panel=MODEL)] = RunRequest.impl,
    broken: Annotated[str | None, typer.Option("--break", metavar="NAME", help="Step through a classic bug from "
                                               "the catalogue (run --break list shows them).",
                                               rich_help_panel=MODEL)] = RunRequest.broken,
    decode: Annotated[int | None, typer.Option("--decode", metavar="N", help="Decode N tokens with a KV cache.",
                                               rich_help_panel=MODEL)] = RunRequest.decode,
    image: Annotated[int | None, typer.Option("--image", metavar="SIZE", help="Attention over an image (with "
                                              "--patch).", rich_help_panel=MODEL)] = RunRequest.image,
    patch: Annotated[int | None, typer.Option("--patch", metavar="P", help="With --image: P x P patches.",
                                              rich_help_panel=MODEL)] = RunRequest.patch,
    lesson: Annotated[int | None, typer.Option("--lesson", metavar="N", help="Ask the predict moments of lesson "
                                               "N's live examples instead of a run (see shapetrace lessons).",
                                               rich_help_panel=MODEL)] = None,
    quiz: Annotated[bool, typer.Option("--quiz", help="Ask questions of the quiz bank instead (shapes, strides, "
                                       "views, errors; see shapetrace quiz).", rich_help_panel=MODEL)] = False,
    topic: Annotated[str | None, typer.Option("--topic", help="With --quiz: only this topic.",
                                              rich_help_panel=MODEL)] = None,
    count: Annotated[int, typer.Option("--count", min=1, max=200, help="With --quiz: how many questions.",
                                       rich_help_panel=MODEL)] = 10,
    long_names: Annotated[bool, typer.Option("--long-names", help="Spell out axes: batch, seq_len, d_model, "
                                             "heads, d_head.")] = ViewOptions.long_names,
    traceback: Annotated[bool, typer.Option("--traceback", help=TRACEBACK_HELP)] = False,
) -> None:
    """Run a live class: students predict each op's output shape on their phones, the projector
shows the answers as they come in, then torch's answer, the histogram and what each wrong answer means.

In a lecture hall, two commands: `pip install "shapetrace[live]"`, then `shapetrace live --host 0.0.0.0`
(on the room's network). Open the projector address it prints on the projector; students scan the QR
code or type the join address and code. On the projector: → or space next, r reveal, ← back, e end.
Ctrl-C (or e) ends the class and saves every answer to a CSV file (never over an existing file)."""
    with guarded(traceback):
        _live(ctx, host, port, csv, long_names, lesson, (topic, count) if quiz else None)


_MODEL_OPTIONS = ("d_model", "heads", "batch", "seq_len", "seed", "preset", "causal", "kv_len", "kv_heads", "impl",
                  "broken", "decode", "image", "patch")


def _live(ctx: typer.Context, host: str, port: int, csv: str | None, long_names: bool, lesson: int | None,
          quiz: tuple[str | None, int] | None) -> None:
    from shapetrace.cli.run import typed_options
    from shapetrace.live.session import bind, check_csv, check_extra, check_host, check_port, default_csv

    check_extra()
    check_host(host)
    check_port(port)
    path = check_csv(csv) or default_csv()
    typed = typed_options(ctx)
    model = sorted(typed & set(_MODEL_OPTIONS))
    if lesson is not None and model:
        raise UsageError(f"--lesson asks a lesson's own examples: drop --{model[0].replace('_', '-')}")
    if quiz is not None and (model or lesson is not None):
        raise UsageError(f"--quiz asks the quiz bank's questions: drop --{(model or ['lesson'])[0].replace('_', '-')}")
    if quiz is None and {"topic", "count"} & typed:
        raise UsageError("--topic and --count work with --quiz")
    if quiz is not None:
        from shapetrace.exercises import quiz as bank
        from shapetrace.exercises.content import load

        bank.select(bank.bank(load().root), quiz[0], quiz[1], None)  # an unknown --topic: one line, now
    if lesson is not None:
        from shapetrace.exercises.content import load

        load().lesson(lesson)  # no such lesson: one line, before the port and torch
    request = RunRequest(**{name: ctx.params[name] for name in _MODEL_OPTIONS}, typed=typed).checked()
    if request.lists_catalogue:
        raise UsageError("--break list shows the catalogue: run `shapetrace run --break list`")
    sock = bind(host, port)  # a port in use answers before torch is imported
    try:
        _serve(request, sock, host, path, ViewOptions(long_names=long_names), lesson, quiz)
    finally:
        sock.close()


def _serve(request: RunRequest, sock, host: str, path, options: ViewOptions, lesson: int | None,
           quiz: tuple[str | None, int] | None) -> None:
    from shapetrace.app.session import trace_request
    from shapetrace.live.classstate import LiveClass
    from shapetrace.live.moments import build_moments, lesson_moments, quiz_moments
    from shapetrace.live.session import Saver, join_url, serve
    from shapetrace.render.table import trace_header

    import_torch()
    if quiz is not None:
        title, moments = "shapetrace quiz", quiz_moments(*quiz)
    elif lesson is not None:
        title, moments = lesson_moments(lesson, options)
    else:
        device, note = pick_device(request.device, request.estimate, request.budget)
        report = trace_request(request, device, note).report()
        header = trace_header(report)
        title, moments = header[0] if header else "shapetrace", build_moments(report, options)
    live = LiveClass(moments, title)
    url = join_url(host, sock.getsockname()[1], live.join_code)
    saver = Saver(live, path)
    _announce(live, url, saver)
    try:
        serve(live, sock, url, on_end=saver)
    finally:
        _farewell(live, saver)


def _announce(live, url: str, saver) -> None:
    from rich.text import Text

    from shapetrace.live.server import qr_terminal

    console = out_console()
    base = url.split("#", 1)[0]
    if can_encode(sys.stdout, QR_BLOCKS):
        console.print(qr_terminal(url), end="", highlight=False, markup=False)
    else:   # (its blocks would be written as '?': a code no phone reads)
        console.print("(no QR code: this output cannot show its blocks; students type the join address)",
                      highlight=False, markup=False)
    console.print(Text.assemble(("join: ", "bold"), (url, "bold cyan"), "   code: ", (live.join_code, "bold")))
    console.print(Text.assemble(("projector (teacher only, it moves the class): ", "bold"),
                                f"{base}projector#key={live.teacher_key}"))
    console.print(f"{len(live.moments)} questions · on the projector: → or space next, r reveal, ← back, e end · "
                  f"Ctrl-C ends the class; answers go to {saver.path}", highlight=False)


def _farewell(live, saver) -> None:
    console = out_console()
    saved = saver()
    for row in live.summary():
        right = f"{row['right']}/{row['answered']} right" if row["answered"] else "no answers"
        index = live.moments[row["number"]].ask["index"]   # (None: a quiz question, not an op of a trace)
        console.print(f"  question {row['number'] + 1}{'' if index is None else f' #{index}'} {row['op']}: "
                      f"{right}" + (f", most common wrong answer {row['common_wrong']}" if row["common_wrong"] else ""),
                      highlight=False, markup=False)
    n = len(live.students)
    console.print(f"{n} student{'' if n == 1 else 's'}; answers saved to {saved}", highlight=False)
