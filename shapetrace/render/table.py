"""The traced forward pass as a Rich table, with header, footer and diagnostics.

Renderers take a Console argument (never a global one) so tests can render
into a StringIO at a fixed width.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.text import Text

from shapetrace.app.classroom import spell_long
from shapetrace.app.folding import Fold, fold_events
from shapetrace.app.layers import Layer, LayerFold, fold_layers, layer_path, layered, split_layers
from shapetrace.app.operands import equation, input_labels, is_matmul
from shapetrace.app.steps import StepFold, fold_steps, split_steps, step_titles
from shapetrace.engine.formatting import fmt_bytes, fmt_shape
from shapetrace.engine.ops import Family, family_of, short_name
from shapetrace.engine.sentences import annotate, memory_word
from shapetrace.engine.summary import stats
from shapetrace.render.highlight import highlight_line
from shapetrace.render.indent import Hanging
from shapetrace.render.wrap import wrap, wrap_parts

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.diagnostic import Diagnostic
    from shapetrace.engine.events import Event
    from shapetrace.engine.report import Report

SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "note": "cyan"}
SEVERITY_MARK = {"error": "✗ error", "warning": "! warning", "note": "i note"}


def _code_text(code: str, width: int) -> Text:
    code = code.split("  #")[0].rstrip()
    if len(code) > width:
        code = code[: width - 1] + "…"
    return highlight_line(code)


def shape_text(t, long_names=None) -> Text:
    """The shape with names; mixed axes (``!T*H``) in red."""
    shown = fmt_shape(t, long_names)
    text = Text(shown)
    if any(n and n.startswith("!") for n in t.dims):
        text.stylize("bold red")
    return text


def memory_text(e: Event) -> Text:
    word = memory_word(e)
    style = {"raised": "bold red", "no-op": "green", "view": "green"}.get(
        word, "bold yellow" if word.startswith("copy") else "blue")
    return Text(word, style=style)


#: The layout column: a neutral word, never the ✗ that marks errors (a strided view is normal).
LAYOUT_WORDS = {True: "contiguous", False: "strided"}


def contiguity_text(e: Event) -> Text:
    o = e.output
    if o is None:
        return Text("")
    return Text(LAYOUT_WORDS[o.contiguous], style="green" if o.contiguous else "cyan")


def stride_text(e: Event) -> Text:
    o = e.output
    if o is None:
        return Text("")
    return Text("(" + ", ".join(str(s) for s in o.stride) + ")", style="dim")


class TraceView:
    """A Rich renderable for a whole :class:`~shapetrace.engine.report.Report`."""

    def __init__(self, trace: Report, header: Sequence[str] = (), events: Sequence[Event] | None = None,
                 long_names: dict[str, str] | None = None, show_diagnostics: bool = True,
                 after_event: Callable[[Event], RenderableType | None] | None = None,
                 table: RenderableType | None = None, fold: bool = False, layers: bool = True,
                 expand_layer: int | None = None, summary: bool | None = None):
        self.trace = trace
        self.fold = fold
        self.layers = layers  # fold identical repeated layers of a whole model (h.1-11 as h.0)
        self.expand_layer = expand_layer
        self.summary = summary  # the per-module summary: None shows it for a whole model
        self.after_event = after_event
        self.table = table  # another op table (e.g. the compact one); default OpTable
        self.header = list(header)
        self.events = list(trace.events if events is None else events)
        self.long_names = long_names
        self.show_diagnostics = show_diagnostics

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.header:
            yield from header_texts(self.header, options.max_width)
            yield Text("")
        table = self.table or OpTable(self.events, self.long_names, after_event=self.after_event,
                                      fold=self.fold, diagnostics=self.trace.diagnostics, layers=self.layers,
                                      expand_layer=self.expand_layer, **extras_of(self.trace, self.events))
        yield table
        shows = isinstance(table, OpTable)
        yield Hanging(footer_text(self.trace, self.events, setup_shown=shows and bool(table.setup),
                                  unrowed_shown=shows and bool(table.unrowed)))
        if self.summary or (self.summary is None and layered(self.events)):
            from shapetrace.render.modules import ModuleSummary

            yield Text("")
            yield ModuleSummary(self.events)
        if self.show_diagnostics:
            yield from verdict_lines(self.trace)   # over every op, shown or not


def extras_of(trace: Report, events: Sequence[Event]) -> dict:
    """An :class:`OpTable`'s ``unrowed`` and ``setup`` rows for a report's table: only when the table
    shows the whole run (the calls without a row sit among its rows; a filtered table says they are left
    out)."""
    if list(events) != list(trace.events):
        return {}
    return {"unrowed": getattr(trace, "unrowed", ()), "setup": getattr(trace, "setup", ())}


def header_texts(lines: Sequence[str], width: int) -> list[Text]:
    """The title (bold) and the lines under it (dim), wrapped at their `` · `` separators."""
    return [Text(part, style="dim" if n else "bold") for n, line in enumerate(lines)
            for part in wrap_parts(line, width)]


COLUMNS = ("#", "op", "shape [names]", "strides", "memory", "layout")
#: Spaces after each column but the last: one after the right-aligned index, two elsewhere.
GAPS = (1, 2, 2, 2, 2)
#: From this many columns the strides sit in their own column; below, on a line under the code.
STRIDES_INLINE_WIDTH = 100
#: Fixed widths of the index, op, memory and layout columns; the index holds a fold's ``12-14``.
INDEX_WIDTH, OP_WIDTH, MEMORY_WIDTH, LAYOUT_WIDTH = 5, 11, 12, 10
#: At STRIDES_INLINE_WIDTH: shape and strides columns, one column short of the edge (a line that fills a
#: terminal's last column wraps on some); a wider terminal gives the shape up to SHAPE_GROWTH more.
SHAPE_WIDTH, STRIDES_WIDTH, SHAPE_GROWTH = 30, 22, 10


def fixed_widths(width: int) -> list[int]:
    """The column widths at ``width``, the same for every trace, so that every variant of one width lines
    up the same way (strides 0: on their own line). A shape too wide for its column takes the strides
    column too (its strides then go on their own line)."""
    fixed = INDEX_WIDTH + OP_WIDTH + MEMORY_WIDTH + LAYOUT_WIDTH + sum(GAPS)
    if width >= STRIDES_INLINE_WIDTH:
        shape = SHAPE_WIDTH + min(width - STRIDES_INLINE_WIDTH, SHAPE_GROWTH)
        return [INDEX_WIDTH, OP_WIDTH, shape, STRIDES_WIDTH, MEMORY_WIDTH, LAYOUT_WIDTH]
    return [INDEX_WIDTH, OP_WIDTH, width - fixed + GAPS[-1], 0, MEMORY_WIDTH, LAYOUT_WIDTH]


def fits(rows: Sequence[Sequence[Text]], labels: Sequence[str], widths: Sequence[int]) -> bool:
    """Every cell fits ``widths`` (a shape may run over the strides column)."""
    shape_room = widths[2] + (GAPS[2] + widths[3] if widths[3] else 0)
    limits = [widths[0], widths[1], shape_room, None, widths[4], widths[5]]
    return (all(len(x) <= widths[0] for x in labels)
            and all(r[i].cell_len <= limit for r in rows for i, limit in enumerate(limits) if limit is not None))


def content_widths(rows: Sequence[Sequence[Text]], labels: Sequence[str], width: int) -> list[int]:
    """Each column as wide as its header and its widest cell: for traces whose cells do not fit the fixed
    widths (long names, huge sizes); strides inline only when the row fits ``width``."""
    widths = [max([len(COLUMNS[i])] + [r[i].cell_len for r in rows]) for i in range(len(COLUMNS))]
    widths[0] = max([widths[0]] + [len(x) for x in labels])
    if width < STRIDES_INLINE_WIDTH or sum(widths) + sum(GAPS) > width:
        widths[3] = 0
    return widths


def column_widths(rows: Sequence[Sequence[Text]], labels: Sequence[str] = (), width: int = STRIDES_INLINE_WIDTH
                  ) -> list[int]:
    """The fixed widths at ``width`` when every cell fits them, else widths from the content
    (``labels``: more index cells); a strides width of 0 puts the strides on a line under each op."""
    widths = fixed_widths(width)
    return widths if fits(rows, labels, widths) else content_widths(rows, labels, width)


def row_cells(cells: Sequence[Text], widths: Sequence[int]) -> tuple[list[Text], list[int], bool]:
    """One row's cells and widths at ``widths``, and whether its strides go on a line of their own: with no
    strides column, or when the shape runs over the strides column, or when the strides are too wide."""
    if not widths[3]:
        return [*cells[:3], *cells[4:]], [*widths[:3], *widths[4:]], True
    if cells[2].cell_len > widths[2]:
        return [*cells[:3], *cells[4:]], [*widths[:2], widths[2] + GAPS[2] + widths[3], *widths[4:]], True
    if cells[3].cell_len > widths[3]:
        return [*cells[:3], Text(""), *cells[4:]], list(widths), True
    return list(cells), list(widths), False




def fact_cells(e: Event, long_names=None) -> list[Text]:
    """The aligned facts of one op: index, op, shape with names, strides, memory, contiguity."""
    return [Text(str(e.index), style="dim"), Text(short_name(e.spec), style="bold magenta"),
            shape_text(e.output, long_names) if e.output else Text(""), stride_text(e),
            memory_text(e), contiguity_text(e)]


_MEMORY_TAIL = re.compile(r";\s*new (?:buffer )?[\d.,]+ (?:B|KiB|MiB|GiB|TiB)$")


def sentence(e: Event, explain: str, long_names=None) -> str:
    """The op's sentence; a closing "new 24 KiB" is dropped, since the memory column says it, and so
    is a matmul's equation, which has its own line. Axis names spelled as ``long_names`` asks."""
    text = annotate(e, explain)
    if explain == "full":
        if is_matmul(e):
            text = text.replace(": " + equation(e).split(": ")[-1], "")
        text = _MEMORY_TAIL.sub("", text)
    return spell_long(text, long_names)


