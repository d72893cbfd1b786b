"""The attention-variant options of ``shapetrace run``: masks, cross-attention, GQA,
implementations, presets, the broken catalogue, dropout. No torch at import time.
"""

from __future__ import annotations

from typing import Any

import typer

from shapetrace.cli.common import out_console, write_json
from shapetrace.errors import UsageError

VARIANT_DEFAULTS: dict[str, Any] = {
    "causal": False, "mask": "none", "pad": None, "pad_side": "right", "kv_len": None, "kv_heads": None,
    "impl": "manual", "preset": None, "broken": None, "dropout": 0.0, "train": False, "safe_softmax": False,
    "decode": None, "image": None, "patch": None, "channels": None,
}


def variant_requested(options: dict[str, Any]) -> bool:
    """Did the user ask for anything beyond the plain reference?"""
    return any(options.get(k, v) != v for k, v in VARIANT_DEFAULTS.items())


def parse_pad(text: str | None) -> tuple[int, ...]:
    """``"0,2"`` -> ``(0, 2)``."""
    if not text:
        return ()
    try:
        return tuple(int(p) for p in text.replace(" ", "").split(","))
    except ValueError:
        raise UsageError(f"cannot read --pad {text!r}: give one whole number of padding tokens per "
                         "sequence, separated by commas (e.g. --pad 0,2)") from None


def _from_command_line(ctx: typer.Context, name: str) -> bool:
    """Did the user type this option (not its default)? Compared by name: click may be vendored."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def apply_preset(ctx: typer.Context, base: dict[str, Any], options: dict[str, Any]) -> str | None:
    """Fill D, H and H_kv from ``--preset`` where the user left the defaults; return a note."""
    name = options.get("preset")
    if not name:
        return None
    from shapetrace.attention.presets import get_preset

    p = get_preset(name)
    given = {k for k in ("d_model", "heads") if _from_command_line(ctx, k)}
    if "d_model" not in given:
        base["d_model"] = p.d_model
    if "heads" not in given:
        base["heads"] = p.heads
    if options.get("kv_heads") is None and p.kv_heads and not given and not options.get("broken"):
        options["kv_heads"] = p.kv_heads
    overridden = f" (your {', '.join('--' + g.replace('_', '-') for g in sorted(given))} kept)" if given else ""
    return (f"preset {p.describe()}{overridden}; source: {p.source}. This run uses T={base['seq_len']}; "
            f"pass --seq-len {p.context} for the full context.")


def run_variants(ctx: typer.Context, base: dict[str, Any], options: dict[str, Any], json_out: bool,
                 request, diagrams: tuple[bool, int | None] = (False, None),
                 device: str = "auto", max_bytes: int | None = None) -> None:
    """The body of ``run`` when a variant option is given: the trace is shown as the classroom
    options ask (table, --compact, --step, --predict, --export), then the variant's notes,
    heat map and, for a break, the comparison with the reference."""
    width = request.view.width
    if options.get("broken") == "list":
        if json_out:
            import json

            from shapetrace.attention.catalogue import CATALOGUE

            write_json(json.dumps([b.to_dict() for b in CATALOGUE.values()], indent=2))
            return
        from shapetrace.render.variants import print_catalogue

        print_catalogue(out_console(width))
        return
    if options.get("image") is not None and _from_command_line(ctx, "seq_len"):
        raise UsageError("--seq-len cannot be combined with --image: the tokens are the image's patches and "
                         "a class token (1+N, from --image and --patch)")
    preset_note = apply_preset(ctx, base, options)
    from shapetrace.app.session import trace_variant
    from shapetrace.attention.config import AttentionConfig

    fields = {k: v for k, v in options.items() if k != "preset"}
    fields["pad"] = parse_pad(fields.get("pad"))
    config = AttentionConfig(**base, **fields)
    run = trace_variant(config, max_bytes, device=device)
    if preset_note:
        run.notes.insert(0, preset_note)
    report = run.report()
    if json_out:
        write_json(variant_json(run, report))
        if any(d.severity == "error" for d in report.diagnostics):
            raise typer.Exit(1)
        return
    from shapetrace.cli.classroom import show_classroom
    from shapetrace.render.variants import print_variant_extras

    hook = None
    if diagrams[0] or diagrams[1] is not None:
        from shapetrace.render.diagram import run_diagram_hook

        hook = run_diagram_hook(report, diagrams[1], out_console(width).width)
    show_classroom(report, request, after_event=hook)
    print_variant_extras(run, out_console(width))
    if any(d.severity == "error" for d in report.diagnostics):
        raise typer.Exit(1)


def variant_json(run, report=None) -> str:
    """The trace's JSON (schema v1) plus a ``variant`` object: config, device, notes, NaN rows,
    and for a break the comparison with the reference (``report``: ``run.report()``, made once)."""
    import dataclasses
    import json

    report = report if report is not None else run.report()
    data = report.to_dict()
    cmp = dict(run.comparison) if run.comparison else None
    if cmp and cmp.get("leaks") is not None:
        cmp["leaks"] = [[list(src), list(dst)] for src, dst in cmp["leaks"]]
    data["variant"] = {
        "config": dataclasses.asdict(run.config), "device": run.device, "notes": run.notes,
        "nan_rows": report.nan_rows, "comparison": cmp,
    }
    if run.config.decode:
        data["variant"]["decode"] = decode_json(run)
    if run.config.image:
        c = run.config
        data["variant"]["image"] = {"size": c.image, "patch": c.patch, "channels": c.in_channels,
                                    "grid": [c.grid, c.grid], "patches": c.grid ** 2, "tokens": 1 + c.grid ** 2}
    return json.dumps(data, indent=2, default=list)


def decode_json(run) -> dict:
    """Where the prefill and each step begin and end (op indices) and the cache's name after each step."""
    from shapetrace.app.steps import cache_names, split_steps

    events, starts = run.trace.events, run.header.get("steps", [])
    prefill, steps = split_steps(events, starts)
    span = lambda evs: [evs[0].index, evs[-1].index] if evs else None  # noqa: E731
    return {"prefill": span(prefill), "steps": [span(list(s.events)) for s in steps],
            "cache": cache_names(events, starts)}
