"""Indent any renderable without Rich's right padding (no trailing spaces in terminals or files)."""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.segment import Segment
from rich.text import Text


class Indent:
    """``renderable`` shifted right by ``left`` columns, each line right-trimmed, then ``bottom`` blank lines."""

    def __init__(self, renderable: RenderableType, left: int = 0, bottom: int = 0):
        self.renderable, self.left, self.bottom = renderable, left, bottom

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        inner = options.update(width=max(1, options.max_width - self.left))
        for line in console.render_lines(self.renderable, inner, pad=False):
            trimmed = rstrip_segments(line)
            if self.left and trimmed:  # a blank line (inside a code block too) stays empty
                yield Segment(" " * self.left)
            yield from trimmed
            yield Segment.line()
        for _ in range(self.bottom):
            yield Segment.line()


def rstrip_segments(line: list[Segment]) -> list[Segment]:
    """Drop trailing white space (and unstyled padding) from one rendered line."""
    out = list(line)
    while out:
        last = out[-1]
        trimmed = last.text.rstrip(" ")
        if trimmed:
            out[-1] = Segment(trimmed, last.style, last.control)
            break
        out.pop()
    return out


class Hanging:
    """A text whose long lines wrap with the continuation indented by ``hang`` columns (never at column 0),
    never splitting a number from its unit, a shape or a tuple (:func:`~shapetrace.render.wrap.wrap`).

    A line that fits keeps its styles; a wrapped one takes the style of its first styled span.
    """

    def __init__(self, text: Text, hang: int = 2):
        self.text, self.hang = text, hang

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        for line in self.text.split("\n", allow_blank=True):
            line.rstrip()
            if line.cell_len <= width:
                yield line
                continue
            yield from _hanging_lines(line, width, self.hang)


def _hanging_lines(line: Text, width: int, hang: int) -> list[Text]:
    from shapetrace.render.wrap import wrap

    style = line.spans[0].style if line.spans else line.style
    style = style or line.style
    lines: list[str] = []
    for part in line.plain.split(" · "):  # the totals break at their separators first
        if lines and len(lines[-1]) + 3 + len(part) <= width - (hang if len(lines) > 1 else 0):
            lines[-1] += " · " + part
            continue
        first, *rest = wrap(part, width - (hang if lines else 0))
        lines.append(first)
        if rest:
            lines.extend(wrap(" ".join(rest), max(10, width - hang)))
    return [Text((" " * hang if n else "") + part, style=style) for n, part in enumerate(lines)]
