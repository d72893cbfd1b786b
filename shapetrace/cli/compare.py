"""``shapetrace compare``: every attention implementation on the same weights and input."""

from __future__ import annotations

import json

import typer

from shapetrace.app.devices import DEFAULT_DEVICE
from shapetrace.app.request import parse_pad
from shapetrace.attention.config import AttentionConfig
from shapetrace.cli.common import (
    DEVICE_HELP,
    PAD_WHAT,
    TRACEBACK_HELP,
    Given,
    guarded,
    out_console,
    seed_option,
    width_option,
    write_json,
)
from shapetrace.errors import UsageError


def compare(
    d_model: int = typer.Option(512, "--d-model", help="Model width D."),
    heads: int = typer.Option(8, "--heads", help="Number of attention heads H."),
    batch: int = typer.Option(2, "--batch", help="Batch size B."),
    seq_len: int = typer.Option(6, "--seq-len", help="Sequence length T (queries)."),
    seed: int = seed_option("Random seed for weights and input (0 to 2**64 - 1).", 0),
    causal: bool = typer.Option(False, "--causal", help="Causal mask."),
    mask: str = typer.Option("none", "--mask", help="none or padding."),
    pad: str | None = typer.Option(None, "--pad", click_type=Given(PAD_WHAT),
                                       help="Padding tokens per sequence, e.g. 0,2."),
    kv_len: int | None = typer.Option(None, "--kv-len", help="Cross-attention key/value length."),
    kv_heads: int | None = typer.Option(None, "--kv-heads", help="Key/value heads (GQA)."),
    impls: str = typer.Option("manual,einops,fused-qkv,torch,sdpa", "--impls",
                              help="Comma-separated implementations to run."),
    diff: tuple[str, str] | None = typer.Option((None, None), "--diff", metavar="A B",
                                                   help="Show the op-by-op difference between two implementations."),
    backward: bool = typer.Option(False, "--backward", help="Also run each one's backward of the output's sum: "
                                  "what autograd keeps, and the input's gradient against the reference's."),
    json_out: bool = typer.Option(False, "--json", help="Print the rows as JSON."),
    width: int | None = width_option(),
    device: str = typer.Option(DEFAULT_DEVICE, "--device", help=DEVICE_HELP),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """Every implementation on the same weights and input, side by side.

    Runs manual, einops, fused-qkv, torch and sdpa on the same weights and input: ops, views,
    copies, bytes, and how far each output is from the reference; --diff A B compares two op by op.
    """
    with guarded(traceback):
        from shapetrace.app.compare import TOLERANCE, check_impls, compare_impls, diff_events, parse_impls
        from shapetrace.attention.notes import header

        names = parse_impls(impls)
        pair = [d for d in (diff or ()) if d]
        if len(pair) == 1 or not pair and any(d is not None for d in diff or ()):   # (--diff sdpa '')
            raise UsageError(f"--diff needs two implementations, e.g. --diff manual {pair[0] if pair else 'sdpa'}")
        if len(pair) == 2 and pair[0] == pair[1]:   # (an implementation against itself differs nowhere)
            other = "manual" if pair[0] != "manual" else "sdpa"
            raise UsageError(f"--diff needs two different implementations, e.g. --diff {other} {pair[0]}")
        if pair:
            check_impls(pair)
            names += [p for p in pair if p not in names]
        config = AttentionConfig(d_model=d_model, heads=heads, batch=batch, seq_len=seq_len, seed=seed,
                                 causal=causal, mask=mask, pad=parse_pad(pad), kv_len=kv_len, kv_heads=kv_heads)
        rows, device = compare_impls(config, names, device=device, backward=backward)
        by_name = {r.impl: r for r in rows}
        if pair and any(by_name[p].skipped for p in pair):
            raise UsageError(f"--diff {' '.join(pair)}: " + "; ".join(
                f"{p} {by_name[p].skipped}" for p in pair if by_name[p].skipped))
        if json_out:
            write_json(json.dumps({"device": device, "rows": [r.to_dict() for r in rows]}, indent=2))
        else:
            from shapetrace.render.compare import print_comparison, print_diff

            console = out_console(width)
            lines = header(config)
            lines[0] = lines[0].replace(" · impl manual", " · every implementation")
            print_comparison(rows, device, lines, console)
            if pair:
                a, b = by_name[pair[0]].trace.events, by_name[pair[1]].trace.events
                print_diff(diff_events(a, b), pair[0], pair[1], console)
        if any(r.agrees is False or r.dx_diff is not None and r.dx_diff > TOLERANCE for r in rows):
            raise typer.Exit(1)
