"""A line of phrases that wraps between its phrases, never inside one that fits.

A title such as ``operand 1  [B=2, H=8, T=6, d_k=64]  strides (3072, 64, 512, 1) · not contiguous``
wrapped word by word leaves ``contiguous`` alone on the next line (reading as the opposite of what it
says) or cuts a strides tuple in two; :class:`Phrases` moves whole phrases down instead, and pulls one
more down rather than leave the last alone (:func:`shapetrace.render.wrap.greedy_rows`, as
:func:`~shapetrace.render.wrap.wrap` does for words):

    operand 1  [B=2, H=8, T=6, d_k=64]
    strides (3072, 64, 512, 1) · not contiguous
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text

from shapetrace.render.wrap import greedy_rows


class Phrases:
    """Styled phrases, each with the separator that goes before it; a separator that would start a
    line is dropped. A phrase wider than the whole line wraps on a line of its own.

    >>> from rich.console import Console
    >>> console = Console(width=30, color_system=None)
    >>> console.print(Phrases([("", Text("[B=2, T=6, D=512]")), ("  ", Text("strides (3072, 512, 1)")),
    ...                        (" · ", Text("contiguous"))]))
    [B=2, T=6, D=512]
    strides (3072, 512, 1) · contiguous
    """

    def __init__(self, pieces: list[tuple[str, Text]]):
        self.pieces = pieces

    def lines(self, width: int) -> list[Text]:
        return [_joined(row) for row in greedy_rows(self.pieces, lambda row: _width(row) <= width)]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.lines(options.max_width)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        """As a Text measures: its widest phrase at least, the whole line at most."""
        widest = max((text.cell_len for _, text in self.pieces), default=0)
        return Measurement(widest, _width(self.pieces)).clamp(max_width=options.max_width)


def _width(row: list[tuple[str, Text]]) -> int:
    return sum(cell_len(sep) for sep, _ in row[1:]) + sum(text.cell_len for _, text in row)


def _joined(row: list[tuple[str, Text]]) -> Text:
    line = Text()
    for i, (sep, text) in enumerate(row):
        if i:
            line.append(sep)
        line.append_text(text)
    return line
