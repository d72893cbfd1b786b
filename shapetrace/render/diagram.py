"""Memory-stride diagrams: Rich renderables drawn from :class:`shapetrace.engine.layout.Layout`.

Each block of the storage strip shows a letter (the colour key: ``A`` = head 0,
``B`` = head 1, ...) and the logical index living there (``0,3,2,:`` is
``x[0, 3, 2, :]``), on a colour-blind-safe background (Okabe–Ito palette). The
letters carry the key on their own, so the strip reads the same with
``NO_COLOR`` or without colour vision.

Public API: :func:`tensor_diagram` and :func:`event_diagram`; the lines of a
diagram are also available as :class:`LayoutView`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.constrain import Constrain
from rich.table import Table
from rich.text import Text

from shapetrace.engine.formatting import fmt_bytes, fmt_shape
from shapetrace.engine.layout import Block, Elided, Layout
from shapetrace.engine.ops import Family, moves_layout
from shapetrace.errors import UsageError
from shapetrace.render.indent import Indent
from shapetrace.render.phrases import Phrases

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import Event, TensorInfo
    from shapetrace.engine.report import Report

#: Okabe–Ito colours (safe for the common forms of colour blindness), with a readable text colour.
#: Text colours are absolute (a theme's "white" is grey on paper) and pass WCAG AA on their block: white on
#: the blue (5.2:1), black on the others (the vermilion: 5.4:1; white there reads at 3.9:1).
PALETTE = (("#E69F00", "#000000"), ("#56B4E9", "#000000"), ("#009E73", "#000000"), ("#F0E442", "#000000"),
           ("#0072B2", "#ffffff"), ("#D55E00", "#000000"), ("#CC79A7", "#000000"), ("#999999", "#000000"))
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LABEL_W = 8


def letter(key: int) -> str:
    """The letter for key value ``key`` (A, B, ... Z, then again)."""
    return LETTERS[key % len(LETTERS)]


def key_style(key: int) -> str:
    bg, fg = PALETTE[key % len(PALETTE)]
    return f"{fg} on {bg}"


def layout_of(info: TensorInfo, heads: int | None = None, key: str | None = None) -> Layout:
    """The :class:`Layout` of a traced tensor."""
    dims = [n.replace("*", "·") if n else None for n in info.dims]
    return Layout(info.shape, info.stride, info.storage_offset, dims, heads=heads, key=key,
                  contiguous=info.contiguous, dtype=info.dtype)


class LayoutView:
    """The lines of one diagram: axes, storage strip, walk and reason.

    Args:
        layout: what to draw.
        width: at most this many columns (the console's width if smaller).
        rows: strip rows at most (the middle is elided with ``…``).
        title: an optional first line.
        parts: which sections to draw (``axes``, ``memory``, ``walk``, ``why``).
    """

    def __init__(self, layout: Layout, width: int = 100, rows: int = 4, title: Text | Phrases | None = None,
                 parts: Sequence[str] = ("axes", "memory", "walk", "why"), label: str = "memory"):
        self.layout, self.width, self.rows, self.title, self.parts = layout, width, rows, title, tuple(parts)
        self.label = label

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = min(self.width, options.max_width)
        if self.title is not None:
            yield self.title
        grid = Table.grid(padding=(0, 1))
        grid.add_column(width=LABEL_W - 1, no_wrap=True, style="bold")
        grid.add_column(max_width=width - LABEL_W)
        for name, content in self.sections(width - LABEL_W):
            grid.add_row(name, content)
        yield Indent(Constrain(grid, width))

    def sections(self, width: int) -> list[tuple[str, Text | Phrases]]:
        """(field name, content) rows for the parts asked for."""
        rows: list[tuple[str, Text | Phrases]] = []
        if "axes" in self.parts:
            rows.append(("axes", self._axes_line()))
        if "memory" in self.parts:
            rows += self._memory(width)
        elif "strip" in self.parts and self.layout.n_blocks and not self.layout.irregular:
            strip = strip_rows(self.layout, width, self.rows)
            rows += [(self.label if n == 0 else "", row) for n, row in enumerate(strip)]
        walk = self.layout.walk()
        if {"walk", "why"} <= set(self.parts) and self.layout.contiguous and walk.smooth and walk.steps:
            offset = f" (from offset {self.layout.offset:,})" if self.layout.offset else ""
            return rows + [("walk", Text(f"contiguous{offset}, {walk.text()}", style="green"))]
        if "walk" in self.parts:
            rows.append(("walk", self._walk_line()))
        if "why" in self.parts:
            rows.append(("why", self._why_line()))
        return rows

    # -- sections ----------------------------------------------------------
    def _axes_line(self) -> Phrases:
        """``B=2 · stride 3,072   T=6 · stride 512``: an axis never apart from its stride."""
        return Phrases([("   " if n else "", Text(f"{a.name}={a.size:,}", style="bold").append(
            f" · stride {a.stride:,}", style="dim")) for n, a in enumerate(self.layout.axes)])

    def _memory(self, width: int) -> list[tuple[str, Text]]:
        lay = self.layout
        if lay.irregular:
            return [("memory", Text("strides overlap: several indices share addresses; no strip drawn"))]
        if lay.n_blocks == 0:
            return [("memory", Text("empty tensor: nothing stored"))]
        rows = [(self.label, Text(self._memory_caption()))]
        return rows + [("", row) for row in strip_rows(lay, width, self.rows)]

    def _memory_caption(self) -> str:
        lay = self.layout
        run = lay.run_dim
        what = f"{lay.block_len:,} {lay.unit}" if lay.block_len > 1 else "1 element"
        if run is None:
            each = ""
        elif lay.pieces > 1:
            each = f" (one head's slice of {lay.names[run]} each)"
        else:
            each = f" (one {lay.names[run]} row each)"
        text = f"{lay.n_blocks:,} blocks of {what}{each}, in address order"
        if lay.key_name is not None and lay.key_count > 1:
            last = letter(lay.key_count - 1) if lay.key_count <= len(LETTERS) else "Z…"
            text += f"; letter/colour = {lay.key_name} (A=0 … {last}={lay.key_count - 1})"
        gaps = lay.gaps()
        if gaps:
            text += f"; ┆ = {', '.join(f'{g:,}' for g in gaps)} unused {lay.unit} skipped"
        return text

    def _walk_line(self) -> Text:
        walk = self.layout.walk()
        line = Text()
        if self.layout.numel == 0:
            return line.append("nothing to read")
        if not walk.steps:
            return line.append(f"a single {walk.unit}")
        if not walk.smooth:
            line.append(f"logical order, one {walk.unit} at a time: ", style="dim")
        return line.append(walk.text(), style="green" if walk.smooth else "yellow")

    def _why_line(self) -> Text:
        lay = self.layout
        if lay.contiguous:
            extra = f", starting at offset {lay.offset:,}" if lay.offset else ""
            return Text(f"contiguous: row-major order with no gaps{extra}", style="green")
        return Text("not contiguous: ", style="bold yellow").append(lay.reason())


def strip_rows(lay: Layout, width: int, rows: int = 4) -> list[Text]:
    """The storage strip as rows of cells, the middle elided when it does not fit."""
    first_label, last_label = lay.block(0).label, lay.block(lay.n_blocks - 1).label
    cell_w = max(len(first_label), len(last_label)) + 2
    addr_w = max(len(f"{lay.span[1]:,}"), 1)
    fit = max(1, (width - addr_w - 2) // (cell_w + 1))
    per_row = _aligned(fit, lay)
    rows = max(rows, 3)
    if lay.n_blocks <= rows * per_row:
        items: list[Block | Elided] = list(lay.blocks())
        chunks = [items[i:i + per_row] for i in range(0, len(items), per_row)]
    else:
        head_n = (rows - 2) * per_row
        items = lay.strip(head_n, per_row)
        head, elided, tail = items[:head_n], items[head_n], items[head_n + 1:]
        chunks = [head[i:i + per_row] for i in range(0, head_n, per_row)] + [[elided], tail]
    return [_row(chunk, cell_w, addr_w) for chunk in chunks]


def _aligned(fit: int, lay: Layout) -> int:
    """Cells per row: a multiple of the key's cycle (or run) when one fits, so columns line up."""
    period = lay.period()
    for c in (period * lay.key_count, lay.key_count if lay.pieces > 1 else 0, period):
        if 1 < c <= fit:
            return c * (fit // c)
    return fit


def _row(chunk: Sequence[Block | Elided], cell_w: int, addr_w: int) -> Text:
    line = Text()
    first = chunk[0]
    if isinstance(first, Elided):
        line.append(" " * addr_w + " ")
        return line.append(f"… {first.count:,} more blocks …", style="dim italic")
    line.append(f"{first.address:>{addr_w},} ", style="dim")
    for n, block in enumerate(chunk):
        assert isinstance(block, Block)
        line.append("┆" if block.gap_before > 0 and n else "│", style="dim")
        cell = f"{letter(block.key)} {block.label}".ljust(cell_w)[:cell_w]
        line.append(cell, style=key_style(block.key))
    return line.append("│", style="dim")


# ---------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------

def tensor_title(info: TensorInfo, what: str = "") -> Phrases:
    """``[B=2, H=8, T=6, d_k=64]  strides (3072, 64, 512, 1) · not contiguous``, wrapped between its
    phrases on a narrow screen."""
    pieces = [("", Text(f"{what}  " if what else "", style="bold").append(fmt_shape(info)))]
    pieces.append(("  ", Text(f"strides ({', '.join(str(s) for s in info.stride)})", style="dim")))
    if info.storage_offset:
        pieces.append(("  ", Text(f"offset {info.storage_offset:,}", style="dim")))
    pieces.append((" · ", Text("contiguous" if info.contiguous else "not contiguous",
                               style="green" if info.contiguous else "yellow")))
    return Phrases(pieces)


def tensor_diagram(info: TensorInfo, width: int = 100, heads: int | None = None,
                   title: bool = True, rows: int = 4) -> RenderableType:
    """The diagram of one traced tensor: axes, storage strip, walk and why.

    Args:
        info: a :class:`~shapetrace.engine.events.TensorInfo` (from an event or ``strides``).
        width: columns available.
        heads: head count, to colour a ``D`` axis per head when there is no ``H`` axis.
        title: start with a line giving the shape, strides and contiguity.
        rows: storage strip rows at most.
    """
    return LayoutView(layout_of(info, heads), width, rows, tensor_title(info) if title else None)


def event_diagram(event: Event, width: int = 100, heads: int | None = None, rows: int = 4) -> RenderableType:
    """The diagram for one traced event: its output, or before/after strips for a copy.

    A failed ``view`` shows the input's layout and why the view cannot work.
    """
    out = event.output
    if event.error:
        return _failed_diagram(event, width, heads, rows)
    if event.spec.copies_inside:
        return _matmul_diagram(event, width, heads)
    if out is None:
        return Text("")
    copied = bool(event.copy_bytes) and not event.view and event.inputs
    if not copied:
        return LayoutView(layout_of(out, heads), width, rows)
    before = event.inputs[0]
    after_lay = layout_of(out, heads)
    key = after_lay.names[after_lay.key_dim] if after_lay.key_dim is not None and after_lay.pieces == 1 else None
    before_lay = layout_of(before, heads, key=key)
    verdict = Text(f"copied {fmt_bytes(event.copy_bytes)}: the same values, rewritten in the new order",
                   style="bold yellow")
    return Group(
        LayoutView(before_lay, width, rows, tensor_title(before, "before"), ("axes", "memory", "walk")),
        LayoutView(after_lay, width, rows, tensor_title(out, "after "), ("memory", "walk", "why")),
        verdict,
    )


def _matmul_diagram(event: Event, width: int, heads: int | None) -> RenderableType:
    """The copies torch makes inside a batched matmul: each operand before and after."""
    copies = event.hidden_copies
    if not copies:
        return Text("no hidden copy: both operands are already one batch of matrices in memory", style="green")
    total = sum(c.nbytes for c in copies)
    parts: list[RenderableType] = [Text(
        f"hidden {'copy' if len(copies) == 1 else 'copies'} inside matmul: {fmt_bytes(total)} the code never "
        "asked for", style="bold yellow")]
    for c in copies:
        after_lay = layout_of(c.after, heads)
        key = after_lay.names[after_lay.key_dim] if after_lay.key_dim is not None and after_lay.pieces == 1 else None
        parts.append(tensor_title(c.before, f"operand {c.operand + 1}"))
        parts.append(Text(c.reason + f" ({fmt_bytes(c.nbytes)})", style="dim"))
        parts.append(LayoutView(layout_of(c.before, heads, key=key), width, 3, None, ("strip",), "before"))
        parts.append(LayoutView(after_lay, width, 3, None, ("strip",), "after"))
    return Group(*parts)


def _failed_diagram(event: Event, width: int, heads: int | None, rows: int) -> RenderableType:
    if not event.inputs:
        return Text(event.error or "")
    info = event.inputs[0]
    parts: list[RenderableType] = [LayoutView(layout_of(info, heads), width, rows, tensor_title(info, "input"))]
    from shapetrace.engine.viewfail import explain_view_error, requested_shape

    target = requested_shape(event) if event.spec.family is Family.RESHAPE else None
    if target:
        parts.append(Text(explain_view_error(info, target)))
    return Group(*parts)


def diagram_hook(trace: Report, only: int | None = None, width: int = 100,
                 indent: int = 4) -> Callable[[Event], RenderableType | None]:
    """For ``OpTable``: a diagram under each movement op (``--diagrams``) or only record ``only``."""
    heads = trace.dims.get("H") if trace.dims else None

    def hook(event: Event) -> RenderableType | None:
        if only is not None and event.index != only:
            return None
        if only is None and not moves_layout(event.spec) and not _has_hidden_copy(event):
            return None
        return Indent(event_diagram(event, width - indent, heads), indent, bottom=1)

    return hook


def _has_hidden_copy(event: Event) -> bool:
    return bool(event.hidden_copies)


def run_diagram_hook(trace: Report, only: int | None, width: int) -> Callable[[Event], RenderableType | None]:
    """The hook for ``shapetrace run --diagrams`` / ``--diagram N`` (N checked against the trace)."""
    if only is not None and not 0 <= only < len(trace.events):
        raise UsageError(f"--diagram {only}: this trace has records 0 to {len(trace.events) - 1}")
    return diagram_hook(trace, only, width)
