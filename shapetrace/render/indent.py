"""Indent any renderable without Rich's right padding (no trailing spaces in terminals or files)."""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.segment import Segment


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