def input_lines(e: Event, long_names=None) -> list[Text]:
    """Every input of an op, labelled (``q``, ``k_t`` for a matmul), with shape and strides."""
    labels = input_labels(e)
    width = max((len(x) for x in labels), default=0)
    return [Text.assemble((f"{label:<{width}}  ", "dim"), shape_text(t, long_names),
                          ("  strides (" + ", ".join(map(str, t.stride)) + ")", "dim"))
            for label, t in zip(labels, e.inputs)]


def input_cells(t, long_names=None) -> list[Text]:
    """The row for the traced input: what the first op starts from."""
    return [Text("in", style="dim"), Text("input", style="bold"), shape_text(t, long_names),
            Text("(" + ", ".join(str(s) for s in t.stride) + ")", style="dim"),
            Text(fmt_bytes(t.nbytes) if t.nbytes else "", style="dim"),
            Text(LAYOUT_WORDS[t.contiguous], style="green" if t.contiguous else "cyan")]


def fold_label(fold: Fold | LayerFold | StepFold) -> str:
    """The op numbers a folded line stands for: ``12-959``, or ``11`` for one op."""
    first, last = fold.events[0].index, fold.events[-1].index
    return f"{first}" if first == last else f"{first}-{last}"


def fold_cells(fold: Fold | LayerFold | StepFold, widths: Sequence[int]) -> Text:
    """``4-5  view, transpose  k: the same two ops as q, #1-#2``: one line for a repeated block;
    ``22-85  layers.1-3: the same 21 ops as layers.0`` for repeated layers; ``39-76  steps 2-3: the same
    19 ops as step 1, the cache one token longer each step: T+2, T+3`` for decode steps."""
    line = Text(fold_label(fold).rjust(widths[0]), style="dim")
    line.append(" " * GAPS[0])
    if isinstance(fold, (LayerFold, StepFold)):
        return line.append(fold.sentence, style="italic cyan")
    once = fold.events[:len(fold.events) // fold.times]  # a loop's iterations: the ops of one
    line.append(", ".join(e.op for e in once), style="magenta")
    line.append("  ")
    line.append(fold.sentence, style="italic dim")
    return line


def join_cells(cells: Sequence[Text], widths: Sequence[int], first_gap: int = 2) -> Text:
    """The cells padded to ``widths`` (the first right-aligned), ``first_gap`` spaces after the first, two
    after the others."""
    line = Text()
    for i, (cell, w) in enumerate(zip(cells, widths)):
        cell = cell.copy()
        if i == 0:
            cell.pad_left(w - cell.cell_len)
        elif i < len(cells) - 1:
            cell.pad_right(w - cell.cell_len)
        line.append_text(cell)
        if i < len(cells) - 1:
            line.append(" " * (first_gap if i == 0 else 2))
    line.rstrip()  # empty last cells (a failed op) leave no trailing spaces
    return line


class OpTable:
    """One block per op: an aligned line of facts, then the source line and what happens.

    With ``fold``, a block of ops that repeats an earlier block exactly (k and v split like q)
    shows as one line naming the ops it repeats, and the traced input gets its own first row.
    """

    def __init__(self, events: Sequence[Event], long_names=None, explain: str = "full",
                 after_event: Callable[[Event], RenderableType | None] | None = None,
                 fold: bool = False, diagnostics: Sequence[Diagnostic] = (), layers: bool = False,
                 expand_layer: int | None = None, steps: Sequence[int] = (), compact: bool = False,
                 unrowed: Sequence[Event] = (), setup: Sequence[Event] = ()):
        self.events = list(events)
        self.unrowed = list(unrowed)  # --all: the calls without a number of their own, each shown before its row
        self.setup = list(setup)  # the ops that built the model: a section of their own, folded unless --all
        self.steps = list(steps)  # a decode run: the op index where each step begins
        self.compact = compact  # no strides and no layout column (narrow or zoomed terminals)
        self.sections = layered(self.events) or bool(self.steps)  # a title line where each layer (step) begins
        self.layers = layers and self.sections  # fold identical repeated layers
        self.expand_layer = expand_layer
        self.after_event = after_event  # optional: something to draw under an event's block
        self.long_names = long_names
        self.explain = explain
        self.fold = fold
        self.diagnostics = list(diagnostics)

    def _folds(self) -> dict[int, Fold | LayerFold | StepFold]:
        if self.after_event is not None:
            return {}
        flagged = {d.event for d in self.diagnostics if d.event is not None}
        folds: dict[int, Fold | LayerFold | StepFold] = {}
        if self.steps and self.fold:
            folds.update((f.events[0].index, f) for f in fold_steps(self.events, self.steps, flagged))
        if self.layers:
            folds.update((f.events[0].index, f) for f in fold_layers(self.events, self.expand_layer, flagged))
        if self.fold:
            folded = {e.index for f in folds.values() for e in f.events}
            for group in self._groups():
                shown = [e for e in group if e.index not in folded]
                folds.update((f.events[0].index, f) for f in fold_events(shown, keep=flagged))
        return folds

    def _groups(self) -> list[list[Event]]:
        """Where k/v repeats are looked for: within each layer, and among the ops outside layers."""
        if self.steps:
            prefill, steps = split_steps(self.events, self.steps)
            return [g for g in [prefill] + [list(step.events) for step in steps] if g]
        if not self.sections:
            return [self.events]
        groups: list[list[Event]] = [[]]
        for item in split_layers(self.events):
            if isinstance(item, Layer):
                groups += [list(item.events), []]
            else:
                groups[-1].append(item)
        return [g for g in groups if g]

    def _section(self, e: Event, last: list[str | None]) -> Iterable[Text]:
        """``layers.0``: a title line where a whole model's ops enter another module at the layer level."""
        if not self.sections:
            return
        if self.steps:
            title = step_titles(self.steps).get(e.index)
            if title:
                yield Text(title, style="bold cyan")
            return
        path = layer_path(e.module) or "(top level)"
        if path != last[0]:
            last[0] = path
            yield Text(path, style="bold cyan")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        folds = self._folds()
        folded = {x.index for f in folds.values() for x in f.events}
        # cells only for the ops shown: a folded op repeats a shown one fact for fact (80 layers, 1 drawn)
        cells_of = {e.index: self._cells(e) for e in self.events if e.index not in folded}
        extra_cells = {id(x): self._cells(x, UNROWED_MARK) for x in self.unrowed}
        if not self.fold:
            extra_cells.update((id(x), self._cells(x)) for x in self.setup)
        rows = list(cells_of.values()) + list(extra_cells.values())
        first_input = self.events[0].inputs[0] if self.fold and self.events and self.events[0].inputs else None
        if first_input is not None:
            rows.insert(0, self._input_cells(first_input))
        labels = [fold_label(f) for f in folds.values()] + ([setup_label(self.setup)] if self.setup else [])
        # the compact table: columns as wide as their content, no strides column
        widths = content_widths(rows, labels, 0) if self.compact else column_widths(rows, labels, width)
        header_cells = [Text(c, style="bold") for c in COLUMNS]
        if self.compact:
            header_cells[5] = Text("")
        layout = NarrowLayout.fit(rows, header_cells, widths, width)
        indent = widths[0] + GAPS[0]
        header, header_widths, _ = layout.row(header_cells, widths)
        header_line = join_cells(header, header_widths, GAPS[0])
        yield header_line
        rule = header_line.cell_len if self.compact else sum(header_widths) + sum(GAPS[: len(header_widths) - 1])
        yield Text("─" * min(width, rule), style="dim")
        extra = _Extra(self, extra_cells, widths, width, layout, indent)
        yield from extra.setup_section()
        if first_input is not None:
            input_row = rows.pop(0)
            cells, row_widths, _ = layout.row(input_row, widths)
            yield join_cells(cells, row_widths, GAPS[0])
            yield from layout.below(input_row, indent, width)
            yield from layout.facts(input_row, indent, width, strides=not self.compact and layout.moved > 0)
        skip: set[int] = set()
        last: list[str | None] = [None]
        previous: Event | None = None
        for e in self.events:
            if e.index in skip:
                continue
            yield from extra.unrowed_before(e.index, last)
            if isinstance(folds.get(e.index), (LayerFold, StepFold)):
                last[0] = None
            else:
                yield from self._section(e, last)
            if e.index in folds:
                yield from fold_lines(folds[e.index], widths, width)
                skip.update(x.index for x in folds[e.index].events)
                continue
            cells, row_widths, strides_below = layout.row(cells_of[e.index], widths)
            yield join_cells(cells, row_widths, GAPS[0])
            same_call = previous is not None and _same_call(previous, e)
            yield from self._detail(e, indent, width, strides_below and not self.compact, layout, same_call)
            previous = e
            drawn = self.after_event(e) if self.after_event else None
            if drawn is not None:
                yield drawn
        yield from extra.unrowed_before(None, last)

    def _cells(self, e: Event, mark: str | None = None) -> list[Text]:
        cells = fact_cells(e, self.long_names)
        if mark is not None:
            cells[0] = Text(mark, style="dim")
        return _compacted(cells) if self.compact else cells

    def _input_cells(self, t) -> list[Text]:
        cells = input_cells(t, self.long_names)
        return _compacted(cells) if self.compact else cells

    def _detail(self, e: Event, indent: int, width: int, strides_below: bool, layout: NarrowLayout,
                same_call: bool = False) -> Iterable:
        code = Text(" " * indent)
        if same_call:  # torch's own ops inside one call (nn.MultiheadAttention): the call is cited once
            code.append(inside_call_text(e), style="dim")
        else:
            code.append_text(_cited_code(e, width - indent))
        cells = self._cells(e)
        yield from layout.below(cells, indent, width)
        yield code
        yield from layout.facts(cells, indent, width, strides=strides_below and e.output is not None)
        if is_matmul(e):
            yield from indented(Text(equation(e), style="bold"), indent, width)
        if self.explain != "none":
            yield from indented(Text(sentence(e, self.explain, self.long_names), style="italic"), indent, width)


#: The index cell of a call without a number of its own (shown with --all)
UNROWED_MARK = "·"
#: The title of the setup section when it is shown in full
SETUP_TITLE = "setup: the ops that built the model (not in the totals)"


def setup_label(setup: Sequence[Event]) -> str:
    """``0-32``: the op numbers of the setup section."""
    first, last = setup[0].index, setup[-1].index
    return f"{first}" if first == last else f"{first}-{last}"


class _Extra:
    """What an :class:`OpTable` shows besides its numbered rows: the setup section (one folded line, or
    under ``--all`` a titled section of rows) and the calls without a number of their own (``--all``),
    each before the row it ran before."""

    def __init__(self, table: OpTable, cells: dict[int, list[Text]], widths, width: int, layout, indent: int):
        self.table, self.cells, self.widths, self.width = table, cells, widths, width
        self.layout, self.indent = layout, indent
        self.pending = list(table.unrowed)

    def setup_section(self) -> Iterable[Text]:
        setup = self.table.setup
        if not setup:
            return
        if self.table.fold:
            yield from fold_like_lines(setup_label(setup), "setup", setup_fold_sentence(setup), self.widths,
                                       self.width)
            return
        yield Text(SETUP_TITLE, style="bold cyan")
        for e in setup:
            yield from self._block(e)
        yield Text("forward pass", style="bold cyan")

    def unrowed_before(self, index: int | None, last: list[str | None]) -> Iterable[Text]:
        """The calls that ran before row ``index`` (None: every one not shown yet), each under the title
        of its own layer (``last``: the title shown last)."""
        while self.pending and (index is None or self.pending[0].index <= index):
            e = self.pending.pop(0)
            yield from self.table._section(e, last)
            yield from self._block(e)

    def _block(self, e: Event) -> Iterable:
        cells = self.cells[id(e)]
        row, row_widths, strides_below = self.layout.row(cells, self.widths)
        yield join_cells(row, row_widths, GAPS[0])
        yield from self.table._detail(e, self.indent, self.width, strides_below and not self.table.compact,
                                      self.layout)


def setup_fold_sentence(setup: Sequence[Event], show_all: str = "--all shows them") -> str:
    """``33 ops ran while the model was built (32 clone, 1 tril; copying 66.1 KiB), not in the totals;
    --all shows them`` (``show_all``: how to show them where that is not ``--all``)."""
    counts: dict[str, int] = {}
    for e in setup:
        counts[e.op] = counts.get(e.op, 0) + 1
    s = stats(setup)
    copied = f"; copying {fmt_bytes(s['copy_bytes'])}" if s["copies"] else ""
    n = len(setup)
    return (f"{n} op{'s' if n != 1 else ''} ran while the model was built ({_counted(counts)}{copied}), "
            f"not in the totals; {show_all}")


def fold_like_lines(label: str, ops: str, sentence_: str, widths: Sequence[int], width: int) -> Iterable[Text]:
    """``0-32  setup  33 ops ran while ...``: a folded line, wrapped under its label when too long."""
    head = Text(label.rjust(widths[0]), style="dim")
    head.append(" " * GAPS[0])
    head.append(ops, style="magenta")
    line = head.copy().append("  ").append(sentence_, style="italic dim")
    if line.cell_len <= width:
        yield line
        return
    yield head
    yield from indented(Text(sentence_, style="italic dim"), widths[0] + GAPS[0], width)


#: The least of a code line kept beside its citation; with less room the citation goes, the code stays.
MIN_CITED_CODE = 20


def _cited_code(e: Event, room: int) -> Text:
    """The op's code line and where it is (``reference.py:41``) in ``room`` columns: a long line is cut
    (``…``) so that the citation still fits, unless that would leave less than :data:`MIN_CITED_CODE`."""
    code = continued(e.code)
    loc = Text(f"  {e.source.rsplit('/', 1)[-1]}", style="dim") if e.source else Text("")
    fits = room - 1 - loc.cell_len
    if not e.source or (len(code) > fits and fits < MIN_CITED_CODE):
        return _code_text(code, max(10, room - 1))
    line = _code_text(code, fits)
    line.append_text(loc)
    return line


def continued(code: str) -> str:
    """The first line of a call written over several lines, marked as going on (``self.mha(x, …``)."""
    code = code.split("  #")[0].rstrip()
    return code + " …" if code.count("(") > code.count(")") else code


def _same_call(before: Event, e: Event) -> bool:
    """Both ops ran inside one call of the user's code written over several lines (torch's own ops
    inside ``nn.MultiheadAttention``): same line, and that line does not close its call."""
    return (bool(e.source) and e.source == before.source and e.code == before.code
            and continued(e.code).endswith(" …"))


def inside_call_text(e: Event) -> str:
    """``inside the call above (variants.py:95), in module mha``."""
    where = e.source.rsplit("/", 1)[-1]
    module = f", in module {e.module}" if e.module else ""
    return f"inside the call above ({where}){module}"


def _compacted(cells: list[Text]) -> list[Text]:
    """The compact table's cells: no strides, no layout."""
    return [*cells[:3], Text(""), cells[4], Text("")]


class NarrowLayout:
    """Which facts of a row stay on its line at a narrow width: layout goes first, then memory, then
    the shape; each moved fact gets a line of its own under the row, indented, never at column 0.

    ``moved`` counts the moved columns among (layout, memory, shape), in that order.
    """

    #: Column indices (into the six fact cells) that may move under the row, first to go first.
    MOVABLE = (5, 4, 2)

    def __init__(self, moved: int = 0):
        self.moved = moved

    @classmethod
    def fit(cls, rows: Sequence[Sequence[Text]], header: Sequence[Text], widths: Sequence[int],
            width: int) -> NarrowLayout:
        """The fewest moved columns that keep every row within ``width``."""
        for moved in range(len(cls.MOVABLE) + 1):
            layout = cls(moved)
            if all(_line_len(*layout.row(r, widths)[:2]) <= width for r in [*rows, header]):
                return layout
        return cls(len(cls.MOVABLE))

    def _gone(self) -> set[int]:
        return set(self.MOVABLE[: self.moved])

    def row(self, cells: Sequence[Text], widths: Sequence[int]) -> tuple[list[Text], list[int], bool]:
        """Like :func:`row_cells`, without the moved columns (their cells sized to fit)."""
        if not self.moved:
            return row_cells(cells, widths)
        keep = [i for i in (0, 1, 2, 4, 5) if i not in self._gone()]  # strides: on their own line
        return [cells[i] for i in keep], [widths[i] for i in keep], True

    def below(self, cells: Sequence[Text], indent: int, width: int) -> Iterable[Text]:
        """The moved shape, on its own line under the row."""
        if 2 in self._gone() and cells[2].plain:
            yield from _indented_cell(cells[2], indent, width)

    def facts(self, cells: Sequence[Text], indent: int, width: int, strides: bool) -> Iterable[Text]:
        """``new 24 KiB · strides (3072, 512, 1) · contiguous``: the moved memory and layout words beside
        the strides (when they go under the row), wrapped at the `` · `` only; when the three do not fit
        on one line, the layout word goes beside the memory (``new 24 KiB · contiguous``), never alone."""
        parts = [cells[4]] if 4 in self._gone() and cells[4].plain else []
        if strides and cells[3].plain:
            parts.append(Text("strides ", style="dim").append_text(cells[3]))
        if 5 in self._gone() and cells[5].plain:
            parts.append(cells[5])
            if len(parts) == 3 and indent + sum(p.cell_len for p in parts) + 6 > width:
                parts[1:] = [parts[2], parts[1]]  # no layout word alone on a line: it joins the memory word
        line = Text(" " * indent)
        for part in parts:
            if line.cell_len > indent and line.cell_len + 3 + part.cell_len <= width:
                line.append(" · ", style="dim").append_text(part)
                continue
            if line.cell_len > indent:
                yield line
            if indent + part.cell_len > width:
                yield from _indented_cell(part, indent, width)
                line = Text(" " * indent)
            else:
                line = Text(" " * indent).append_text(part)
        if line.cell_len > indent:
            yield line


def _indented_cell(text: Text, indent: int, width: int) -> Iterable[Text]:
    """One cell on its own indented line, word-wrapped (never splitting a shape or a tuple) when too long."""
    if indent + text.cell_len <= width:
        yield Text(" " * indent).append_text(text)
        return
    style = text.spans[0].style if text.spans else text.style
    yield from indented(Text(text.plain, style=style), indent, width)


def _line_len(cells: Sequence[Text], widths: Sequence[int]) -> int:
    return join_cells(cells, widths, GAPS[0]).cell_len


def fold_lines(fold: Fold | LayerFold | StepFold, widths: Sequence[int], width: int) -> Iterable[Text]:
    """The fold's one line, or at a narrow width its label and ops, then its sentence wrapped under them."""
    line = fold_cells(fold, widths)
    if line.cell_len <= width:
        yield line
        return
    indent = widths[0] + GAPS[0]
    head = Text(fold_label(fold).rjust(widths[0]), style="dim")
    head.append(" " * GAPS[0])
    if isinstance(fold, (LayerFold, StepFold)):
        yield head.rstrip() or head
        yield from indented(Text(fold.sentence, style="italic cyan"), indent, width)
        return
    once = fold.events[:len(fold.events) // fold.times]
    ops = wrap(", ".join(e.op for e in once), max(10, width - indent))
    head.append(ops[0], style="magenta")
    yield head
    for more in ops[1:]:
        yield Text(" " * indent).append(more, style="magenta")
    yield from indented(Text(fold.sentence, style="italic dim"), indent, width)


def indented(text: Text, indent: int, width: int) -> Iterable[Text]:
    """``text`` word-wrapped to ``width``, each line indented; no wrap splits a number from its unit,
    a tuple or a shape, and no trailing padding."""
    style = text.style
    for line in wrap(text.plain, max(20, width - indent)):
        yield Text(" " * indent).append(line, style=style)


def _copies(n: int) -> str:
    return f"{n} {'copy' if n == 1 else 'copies'}"


def hidden_copies(events: Sequence[Event]) -> list[tuple[int, int]]:
    """``(op number, bytes)`` of every copy torch makes inside an op without the code asking
    (the operands a batched matmul clones before bmm)."""
    return [(e.index, c.nbytes) for e in events if not e.error for c in e.hidden_copies]


def _hidden_sentence(hidden: Sequence[tuple[int, int]], copies: int) -> str:
    """``3 of the 4 copies (72 KiB) are torch's, not the code's: matmul #10, #12 clone operands for bmm``
    (a batched matmul copies an operand whose batch axes do not chain in memory before calling bmm)."""
    n, size = len(hidden), fmt_bytes(sum(b for _, b in hidden))
    ops = sorted({i for i, _ in hidden})
    where = ", ".join(f"#{i}" for i in ops[:4]) + (f" and {len(ops) - 4} more" if len(ops) > 4 else "")
    if n == copies == 1:
        who = f"the copy ({size}) is"
    elif n == copies:
        who = f"all {n} copies ({size}) are"
    else:
        who = f"{n} of the {copies} copies ({size}) {'is' if n == 1 else 'are'}"
    operands = "an operand" if n == 1 else "operands"
    verb = "clones" if len(ops) == 1 else "clone"
    return f"{who} torch's, not the code's: matmul {where} {verb} {operands} for bmm"


def footer_text(trace: Report, events: Sequence[Event], *, setup_shown: bool = False, unrowed_shown: bool = False,
                show_all: str | None = None) -> Text:
    """The totals: ops, views, copies (torch's own hidden copies included, and said apart), computed
    buffers, the largest tensor; then what the table leaves out and how to show it.

    Args:
        setup_shown: the table shows the setup section (folded or not): no setup line here.
        unrowed_shown: the table shows the calls without a row (``·`` rows): the footer says what they
            are instead of what is left out.
        show_all: how to show what is left out (default :func:`how_to_show`: the report's header's
            ``how_to_show``, else ``--all``).
    """
    s = stats(events)
    hidden = hidden_copies(events)
    copies, copy_bytes = s["copies"] + len(hidden), s["copy_bytes"] + sum(b for _, b in hidden)
    text = Text.assemble(
        (f"{s['ops']} op{'' if s['ops'] == 1 else 's'}", "bold"),
        " · ", (f"{s['views']} view{'' if s['views'] == 1 else 's'}", "green"), " · ",
        (f"{_copies(copies)} ({fmt_bytes(copy_bytes)})", "yellow"), " · ",
        (f"{s['new_buffers']} computed buffer{'' if s['new_buffers'] == 1 else 's'} "
         f"({fmt_bytes(s['alloc_bytes'])})", "blue"),
    )
    if hidden:
        text.append("\n" + _hidden_sentence(hidden, copies), style="yellow")
    if s["largest"] is not None:
        e, t = s["largest"]
        text.append(f"\nlargest tensor: #{e} {fmt_shape(t)}, {fmt_bytes(t.nbytes)}", style="dim")
    left = left_out_sentence(trace, how_to_show(trace) if show_all is None else show_all, shown=unrowed_shown)
    if left:
        text.append("\n" + left, style="dim")
    setup = "" if setup_shown else setup_sentence(trace)
    if setup:
        text.append("\n" + setup, style="dim")
    return text


#: How a view that is not the table (a step, a question, a page) shows the setup ops: the table does
SETUP_IN_TABLE = "the table shows them with --all"


def setup_line(trace) -> str:
    """The setup as one line above the first op, as the table folds it, for a view that is not the table
    (``setup #0-#32: 33 ops ran while the model was built (...), not in the totals; the table shows them
    with --all``); "" when the model was not built in the trace."""
    setup = getattr(trace, "setup", None)
    if not setup or not isinstance(setup, list):
        return ""
    return f"setup #{setup_label(setup).replace('-', '-#')}: {setup_fold_sentence(setup, SETUP_IN_TABLE)}"


def setup_sentence(trace) -> str:
    """The ops that built the model (a constructor, a deep copy, ``.to()``), folded into one line and
    kept out of the totals above: the table is about the forward pass."""
    setup = getattr(trace, "setup", None)
    if not setup or not isinstance(setup, list):
        return ""
    s = stats(setup)
    counts: dict[str, int] = {}
    for e in setup:
        counts[e.op] = counts.get(e.op, 0) + 1
    n = len(setup)
    copied = f", copying {fmt_bytes(s['copy_bytes'])}" if s["copies"] else ""
    return (f"setup, not counted above: {n} op{'s' if n != 1 else ''} ran while the model was built "
            f"(#{setup[0].index}-#{setup[-1].index}: {_counted(counts)}{copied})")


def _counted(counts: dict[str, int], most: int = 5) -> str:
    """``3 add, 2 mul and 4 more`` (the first ``most`` names, in order of first use)."""
    names = [f"{n} {'unknown' if name == '?' else name}" for name, n in counts.items()]
    return ", ".join(names) if len(names) <= most else f"{', '.join(names[:most])} and {len(names) - most} more"


#: How a table's left-out ops are shown, unless the report's header says otherwise (``how_to_show``)
SHOW_ALL = "--all shows them"


def how_to_show(trace) -> str:
    """How to show the ops a table leaves out: the command's own words, else ``--all shows them``."""
    return header_of(trace).get("how_to_show") or SHOW_ALL


def left_out_sentence(trace, show_all: str = SHOW_ALL, shown: bool = False) -> str:
    """What ran without a row (nothing is left out silently): elementwise math apart from the rest, from
    the run's record (the whole run's, also under --only), and how to show them (``show_all``); when the
    table shows them (``shown``: the ``·`` rows), what those rows are."""
    left_out = getattr(trace, "left_out", None)
    counts = left_out() if callable(left_out) else (left_out or {})
    if not counts:
        return ""
    math = {k: v for k, v in counts.items() if family_of(k) is Family.ELEMENTWISE}
    other = {k: v for k, v in counts.items() if k not in math}
    parts = []
    if math:
        n = sum(math.values())
        parts.append(f"{n} elementwise op{'s' if n != 1 else ''} ({_counted(math)}): elementwise math keeps its "
                     "operands' axes")
    if other:
        n = sum(other.values())
        parts.append(f"{n} other op{'s' if n != 1 else ''} without a row ({_counted(other)})")
    if shown:
        return f"{UNROWED_MARK} rows have no number of their own and are not in the totals: " + "; ".join(parts)
    return "not in the table: " + "; ".join(parts) + (f"; {show_all}" if show_all else "")


#: How to give names from Python (the API): a command's header replaces it with its own ("how_to_name").
NAME_FROM_PYTHON = ("Name them with shapetrace.trace(dims=\"B=2 T=6 D=512 H=8\") or with "
                    "shapetrace.name(x, \"B T D\").")
#: the style of each verdict mark
VERDICT_STYLE = {"✓": "green", "?": "yellow", "!": "yellow", "✗": "bold red"}


def how_to_name(trace: Report) -> str:
    """The advice under an unnamed table: the command's own (CLI options) or the Python API's."""
    return header_of(trace).get("how_to_name") or NAME_FROM_PYTHON


def header_of(trace: Report) -> dict:
    """What the command put above a report's table (``lines``, ``how_to_name``, a decode's ``steps``);
    a bare :class:`~shapetrace.engine.tracer.Trace` has none: its command's header is in its report."""
    from shapetrace.engine.report import Report

    return (trace.header or {}) if isinstance(trace, Report) else {}


def any_named(events: Sequence[Event]) -> bool:
    """True when at least one axis of one recorded tensor has a name."""
    return any(d for e in events for t in (*e.inputs, *e.outputs) for d in t.dims)


def verdict_of_trace(trace: Report, events: Sequence[Event] | None = None):
    """The :class:`~shapetrace.engine.verdict.Verdict` of a report or trace (over ``events`` when given)."""
    from shapetrace.engine.verdict import verdict_of

    return verdict_of(trace.events if events is None else events, trace.diagnostics,
                      getattr(trace, "contracts", ()), getattr(trace, "unmeasured", ()),
                      getattr(trace, "exception", None), getattr(trace, "stopped", None))


def verdict_text(trace: Report, events: Sequence[Event] | None = None, advice: str | None = None) -> str:
    """The verdict line, with how to name axes after it when nothing could be checked."""
    from shapetrace.engine.verdict import NOTHING_NAMED

    line = verdict_of_trace(trace, events).line
    if not line.startswith(NOTHING_NAMED.removesuffix(".")):
        return line
    # (what held on the values, measured without names, comes before the advice)
    return line + (" " if line.endswith(".") else ". ") + (how_to_name(trace) if advice is None else advice)


def diagnostic_lines(diagnostics: Sequence[Diagnostic]) -> list[Hanging]:
    """The findings, one each (``✗ error kind at #N: ...``), after a blank line; wrapped without
    trailing spaces."""
    return [Hanging(text) for text in _finding_texts(diagnostics)]


def verdict_lines(trace: Report, events: Sequence[Event] | None = None, advice: str | None = None) -> list[Hanging]:
    """The end of a table: its errors and warnings, then the one verdict line, then the notes under it."""
    found = [d for d in trace.diagnostics if d.severity != "note"]
    notes = [d for d in trace.diagnostics if d.severity == "note"]
    mark = verdict_of_trace(trace, events).mark
    texts = [*_finding_texts(found), Text(("" if found else "\n") + verdict_text(trace, events, advice),
                                          style=VERDICT_STYLE[mark])]
    texts += list(_finding_texts(notes))[1:]
    return [Hanging(text) for text in texts]


def _finding_texts(diagnostics: Sequence[Diagnostic]) -> Iterable[Text]:
    if not diagnostics:
        return
    yield Text("")
    for d in diagnostics:
        where = f" at #{d.event}" if d.event is not None else ""
        yield Text.assemble((f"{SEVERITY_MARK[d.severity]} {d.kind}{where}: ", SEVERITY_STYLE[d.severity]),
                            d.text)


def print_trace(trace: Report, console: Console | None = None, header: Sequence[str] = (),
                **kwargs) -> None:
    """Print a trace's table, footer and diagnostics."""
    console = console or Console()
    console.print(TraceView(trace, header=header or trace_header(trace), **kwargs))


def trace_header(trace: Report) -> list[str]:
    return list(header_of(trace).get("lines", []))
