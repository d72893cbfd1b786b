"""``shapetrace run``: trace one forward pass of the reference attention (or a variant) and show it.

One pipeline for every run (:func:`show_run`): the options become one
:class:`~shapetrace.app.request.RunRequest`, validated before torch is imported; the request is traced,
the trace becomes a report, and the report is printed as JSON or shown in the classroom view, with a
variant's notes, heat map and comparison below it. The defaults are the request's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from typer.core import TyperCommand

from shapetrace.app.classroom import ClassroomRequest, ViewOptions
from shapetrace.app.devices import pick_device
from shapetrace.app.request import RunRequest
from shapetrace.attention.presets import help_text
from shapetrace.cli.common import (
    ALL_HELP,
    DEVICE_HELP,
    MAX_MEMORY_HELP,
    PAD_WHAT,
    TRACEBACK_HELP,
    Given,
    PathText,
    export_option,
    force_option,
    guarded,
    import_torch,
    out_console,
    seed_option,
    static_option,
    theme_option,
    width_option,
    write_json,
)
from shapetrace.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.app.session import ReferenceRun, VariantRun
    from shapetrace.engine.report import Report

#: The panels ``run --help`` groups its options in.
MODEL, VARIANTS, OUTPUT, CLASSROOM, DEVICE = "Model", "Variants", "Output", "Classroom", "Device"


def _preset_help() -> str:
    return help_text()


def run(
    ctx: typer.Context,
    d_model: Annotated[int, typer.Option("--d-model", help="Model width D (d_k = D / heads).",
                                         rich_help_panel=MODEL)] = RunRequest.d_model,
    heads: Annotated[int, typer.Option("--heads", help="Number of attention heads H.",
                                       rich_help_panel=MODEL)] = RunRequest.heads,
    batch: Annotated[int, typer.Option("--batch", help="Batch size B.", rich_help_panel=MODEL)] = RunRequest.batch,
    seq_len: Annotated[int, typer.Option("--seq-len", help="Sequence length T.",
                                         rich_help_panel=MODEL)] = RunRequest.seq_len,
    seed: Annotated[int, seed_option("Random seed for weights and input (0 to 2**64 - 1).",
                                     panel=MODEL)] = RunRequest.seed,
    preset: Annotated[str | None, typer.Option("--preset", help=_preset_help(),
                                               rich_help_panel=MODEL)] = RunRequest.preset,
    causal: Annotated[bool, typer.Option("--causal", help="Causal mask [T, T]: no query sees later keys.",
                                         rich_help_panel=VARIANTS)] = RunRequest.causal,
    mask: Annotated[str, typer.Option("--mask", help="Key mask: none or padding (a [B, T] mask seen as "
                                      "[B, 1, 1, T]).", rich_help_panel=VARIANTS)] = RunRequest.mask,
    pad: Annotated[str | None, typer.Option("--pad", click_type=Given(PAD_WHAT),
                                            help="Padding tokens per sequence, e.g. 0,2 (with --mask "
                                            "padding).", rich_help_panel=VARIANTS)] = RunRequest.pad,
    pad_side: Annotated[str, typer.Option("--pad-side", help="Where padding sits: right or left (left + --causal "
                                          "gives NaN rows).", rich_help_panel=VARIANTS)] = RunRequest.pad_side,
    kv_len: Annotated[int | None, typer.Option("--kv-len", help="Cross-attention: keys/values from a second "
                                               "sequence of this length (T_k).",
                                               rich_help_panel=VARIANTS)] = RunRequest.kv_len,
    kv_heads: Annotated[int | None, typer.Option("--kv-heads", help="Grouped-query attention: key/value heads "
                                                 "H_kv (1 = multi-query).",
                                                 rich_help_panel=VARIANTS)] = RunRequest.kv_heads,
    impl: Annotated[str, typer.Option("--impl", help="manual (the reference), einops, fused-qkv, sdpa, or "
                                      "torch=nn.MultiheadAttention.", rich_help_panel=VARIANTS)] = RunRequest.impl,
    broken: Annotated[str | None, typer.Option("--break", help="Run a classic bug from the catalogue ('--break "
                                               "list' shows them).", rich_help_panel=VARIANTS)] = RunRequest.broken,
    dropout: Annotated[float, typer.Option("--dropout", help="Attention dropout probability p (acts with "
                                           "--train).", rich_help_panel=VARIANTS)] = RunRequest.dropout,
    train: Annotated[bool, typer.Option("--train", help="Train mode (dropout active).",
                                        rich_help_panel=VARIANTS)] = RunRequest.train,
    safe_softmax: Annotated[bool, typer.Option("--safe-softmax", help="Zero fully masked rows after softmax "
                                               "instead of NaN.", rich_help_panel=VARIANTS)] = RunRequest.safe_softmax,
    decode: Annotated[int | None, typer.Option("--decode", metavar="N", help="Decode with a KV cache: a causal "
                                               "prefill of --seq-len tokens, then N one-token steps (1 to 64); "
                                               "the cache grows T+1, T+2, ...",
                                               rich_help_panel=VARIANTS)] = RunRequest.decode,
    image: Annotated[int | None, typer.Option("--image", metavar="SIZE", help="Attention over an image: SIZE x "
                                              "SIZE pixels cut into patches by a conv, plus a class token (needs "
                                              "--patch).", rich_help_panel=VARIANTS)] = RunRequest.image,
    patch: Annotated[int | None, typer.Option("--patch", metavar="P", help="With --image: P x P patches, "
                                              "Conv2d(C, D, P, stride=P); P must divide SIZE (--image 32 --patch "
                                              "8: 1+16 = 17 tokens).", rich_help_panel=VARIANTS)] = RunRequest.patch,
    channels: Annotated[int | None, typer.Option("--channels", metavar="C", help="With --image: channels of the "
                                                 "image (default 3).",
                                                 rich_help_panel=VARIANTS)] = RunRequest.channels,
    json_out: Annotated[bool, typer.Option("--json", help="Print the trace as JSON (schema v2) and nothing else.",
                                           rich_help_panel=OUTPUT)] = RunRequest.json_out,
    backward: Annotated[bool, typer.Option("--backward", help="After the forward, trace the backward of the "
                                           "output's sum: each op's gradients with the forward's names, and "
                                           "what autograd keeps (also at 2T).",
                                           rich_help_panel=OUTPUT)] = RunRequest.backward,
    width: Annotated[int | None, width_option(panel=OUTPUT)] = ViewOptions.width,
    compact: Annotated[bool, typer.Option("--compact", help="Fewer columns (no strides) for narrow or zoomed "
                                          "terminals.", rich_help_panel=OUTPUT)] = ViewOptions.compact,
    all_ops: Annotated[bool, typer.Option("--all", help=ALL_HELP, rich_help_panel=OUTPUT)] = not ViewOptions.fold,
    explain: Annotated[str, typer.Option("--explain", help="Annotations: full sentences or brief symbols.",
                                         metavar="full|brief", rich_help_panel=OUTPUT)] = ViewOptions.explain,
    long_names: Annotated[bool, typer.Option("--long-names", help="Spell out axes: batch, seq_len, d_model, "
                                             "heads, d_head.", rich_help_panel=OUTPUT)] = ViewOptions.long_names,
    diagrams: Annotated[bool, typer.Option("--diagrams", help="Draw the memory layout under each "
                                           "view/transpose/contiguous/reshape.",
                                           rich_help_panel=OUTPUT)] = RunRequest.diagrams,
    diagram: Annotated[int | None, typer.Option("--diagram", metavar="N", help="Draw the memory layout under "
                                                "record N only.", rich_help_panel=OUTPUT)] = RunRequest.diagram,
    export: Annotated[str | None, export_option(panel=OUTPUT)] = ClassroomRequest.export,
    ops: Annotated[str | None, typer.Option("--ops", metavar="FIRST-LAST", help="With --export: only ops #FIRST "
                                            "to #LAST (e.g. 9-12), for a slide.",
                                            rich_help_panel=OUTPUT)] = ClassroomRequest.ops,
    theme: Annotated[str, theme_option(panel=OUTPUT)] = ClassroomRequest.theme,
    force: Annotated[bool, force_option(panel=OUTPUT)] = ClassroomRequest.force,
    static: Annotated[bool, static_option(panel=OUTPUT)] = ClassroomRequest.static,
    step: Annotated[bool, typer.Option("--step", help="One op at a time: Enter next, b back, d diagram, g N Enter "
                                       "go to op #N, e next error, q quit.",
                                       rich_help_panel=CLASSROOM)] = ClassroomRequest.step,
    auto: Annotated[float | None, typer.Option("--auto", metavar="SECONDS", help="With --step: advance by itself.",
                                               rich_help_panel=CLASSROOM)] = ClassroomRequest.auto,
    predict: Annotated[bool, typer.Option("--predict", help="Before each op that changes shape or layout, the "
                                          "class predicts its output shape; '--predict strides' asks for the "
                                          "strides too.", rich_help_panel=CLASSROOM)] = False,
    predict_what: Annotated[str | None, typer.Argument(hidden=True, metavar="[shape|strides]")] = None,
    answers: Annotated[str | None, typer.Option("--answers", metavar="FILE", help="With --predict: read the "
                                                "answers from FILE, one per line.",
                                                click_type=PathText("a file with one answer per line"),
                                                rich_help_panel=CLASSROOM)] = ClassroomRequest.answers,
    device: Annotated[str, typer.Option("--device", help=DEVICE_HELP, rich_help_panel=DEVICE)] = RunRequest.device,
    max_memory: Annotated[str, typer.Option("--max-memory", help=MAX_MEMORY_HELP,
                                            rich_help_panel=DEVICE)] = RunRequest.max_memory,
    traceback: Annotated[bool, typer.Option("--traceback", help=TRACEBACK_HELP)] = False,
) -> None:
    """Trace one forward pass of multi-head self-attention and print every op (or a decode with a KV cache,
    --decode N, or attention over image patches, --image SIZE --patch P)."""
    with guarded(traceback):
        # ctx.params holds every option above by its parameter name, the name RunRequest's fields share
        show_run(RunRequest.from_options(ctx.params, typed=typed_options(ctx)))


def typed_options(ctx: typer.Context) -> frozenset[str]:
    """The options the user typed, not left at their defaults. Compared by name: click may be vendored."""
    sources = {name: ctx.get_parameter_source(name) for name in ctx.params}
    return frozenset(name for name, source in sources.items()
                     if source is not None and source.name == "COMMANDLINE")


def show_run(request: RunRequest) -> None:
    """Trace what ``request`` asks for and show it: JSON, or the classroom view and a variant's extras.

    Raises:
        typer.Exit: with code 1 when the trace has error diagnostics.
    """
    if request.lists_catalogue:
        from shapetrace.cli.variants import show_catalogue

        show_catalogue(request.json_out, request.classroom.view.width)
        return
    from shapetrace.app.session import trace_request

    device, note = pick_device(request.device, request.estimate, request.budget)
    if request.backward and device == "meta":
        raise UsageError("--backward needs values, and this run is on the meta device (" + (note or "--device meta")
                         + "): use a smaller size or --device cpu")
    import_torch()  # after every usage check: a bad option is answered without torch
    run = trace_request(request, device, note) if request.classroom.view.fold else _every_call(request, device, note)
    report = run.report()
    if request.json_out:
        write_json(run.to_json(report))
    else:
        show_report(run, report, request)
    if any(d.severity == "error" for d in report.diagnostics):
        raise typer.Exit(1)


def _every_call(request: RunRequest, device: str, note: str | None):
    """``--all``: the run traced with every call kept, so that the table shows the ops without a row too."""
    from shapetrace.app.session import trace_request
    from shapetrace.engine.unrowed import recording_every_call

    with recording_every_call():
        return trace_request(request, device, note)


def show_report(run: ReferenceRun | VariantRun, report: Report, request: RunRequest) -> None:
    """The classroom view (table, step or predict mode, export; memory diagrams when asked) and, for a
    variant, its notes, heat map and comparison with the reference."""
    from shapetrace.cli.classroom import show_classroom

    show_classroom(report, request.classroom, after_event=_diagram_hook(report, request), doubled=run.doubled)
    if request.is_variant:
        from shapetrace.render.variants import print_variant_extras

        print_variant_extras(run, out_console(request.classroom.view.width))
    if report.backward is not None and not _stepped(request) and not request.classroom.predict:
        from shapetrace.render.backward import print_backward

        print_backward(out_console(request.classroom.view.width), report, request.classroom.view, run.doubled)


def _stepped(request: RunRequest) -> bool:
    """Step mode ran (its screens showed the backward after the forward), not its fallback table. (Predict
    mode, too, walks the backward after the forward: its questions are on the grads.)"""
    from shapetrace.tui.step import step_mode_available

    return request.classroom.step and step_mode_available()


def _diagram_hook(report: Report, request: RunRequest):
    """What draws the memory diagrams under the table's rows (``--diagrams``, ``--diagram N``), or None."""
    if not request.diagrams and request.diagram is None:
        return None
    from shapetrace.render.diagram import run_diagram_hook

    return run_diagram_hook(report, request.diagram, out_console(request.classroom.view.width).width)


class RunCommand(TyperCommand):
    """``run``'s command: its one positional (``--predict strides``'s word) is read after ``--predict`` only,
    so the usage line does not show it (``Usage: shapetrace run [OPTIONS]``)."""

    def collect_usage_pieces(self, ctx) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if not getattr(param, "hidden", False):
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces
