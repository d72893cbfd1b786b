"""Rendering for ``shapetrace compare``: one row per implementation, and an op-by-op diff."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from shapetrace.engine.formatting import fmt_bytes, fmt_shape
from shapetrace.render.indent import Hanging

TAG_STYLE = {"same": "dim", "changed": "yellow", "only-a": "red", "only-b": "green"}
TAG_MARK = {"same": " ", "changed": "~", "only-a": "-", "only-b": "+"}


def impl_table(rows: Sequence, device: str) -> Table:
    """ops, views, copies, bytes copied, computed bytes, max |diff| from the reference."""
    from shapetrace.app.compare import TOLERANCE

    table = Table(title=None, box=None, header_style="bold", pad_edge=False)
    for col, just in (("impl", "left"), ("ops", "right"), ("views", "right"), ("copies", "right"),
                      ("copied", "right"), ("computed", "right"), ("max |diff| vs manual", "right")):
        table.add_column(col, justify=just)
    for r in rows:
        if r.skipped:
            continue
        if r.max_diff is None:
            diff = Text("no values (meta)", style="dim")
        else:
            ok = r.max_diff <= TOLERANCE
            diff = Text(f"{r.max_diff:.1e} {'✓' if ok else '✗'}", style="green" if ok else "bold red")
        table.add_row(Text(r.impl, style="bold magenta"), str(r.ops), str(r.views), str(r.copies),
                      fmt_bytes(r.copy_bytes), fmt_bytes(r.alloc_bytes), diff)
    return table


def backward_table(rows: Sequence) -> Table:
    """With ``--backward``: what autograd kept for each one's backward and how far its input's gradient is
    from the reference's."""
    from shapetrace.app.compare import TOLERANCE

    table = Table(title=None, box=None, header_style="bold", pad_edge=False)
    for col, just in (("backward", "left"), ("autograd keeps", "right"), ("attention weights", "right"),
                      ("max |dx diff| vs manual", "right")):
        table.add_column(col, justify=just)
    for r in rows:
        if r.skipped or r.kept_bytes is None:
            continue
        ok = r.dx_diff is not None and r.dx_diff <= TOLERANCE
        dx = Text("no gradient", style="bold red") if r.dx_diff is None else \
            Text(f"{r.dx_diff:.1e} {'✓' if ok else '✗'}", style="green" if ok else "bold red")
        table.add_row(Text(r.impl, style="bold magenta"), fmt_bytes(r.kept_bytes), fmt_bytes(r.weights_bytes), dx)
    return table


def print_comparison(rows: Sequence, device: str, header: Sequence[str], console: Console) -> None:
    from shapetrace.app.compare import TOLERANCE

    for i, line in enumerate(header):
        console.print(Text(line, style="bold" if i == 0 else "dim"))
    console.print(Text(""))
    console.print(impl_table(rows, device))
    if any(r.kept_bytes is not None for r in rows):
        console.print(Text(""))
        console.print(backward_table(rows))
        console.print(Hanging(Text("autograd keeps: the saved tensors' storages, parameters left out; dx: the "
                                   "gradient of the output's sum with respect to the input", style="dim")))
    for r in rows:
        if r.skipped:
            console.print(Text(f"{r.impl}: skipped ({r.skipped})", style="dim"))
    hidden = [f"{r.impl} {r.hidden_copies} ({fmt_bytes(r.hidden_bytes)})" for r in rows
              if not r.skipped and r.hidden_copies]
    if hidden:
        console.print(Hanging(Text("copies include torch's own, not the code's (operands a batched matmul clones "
                                   "for bmm): " + ", ".join(hidden), style="yellow")))
    checked = [r for r in rows if r.agrees is not None]
    if checked and all(r.agrees for r in checked):
        console.print(Text(""))
        console.print(Hanging(Text(f"✓ all {len(checked)} implementations agree with the reference to within "
                                   f"{TOLERANCE:g} (same weights, same input)", style="green")))
    elif checked:
        bad = ", ".join(r.impl for r in checked if not r.agrees)
        console.print(Text(""))
        console.print(Hanging(Text(f"✗ {bad} disagree with the reference by more than {TOLERANCE:g}",
                                   style="bold red")))


def print_diff(rows: Sequence, name_a: str, name_b: str, console: Console) -> None:
    """The op-by-op difference between two traces (``-`` only in A, ``+`` only in B, ``~`` changed)."""
    console.print(Text(f"\nop by op: {name_a} (-) vs {name_b} (+); ~ = same step written differently",
                       style="bold"))
    for tag, a, b in rows:
        style = TAG_STYLE[tag]
        for mark, e in ((("-" if tag != "same" else " "), a), ("+", b if tag != "same" else None)):
            if e is None:
                continue
            line = Text(f"{TAG_MARK[tag] if tag != 'changed' else mark} ", style=style)
            line.append(f"{e.op:<14}", style="bold magenta" if tag != "same" else "dim")
            line.append(f"{fmt_shape(e.output) if e.output else '':<34}", style=style)
            line.append(("view" if e.view else f"copy {fmt_bytes(e.copy_bytes)}" if e.copy_bytes
                         else f"new {fmt_bytes(e.alloc_bytes)}").ljust(14), style=style)
            line.append(e.code.split("  #")[0].strip()[:60], style="dim")
            console.print(line, overflow="ellipsis", no_wrap=True)
    counts = {t: sum(1 for r in rows if r[0] == t) for t in TAG_MARK}
    console.print(Text(f"{counts['same']} same · {counts['changed']} written differently · "
                       f"{counts['only-a']} only in {name_a} · {counts['only-b']} only in {name_b}", style="dim"))
