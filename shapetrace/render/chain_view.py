"""``shapetrace strides`` output: one block per step (facts line, diagram, notes), then a summary."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, RenderResult
from rich.rule import Rule
from rich.text import Text

from shapetrace.engine.formatting import fmt_bytes, fmt_shape
from shapetrace.render.diagram import LayoutView, event_diagram, layout_of
from shapetrace.render.indent import Indent
from shapetrace.render.phrases import Phrases

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.app.strides import ChainRun, StepResult

NOTE_STYLE = {"error": "bold red", "warning": "bold yellow", "note": "cyan"}


class ChainView:
    """A Rich renderable for a :class:`~shapetrace.app.strides.ChainRun`.

    Args:
        run: the steps to draw.
        diagrams: draw the memory diagram under each step.
        rows: storage-strip rows per diagram (the middle is elided).
    """

    def __init__(self, run: ChainRun, diagrams: bool = True, rows: int = 4):
        self.run, self.diagrams, self.rows = run, diagrams, rows

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        yield from self._header()
        for step in self.run.steps:
            yield from self._step(step, width)
        yield from self._footer()

    def _header(self) -> RenderResult:
        run = self.run
        start = run.steps[0].info
        n = 1
        for s in run.shape:
            n *= s
        source = (f"x = torch.arange({n}).view({', '.join(map(str, run.shape))})" if run.device == "cpu"
                  else f"x = torch.empty({', '.join(map(str, run.shape))}, device='meta')")
        yield Text.assemble(("shapetrace strides · ", "bold"), (source, "bold"))
        if run.device == "meta":
            what = "the start tensor has" if run.largest <= n else "a step of the chain would hold"
            yield Text(f"{what} {max(n, run.largest):,} elements, more than fits comfortably in memory: "
                       "running on torch's meta device (real shapes and strides, no data)", style="dim")
        else:
            yield Text("every element's value is its own address, so a label is where it lives", style="dim")
        from shapetrace.app.strides import DEFAULT_NAMES

        named = fmt_shape(start)
        if run.names == DEFAULT_NAMES.get(len(run.shape)) and not run.names_given:
            yield Text(f"axes named {named} by default for {len(run.shape)} axes; set them with --dims",
                       style="dim")
        if run.heads and run.heads_from:
            yield Text(f"H = {run.heads} heads, read from {run.heads_from}, which splits D in two (an "
                       "assumption: --heads sets H)", style="dim")
        elif run.heads:
            yield Text(f"H = {run.heads} heads from --heads", style="dim")

    def _step(self, step: StepResult, width: int) -> RenderResult:
        title = "start" if step.number == 0 else f"step {step.number} · .{step.code}" \
            if not step.code.startswith("[") else f"step {step.number} · x{step.code}"
        yield Rule(Text(title, style="bold"), align="left", style="dim")
        if step.error:
            yield Text.assemble(("✗ raised ", "bold red"), step.error)
            if step.explanation:
                yield Indent(Text(step.explanation), 2)
            return
        yield self._facts(step)
        if self.diagrams:
            e = step.event
            if e is not None and e.copy_bytes and not e.view:
                yield event_diagram(e, width, self.run.head_count, self.rows)
            else:
                yield LayoutView(layout_of(step.info, self.run.head_count), width, self.rows)
        for note in step.notes:
            severity = note.split(" ", 1)[0]
            yield Text(note, style=NOTE_STYLE.get(severity, "yellow"))

    def _facts(self, step: StepResult) -> Phrases:
        i = step.info
        shape = Text(fmt_shape(i), style="bold red" if any(n and n.startswith("!") for n in i.dims) else "bold")
        pieces = [("", shape), ("  ", Text(f"strides ({', '.join(map(str, i.stride))})", style="dim"))]
        if i.storage_offset:
            pieces.append(("  ", Text(f"offset {i.storage_offset}", style="dim")))
        if step.number:
            e = step.event
            if e is not None and e.noop:
                pieces.append((" · ", Text("no-op (same tensor)", style="green")))
            elif step.view:
                pieces.append((" · ", Text("view (no copy)", style="green")))
            else:
                pieces.append((" · ", Text(f"copy {fmt_bytes(step.copy_bytes)}", style="bold yellow")))
        pieces.append((" · ", Text("contiguous" if i.contiguous else "not contiguous",
                                   style="green" if i.contiguous else "yellow")))
        return Phrases(pieces)

    def _footer(self) -> RenderResult:
        run = self.run
        done = [s for s in run.steps[1:] if not s.error]
        views = sum(1 for s in done if s.view)
        copies = [s for s in done if s.copy_bytes]
        n = len(run.steps) - 1
        line = Text(f"\n{n} {'step' if n == 1 else 'steps'} · {views} {'view' if views == 1 else 'views'} · "
                    f"{len(copies)} {'copy' if len(copies) == 1 else 'copies'} "
                    f"({fmt_bytes(sum(s.copy_bytes for s in copies))})")
        failed = [s for s in run.steps if s.error]
        if failed:
            line.append(f" · failed at step {failed[0].number}", style="bold red")
        yield line
        for d in run.general_diagnostics:
            yield Text(f"{d.severity} {d.kind}: {d.text}", style=NOTE_STYLE.get(d.severity, ""))
