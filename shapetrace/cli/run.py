"""``shapetrace run``: trace one forward pass of the reference attention (or a variant) and show it."""

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
    seed_option,
    static_option,
    theme_option,
    width_option,
    write_json,
)


def _preset_help() -> str:
    from shapetrace.attention.presets import help_text

    return help_text()


def run(
    ctx: typer.Context,
    d_model: int = typer.Option(512, "--d-model", help="Model width D (d_k = D / heads)."),
    heads: int = typer.Option(8, "--heads", help="Number of attention heads H."),
    batch: int = typer.Option(2, "--batch", help="Batch size B."),
    seq_len: int = typer.Option(6, "--seq-len", help="Sequence length T."),
    seed: int = seed_option(0, "Random seed for weights and input (0 to 2**64 - 1)."),
    json_out: bool = typer.Option(False, "--json", help="Print the trace as JSON (schema v1) and nothing else."),
    width: int | None = width_option(),
    compact: bool = typer.Option(False, "--compact", help="Fewer columns (no strides) for narrow or zoomed terminals."),
    all_ops: bool = typer.Option(False, "--all", help=ALL_HELP),
    explain: str = typer.Option("full", "--explain", help="Annotations: full sentences or brief symbols.",
                                metavar="full|brief"),
    long_names: bool = typer.Option(False, "--long-names",
                                    help="Spell out axes: batch, seq_len, d_model, heads, d_head."),
    export: str | None = export_option(),
    ops: str | None = typer.Option(None, "--ops", metavar="FIRST-LAST",
                                   help="With --export: only ops #FIRST to #LAST (e.g. 9-12), for a slide."),
    theme: str = theme_option(),
    force: bool = force_option(),
    static: bool = static_option(),
    step: bool = typer.Option(False, "--step", help="One op at a time: Enter next, b back, d diagram, "
                              "g N Enter go to op #N, e next error, q quit."),
    auto: float | None = typer.Option(None, "--auto", metavar="SECONDS", help="With --step: advance by itself."),
    predict: bool = typer.Option(False, "--predict", help="Before each op that changes shape or layout, the class "
                                 "predicts its output shape; '--predict strides' asks for the strides too."),
    predict_what: str | None = typer.Argument(None, hidden=True, metavar="[shape|strides]"),
    answers: str | None = typer.Option(None, "--answers", metavar="FILE",
                                          help="With --predict: read the answers from FILE, one per line."),
    diagrams: bool = typer.Option(False, "--diagrams",
                                  help="Draw the memory layout under each view/transpose/contiguous/reshape."),
    diagram: int | None = typer.Option(None, "--diagram", metavar="N",
                                          help="Draw the memory layout under record N only."),
    device: str = typer.Option("auto", "--device", help=DEVICE_HELP),
    max_memory: str = typer.Option("1GiB", "--max-memory", help=MAX_MEMORY_HELP),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
    causal: bool = typer.Option(False, "--causal", help="Causal mask [T, T]: no query sees later keys."),
    mask: str = typer.Option("none", "--mask", help="Key mask: none or padding (a [B, T] mask seen as [B, 1, 1, T])."),
    pad: str | None = typer.Option(None, "--pad", help="Padding tokens per sequence, e.g. 0,2 (with --mask padding)."),
    pad_side: str = typer.Option("right", "--pad-side",
                                 help="Where padding sits: right or left (left + --causal gives NaN rows)."),
    kv_len: int | None = typer.Option(None, "--kv-len",
                                      help="Cross-attention: keys/values from a second sequence of this length (T_k)."),
    kv_heads: int | None = typer.Option(None, "--kv-heads",
                                        help="Grouped-query attention: key/value heads H_kv (1 = multi-query)."),
    impl: str = typer.Option("manual", "--impl",
                             help="manual (the reference), einops, fused-qkv, sdpa, or torch=nn.MultiheadAttention."),
    preset: str | None = typer.Option(None, "--preset", help=_preset_help()),
    broken: str | None = typer.Option(None, "--break",
                                      help="Run a classic bug from the catalogue ('--break list' shows them)."),
    dropout: float = typer.Option(0.0, "--dropout", help="Attention dropout probability p (acts with --train)."),
    train: bool = typer.Option(False, "--train", help="Train mode (dropout active)."),
    safe_softmax: bool = typer.Option(False, "--safe-softmax",
                                      help="Zero fully masked rows after softmax instead of NaN."),
    decode: int | None = typer.Option(None, "--decode", metavar="N",
                                      help="Decode with a KV cache: a causal prefill of --seq-len tokens, then "
                                      "N one-token steps (1 to 64); the cache grows T+1, T+2, ..."),
    image: int | None = typer.Option(None, "--image", metavar="SIZE",
                                     help="Attention over an image: SIZE x SIZE pixels cut into patches by a "
                                     "conv, plus a class token (needs --patch)."),
    patch: int | None = typer.Option(None, "--patch", metavar="P",
                                     help="With --image: P x P patches, Conv2d(C, D, P, stride=P); P must "
                                     "divide SIZE (--image 32 --patch 8: 1+16 = 17 tokens)."),
    channels: int | None = typer.Option(None, "--channels", metavar="C",
                                        help="With --image: channels of the image (default 3)."),
) -> None:
    """Trace one forward pass of multi-head self-attention and print every op (or a decode with a KV cache,
    --decode N, or attention over image patches, --image SIZE --patch P)."""
    with guarded(traceback):
        from shapetrace.app.devices import parse_memory, pick_device
        from shapetrace.app.session import run_reference
        from shapetrace.attention.config import AttentionConfig
        from shapetrace.attention.memory import reference_bytes
        from shapetrace.cli.classroom import ClassroomRequest, predict_mode, show_classroom

        request = ClassroomRequest.checked(width, compact, explain, long_names, export, theme, step, auto,
                                           predict_mode(predict, predict_what), answers, json_out, all_ops, force,
                                           static, ops)
        from shapetrace.cli.variants import run_variants, variant_requested

        options = dict(causal=causal, mask=mask, pad=pad, pad_side=pad_side, kv_len=kv_len, kv_heads=kv_heads,
                       impl=impl, preset=preset, broken=broken, dropout=dropout, train=train,
                       safe_softmax=safe_softmax, decode=decode, image=image, patch=patch, channels=channels)
        if variant_requested(options):
            base = dict(d_model=d_model, heads=heads, batch=batch, seq_len=seq_len, seed=seed)
            return run_variants(ctx, base, options, json_out, request, (diagrams, diagram),
                                device, parse_memory(max_memory))
        config = AttentionConfig(d_model=d_model, heads=heads, batch=batch, seq_len=seq_len, seed=seed)
        memory = parse_memory(max_memory)
        where, note = pick_device(device, reference_bytes(config), memory)
        import_torch()  # after every usage check: a bad option is answered without torch
        report = run_reference(config, where, note).report()
        if json_out:
            write_json(report.to_json())
            return
        hook = None
        if diagrams or diagram is not None:
            from shapetrace.render.diagram import run_diagram_hook

            hook = run_diagram_hook(report, diagram, out_console(width).width)
        show_classroom(report, request, after_event=hook)
        if any(d.severity == "error" for d in report.diagnostics):
            raise typer.Exit(1)
