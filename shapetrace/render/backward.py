"""The backward pass as Rich text: one block per forward op in the order autograd ran it, then what
autograd kept for it (:class:`~shapetrace.engine.backward.rows.BackwardReport`).

Each block starts with the forward table's columns for the gradient that arrived (``grad #10 matmul``,
the shape with the forward tensor's names, strides, bytes), then one line per gradient it sent back
(to an operand, or into a parameter's ``.grad``) with its memory word, then the registry's sentence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from shapetrace.engine.formatting import fmt_bytes, fmt_named
from shapetrace.render.table import join_cells
from shapetrace.render.wrap import wrap

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.backward.rows import BackwardReport, BackwardRow, GradInfo

#: how a gradient sent back relates to the one that arrived
MEMORY_WORDS = {"same": "the same tensor", "view": "view", "new": "new"}
MEMORY_STYLES = {"same": "green", "view": "green", "new": "blue"}


def grad_label(row: BackwardRow) -> str:
    """``grad #10 matmul``; ``grad (div)`` for a call without a forward row."""
    return f"grad #{row.event} {row.op}" if row.event is not None else f"grad ({row.op})"


def _strides(g: GradInfo) -> Text:
    return Text("(" + ", ".join(map(str, g.stride)) + ")", style="dim")


def arrived_cells(row: BackwardRow) -> list[Text]:
    g = row.arrived[0]
    return [Text(str(row.order), style="dim"), Text(grad_label(row), style="bold magenta"),
            Text(fmt_named(g.dims, g.shape)), _strides(g), Text(fmt_bytes(g.nbytes), style="dim")]


def made_line(g: GradInfo, indent: int) -> Text:
    """``→ operand 0  [B=2, H=8, T=6, d_k=64]  (3072, 64, 512, 1)  view``"""
    word = MEMORY_WORDS.get(g.memory, g.memory)
    if g.memory == "new":
        word += f" {fmt_bytes(g.nbytes)}"
    return Text.assemble(" " * indent, ("→ ", "dim"), (g.of, "bold"), "  ", fmt_named(g.dims, g.shape), "  ",
                         _strides(g), "  ", (word, MEMORY_STYLES.get(g.memory, "")))


class BackwardView:
    """A renderable of the backward rows and the saved-tensor summary."""

    def __init__(self, backward: BackwardReport, doubled: BackwardReport | None = None, doubled_t: int = 0,
                 rows: bool = True):
        self.backward, self.doubled, self.doubled_t, self.rows = backward, doubled, doubled_t, rows

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        b = self.backward
        yield Text("backward pass (in the order autograd ran it)", style="bold")
        if b.note:
            yield Text(b.note, style="yellow")
        if self.rows:
            yield from self._rows(width)
        yield Text("")
        yield from saved_lines(b, self.doubled, self.doubled_t, width)

    def _rows(self, width: int):
        shown = [r for r in self.backward.rows if r.arrived]
        cells = [arrived_cells(r) for r in shown]
        widths = [max((c[i].cell_len for c in cells), default=0) for i in range(5)]
        if sum(widths) + 2 * 4 > width:   # (too narrow for the strides: left out of the arrived line)
            cells, widths = [c[:3] + c[4:] for c in cells], widths[:3] + widths[4:]
        indent = widths[0] + 2
        for row, line in zip(shown, cells):
            yield join_cells(line, widths)
            for g in row.made:
                yield made_line(g, indent)
            if row.sentence:
                for part in wrap(row.sentence, width - indent):
                    yield Text(" " * indent + part, style="dim")


def saved_lines(b: BackwardReport, doubled: BackwardReport | None, doubled_t: int, width: int):
    """What autograd keeps: the total, the activations, the attention weights' share, the same at 2T."""
    if not b.saved:
        return
    storages = sum(s.shares_with is None for s in b.saved)
    yield from _hanging(f"autograd keeps {len(b.saved)} tensors for the backward: {fmt_bytes(b.saved_bytes)} in "
                        f"{storages} storages ({fmt_bytes(b.activation_bytes)} of them not parameters)", 0, width,
                        "bold")
    yield from _hanging(f"attention weights: {fmt_bytes(b.weights_bytes)}, "
                        f"{_share(b.weights_bytes, b.activation_bytes)} of what is not parameters", 2, width)
    if doubled is not None and doubled.saved:
        yield from _hanging(
            f"at T={doubled_t} (2T): {fmt_bytes(doubled.activation_bytes)} not parameters "
            f"(×{doubled.activation_bytes / max(b.activation_bytes, 1):.1f}), attention weights "
            f"{fmt_bytes(doubled.weights_bytes)} (×{doubled.weights_bytes / max(b.weights_bytes, 1):.1f}), "
            f"{_share(doubled.weights_bytes, doubled.activation_bytes)}", 2, width)
    for s in b.saved:
        where = f"#{s.event} {s.op}" if s.event is not None else f"({s.op})"
        tail = f"view of saved {s.shares_with}" if s.shares_with is not None else fmt_bytes(s.storage_bytes)
        if s.parameter:
            tail += ", a parameter"
        yield Text.assemble(f"  {s.index:>2} ", (where, "magenta"), f"  {s.saver}  ",
                            fmt_named(s.dims, s.shape), "  ", (tail, "dim"))


def _hanging(line: str, indent: int, width: int, style: str = ""):
    """``line`` wrapped to ``width`` at ``indent`` spaces, its continuation lines two spaces further in."""
    first = wrap(line, max(width - indent, 20))[0]
    left = line[len(first):].strip()
    yield Text(" " * indent + first, style=style)
    for part in wrap(left, max(width - indent - 2, 20)) if left else []:
        yield Text(" " * (indent + 2) + part, style=style)


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "0%"


def print_backward(console: Console, backward: BackwardReport, doubled: BackwardReport | None = None,
                   doubled_t: int = 0) -> None:
    """Print the backward after the forward's table."""
    console.print()
    console.print(BackwardView(backward, doubled, doubled_t))

