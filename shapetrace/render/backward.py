"""The backward pass as Rich text: one block per forward op in the order autograd ran it, then what
autograd kept for it (:class:`~shapetrace.engine.backward.rows.BackwardReport`).

Each block starts with the forward table's columns for the gradient that arrived (``grad #10 matmul``,
the shape with the forward tensor's names, strides, bytes), then one line per gradient it sent back
(to an operand, or into a parameter's ``.grad``) with its memory word, then the registry's sentence.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from shapetrace.app.classroom import ViewOptions, names_for, spell_long
from shapetrace.engine.formatting import fmt_bytes, fmt_named
from shapetrace.render.table import join_cells
from shapetrace.render.wrap import wrap

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.app.backward_folding import GradFold
    from shapetrace.engine.backward.rows import BackwardReport, BackwardRow, GradInfo, SavedInfo
    from shapetrace.engine.events import Event
    from shapetrace.engine.report import Report

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


def made_lines(g: GradInfo, indent: int, width: int) -> list[Text]:
    """:func:`made_line`, or where it is wider than ``width`` (long names at 80 columns), the same words
    wrapped under its own indent, never from column 0."""
    line = made_line(g, indent)
    if line.cell_len <= width:
        return [line]
    parts = wrap(line.plain[indent:], max(width - indent - 2, 20))
    return [Text(" " * (indent if i == 0 else indent + 2) + part) for i, part in enumerate(parts)]


class BackwardView:
    """A renderable of the backward rows and the saved-tensor summary.

    With ``events`` (the forward's ops) and ``fold``, repeated rows show as one line each, as the forward's
    table folds its ops (:func:`~shapetrace.app.backward_folding.fold_backward`); ``keep``: forward op
    numbers whose rows are always shown (diagnosed ones).
    """

    def __init__(self, backward: BackwardReport, doubled: BackwardReport | None = None, doubled_t: int = 0,
                 rows: bool = True, events: Sequence[Event] = (), fold: bool = False, keep: Collection[int] = ()):
        self.backward, self.doubled, self.doubled_t, self.rows = backward, doubled, doubled_t, rows
        self.events, self.fold, self.keep = events, fold, keep

    @classmethod
    def of(cls, report: Report, options: ViewOptions = ViewOptions(),
           doubled: tuple[int, BackwardReport] | None = None, rows: bool = True) -> BackwardView:
        """The backward of a traced run as its forward table is shown: folded (not with ``--all``), with
        the forward's long axis names (``--long-names``)."""
        t, twice = doubled or (0, None)
        keep = {d.event for d in report.diagnostics if d.event is not None}
        long_names = names_for(report, options)
        backward = spelled_long(report.backward, long_names) if long_names else report.backward
        return cls(backward, twice, t, rows, report.events, options.fold, keep)

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

    def folds(self) -> dict[int, GradFold]:
        """The first row's order of each fold -> the fold (none unless ``fold`` and ``events``)."""
        if not self.fold or not self.events:
            return {}
        from shapetrace.app.backward_folding import fold_backward

        return {f.rows[0].order: f for f in fold_backward(self.backward.rows, self.events, self.keep)}

    def items(self) -> list[BackwardRow | GradFold]:
        """What the table shows, in order: each row, or the fold that stands for it (once)."""
        folds = self.folds()
        folded = {r.order for f in folds.values() for r in f.rows}
        return [folds.get(r.order, r) for r in self.backward.rows
                if r.arrived and (r.order not in folded or r.order in folds)]

    def _rows(self, width: int):
        folds = self.folds()
        folded = {r.order for f in folds.values() for r in f.rows}
        shown = [r for r in self.backward.rows if r.arrived and (r.order not in folded or r.order in folds)]
        cells = [arrived_cells(r) for r in shown if r.order not in folds]
        widths = [max((c[i].cell_len for c in cells), default=0) for i in range(5)]
        widths[0] = max([widths[0], *(len(f.label) for f in folds.values())])
        if sum(widths) + 2 * 4 > width:   # (too narrow for the strides: left out of the arrived line)
            cells, widths = [c[:3] + c[4:] for c in cells], widths[:3] + widths[4:]
        lines = iter(cells)
        for row in shown:
            if row.order in folds:
                yield from fold_lines(folds[row.order], widths[0], width)
            else:
                yield from block_lines(row, next(lines), widths, width)


def block_lines(row: BackwardRow, cells: list[Text], widths: list[int], width: int):
    """One row's block: the gradient that arrived (``cells`` at ``widths``), each one sent back, the sentence."""
    indent = widths[0] + 2
    yield join_cells(cells, widths)
    for g in row.made:
        yield from made_lines(g, indent, width)
    if row.sentence:
        for part in wrap(row.sentence, width - indent):
            yield Text(" " * indent + part, style="dim")


def row_lines(row: BackwardRow, width: int) -> list[Text]:
    """One row's block on its own (step mode's screen), its columns as wide as its own cells."""
    cells = arrived_cells(row)
    widths = [c.cell_len for c in cells]
    if sum(widths) + 2 * 4 > width:
        cells, widths = cells[:3] + cells[4:], widths[:3] + widths[4:]
    return list(block_lines(row, cells, widths, width))


def fold_lines(fold: GradFold, label_width: int, width: int):
    """``15-16  grad #2 transpose, #1 view · q: the same two grads as v, rows 9-10`` (a short block names
    the forward ops its rows differentiate; a folded layer says which); wrapped under its own indent."""
    indent = label_width + 2
    ops = fold_ops(fold)
    parts = wrap(f"{ops} · {fold.sentence}" if ops else fold.sentence, max(width - indent, 20))
    yield Text.assemble((fold.label.rjust(label_width), "dim"), "  ", (parts[0], "italic cyan"))
    for part in parts[1:]:
        yield Text(" " * indent + part, style="italic cyan")


def fold_ops(fold: GradFold) -> str:
    """``grad #2 transpose, #1 view`` for a block of up to three rows; "" for a longer one (a layer)."""
    if len(fold.rows) > 3:
        return ""
    return "grad " + ", ".join(f"#{r.event} {r.op}" if r.event is not None else f"({r.op})" for r in fold.rows)


def saved_summary(b: BackwardReport, doubled: BackwardReport | None, doubled_t: int) -> list[str]:
    """What autograd keeps, in sentences: the total, the attention weights' share, the same model at 2T."""
    if not b.saved:
        return []
    storages = sum(s.shares_with is None for s in b.saved)
    lines = [f"autograd keeps {len(b.saved)} tensors for the backward: {fmt_bytes(b.saved_bytes)} in "
             f"{storages} storages ({fmt_bytes(b.activation_bytes)} of them not parameters)",
             f"attention weights: {fmt_bytes(b.weights_bytes)}, "
             f"{_share(b.weights_bytes, b.activation_bytes)} of what is not parameters"]
    if doubled is not None and doubled.saved:
        lines.append(f"at T={doubled_t} (2T): {fmt_bytes(doubled.activation_bytes)} not parameters "
                     f"(×{doubled.activation_bytes / max(b.activation_bytes, 1):.1f}), attention weights "
                     f"{fmt_bytes(doubled.weights_bytes)} (×{doubled.weights_bytes / max(b.weights_bytes, 1):.1f}), "
                     f"{_share(doubled.weights_bytes, doubled.activation_bytes)}")
    return lines


def saved_cells(s: SavedInfo) -> tuple[str, str, str]:
    """One saved tensor: ``#11 softmax``, its shape with names, ``2.2 KiB`` or ``view of saved 5``."""
    where = f"#{s.event} {s.op}" if s.event is not None else f"({s.op})"
    tail = f"view of saved {s.shares_with}" if s.shares_with is not None else fmt_bytes(s.storage_bytes)
    if s.parameter:
        tail += ", a parameter"
    return where, fmt_named(s.dims, s.shape), tail


def saved_lines(b: BackwardReport, doubled: BackwardReport | None, doubled_t: int, width: int):
    """What autograd keeps: the total, the activations, the attention weights' share, the same at 2T."""
    for i, line in enumerate(saved_summary(b, doubled, doubled_t)):
        yield from _hanging(line, 0 if i == 0 else 2, width, "bold" if i == 0 else "")
    for s in b.saved:
        where, shape, tail = saved_cells(s)
        yield Text.assemble(f"  {s.index:>2} ", (where, "magenta"), f"  {s.saver}  ", shape, "  ", (tail, "dim"))


def _hanging(line: str, indent: int, width: int, style: str = ""):
    """``line`` wrapped to ``width`` at ``indent`` spaces, its continuation lines two spaces further in."""
    first = wrap(line, max(width - indent, 20))[0]
    left = line[len(first):].strip()
    yield Text(" " * indent + first, style=style)
    for part in wrap(left, max(width - indent - 2, 20)) if left else []:
        yield Text(" " * (indent + 2) + part, style=style)


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "0%"


def spelled_long(backward: BackwardReport, long_names: dict[str, str]) -> BackwardReport:
    """The backward with its axis names spelled as ``--long-names`` spells the forward's (``batch``)."""
    def grad(g):
        return replace(g, dims=tuple(long_names.get(d, d) if d else d for d in g.dims))

    rows = tuple(replace(r, arrived=tuple(map(grad, r.arrived)), made=tuple(map(grad, r.made)),
                         sentence=spell_long(r.sentence, long_names)) for r in backward.rows)
    saved = tuple(replace(s, dims=tuple(long_names.get(d, d) if d else d for d in s.dims)) for s in backward.saved)
    return replace(backward, rows=rows, params=tuple(map(grad, backward.params)), saved=saved)


def print_backward(console: Console, report: Report, options: ViewOptions = ViewOptions(),
                   doubled: tuple[int, BackwardReport] | None = None) -> None:
    """Print the backward after the forward's table, as the forward is shown (folded, long names)."""
    console.print()
    console.print(BackwardView.of(report, options, doubled))
