"""Rendering of variant runs: the trace, notes, heat map, and a broken run next to the reference."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rich.console import Console
from rich.padding import Padding
from rich.text import Text

from shapetrace.engine.ops import Family
from shapetrace.render.heatmap import HeatMap

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.app.session import VariantRun


def print_variant_extras(run: VariantRun, console: Console) -> None:
    """What a variant run adds below the table: the exception, notes, heat map, broken block."""
    trace = run.trace
    if trace.exception is not None:
        console.print(Text.assemble(("\nthe forward pass raised: ", "bold red"),
                                    f"{type(trace.exception).__name__}: {str(trace.exception).splitlines()[0]}"))
    for note in run.notes:
        console.print(Text.assemble(("\ni ", "cyan"), note))
    if run.heat is not None:
        console.print(heat_view(run))
    if run.config.broken:
        console.print(broken_block(run))
        examples = leak_examples(run)
        if examples is not None:
            console.print(examples)


def heat_view(run: VariantRun) -> HeatMap:
    """The heat map, labelled with the names the tracer gave the weights' axes (which, in a
    broken run, may not be batch, head, query and key at all)."""
    c = run.config
    masked_run = bool(c.causal or c.mask != "none")
    soft = [e for e in run.trace.events
            if e.spec.family is Family.SOFTMAX and e.output is not None and len(e.output.shape) == 4]
    if not soft:
        return HeatMap(run.heat, c.q_name, c.k_name, masked_run=masked_run)
    o = soft[-1].output
    names = [(n or "?").replace("*", "·") for n in o.dims]
    lead = ("sequence" if names[0] == "B" else names[0], "head" if names[1] == "H" else names[1])
    roles = [a.role for a in o.axes[2:]] == ["query", "key"]
    return HeatMap(run.heat, names[2], names[3], lead, roles, masked_run=masked_run)


def broken_block(run: VariantRun) -> Text:
    """What the bug is, why it is wrong, and what it changes compared with the reference."""
    from shapetrace.attention.catalogue import BREAKS
    from shapetrace.engine.findings import leak_summary

    brk = BREAKS[run.config.broken]
    text = Text.assemble(("\nthe bug: ", "bold"), brk.summary, ("\nwhy it is wrong: ", "bold"), brk.why)
    cmp = run.comparison
    if cmp is None:
        text.append("\nbroken vs reference: not compared (no values on the meta device)", style="dim")
        return text
    text.append("\nbroken vs reference (same weights, same input): ", style="bold")
    if cmp.get("raised"):
        return text.append(f"the broken model raises {cmp['raised'].split(':')[0]} (above); the reference runs.")
    if cmp["shape"] != cmp["ref_shape"]:
        return text.append(f"output {list(cmp['shape'])} instead of {list(cmp['ref_shape'])}.")
    diff = cmp["max_diff"]
    text.append(f"max |difference| {diff:.3g}" if not math.isnan(diff) else "no finite values to compare")
    if cmp.get("nan_rows"):
        text.append(f"; {cmp['nan_rows']} output rows are NaN", style="bold red")
    leaks = cmp.get("leaks")
    if leaks is None and cmp.get("leak_note"):
        text.append(f"; {cmp['leak_note']}", style="dim")
    elif leaks is None:
        text.append("; leak test skipped (too many tokens: one forward pass per token)", style="dim")
    elif not leaks:
        text.append("; no token reaches an output the reference keeps it away from"
                    + (" (add --causal to see future tokens leak)" if not run.config.causal else ""))
    else:
        s = leak_summary(leaks)
        text.append(f"\nleaked: {s['total']} (input token -> output token) links the reference does not have",
                    style="bold red")
        if s["cross_sequence"]:
            text.append(f"; {s['cross_sequence']} across sequences of the batch")
        if s["from_later"]:
            text.append(f"; {s['from_later']} from later tokens into earlier ones")
        text.append("; for example:")
    return text


def leak_examples(run: VariantRun) -> Padding | None:
    """A few leaked links (``b0 t2 -> b0 t1``) in columns, so that no link is split across lines."""
    from rich.columns import Columns

    from shapetrace.engine.findings import leak_summary

    leaks = (run.comparison or {}).get("leaks")
    if not leaks:
        return None
    return Padding(Columns(leak_summary(leaks)["examples"], padding=(0, 3)), (0, 0, 0, 2))


def print_catalogue(console: Console) -> None:
    """``--break list``: every classic bug, its mistake and the diagnostic that catches it; then the
    bugs that exist only as broken functions (the mutants of the test-writing exercises)."""
    from shapetrace.attention.catalogue import CATALOGUE

    console.print(Text("The catalogue of classic attention bugs (shapetrace run --break NAME):", style="bold"))
    for b in CATALOGUE.values():
        if b.model:
            catches = " or ".join(b.kinds)
            console.print(Text.assemble(("\n" + b.name, "bold magenta"), f"  {b.summary}",
                                        (f"\n  caught as: {b.severity} {catches}", "dim"), _shape_line(b),
                                        _functions_line(b)))
    console.print(Text("\nBroken functions only (not --break runs; the exercises' tests are graded "
                       "against them):", style="bold"))
    for b in CATALOGUE.values():
        if not b.model:
            console.print(Text.assemble(("\n" + b.name, "bold magenta"), f"  {b.summary}",
                                        _functions_line(b)))


def _shape_line(b) -> Text:
    """``runs with: --decode 2`` for a bug of a decode or image run (added when not given)."""
    if b.shape == "attention":
        return Text("")
    given = " ".join(f"--{k} {v}" for k, v in b.forces.items())
    kernel = "; written with scaled_dot_product_attention" if b.impl == "sdpa" else ""
    return Text(f"\n  runs with: {given} (added when not given){kernel}", style="dim")


def _functions_line(b) -> Text:
    if not b.functions:
        return Text("")
    names = ", ".join(dict.fromkeys(f.function for f in b.functions))
    return Text(f"\n  broken function{'s' if ',' in names else ''}: {names}", style="dim")
