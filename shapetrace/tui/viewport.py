"""A screen that fits its terminal: what is pinned stays, the rest scrolls and says what is cut.

Every interactive screen (step, ``--present``, ``exercise watch``) is a pinned head (title, keys), a
body read from the top (the verdict and its explanation come first) and a pinned foot. When the body is
taller than the rows left for it, :func:`window` shows the rows from ``offset`` and puts a marker line
under them: how many lines are below and the keys that show them (Space or ↓; ↑ goes back).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

MORE_KEYS = "Space/↓ shows them"


@dataclass
class Scroll:
    """Where a body is scrolled to; ``below`` and ``page`` are written by the last :func:`window`."""

    offset: int = 0
    below: int = 0  #: lines under the window (0: the body's end is on screen)
    page: int = 0   #: rows the window had
    #: where the next page starts when the window ended at a unit's edge (None: one page on, less a line)
    next: int | None = None
    back: list[int] = field(default_factory=list)  #: the offsets of the pages before, to go back to

    def down(self) -> bool:
        """Scroll one page down (keeping its last line in sight, or from the unit the window stopped
        before); False when nothing is below."""
        if self.below <= 0:
            return False
        self.back.append(self.offset)
        self.offset = self.next if self.next is not None else self.offset + max(1, self.page - 1)
        return True

    def up(self) -> bool:
        if self.offset <= 0:
            return False
        earlier = self.back.pop() if self.back else -1
        self.offset = earlier if 0 <= earlier < self.offset else max(0, self.offset - max(1, self.page - 1))
        return True

    def top(self) -> None:
        self.offset, self.below, self.next, self.back = 0, 0, None, []


Lines = list[list[Segment]]


def body_lines(console: Console, options: ConsoleOptions, body: RenderableType) -> Lines:
    """``body`` rendered at the screen's width, at its full height."""
    return console.render_lines(body, options.update(height=None), pad=False)


def window(console: Console, options: ConsoleOptions, lines: Lines, rows: int, scroll: Scroll,
           units: Sequence[int] = (), parts: Sequence[int] = ()) -> Lines:
    """The rows of ``lines`` that fit in ``rows``, from ``scroll.offset``, with the marker line last when
    anything is cut (``scroll`` is clamped and told what is below and where the next page starts).

    ``units``: the lines where a unit that must not be cut starts (a paragraph, a traced table with its
    findings, in order); a window that cannot show all that is left ends before the first unit it cannot
    show whole, when that unit fits a page, so each page is whole units; ``parts``: the same within a unit
    taller than a page (each finding under a table starts one); else the window is cut by lines."""
    rows = max(rows, 1)
    if len(lines) <= rows:
        scroll.offset, scroll.below, scroll.page, scroll.next = 0, 0, rows, None
        return lines
    shown = max(rows - 1, 1)
    # a page that starts at a unit stays there (the rest shown whole below it); else the window is kept full
    last = len(lines) - 1 if scroll.offset in units or scroll.offset in parts else len(lines) - shown
    scroll.offset = min(max(scroll.offset, 0), last)
    scroll.next = _edge(scroll.offset, shown, len(lines), units) or _edge(scroll.offset, shown, len(lines), parts)
    shown = (scroll.next if scroll.next is not None else min(len(lines), scroll.offset + shown)) - scroll.offset
    scroll.page, scroll.below = shown, len(lines) - scroll.offset - shown
    marker = more_marker(scroll.offset, shown, len(lines))
    marker.no_wrap, marker.overflow = True, "ellipsis"
    return [*lines[scroll.offset: scroll.offset + shown], body_lines(console, options, marker)[0]]


def _edge(offset: int, shown: int, total: int, starts: Sequence[int]) -> int | None:
    """Where a window of ``shown`` rows from ``offset`` ends: before the first of the units starting at
    ``starts`` that it cannot show whole, when that unit fits a page of its own (None: what is left fits,
    or that unit is taller than a page, so ending early gains nothing: the window is cut by lines)."""
    if offset + shown >= total:
        return None
    for start, end in zip(starts, [*starts[1:], total]):
        if offset < start <= offset + shown < end:
            return start if end - start <= shown else None
    return None


def more_marker(offset: int, shown: int, total: int) -> Text:
    """``↓ 12 more lines (lines 1-20 of 32) · Space/↓ shows them``, or at the end how to go back."""
    first, last = offset + 1, offset + shown
    below = total - last
    if below > 0:
        text = f"↓ {below} more line{'s' if below != 1 else ''} (lines {first}-{last} of {total}) · {MORE_KEYS}"
    else:
        text = f"↑ lines {first}-{last} of {total} · ↑ scrolls back"
    return Text(text, style="bold yellow")


def segments(lines: Lines) -> Iterator[Segment]:
    """``lines`` as one stream of segments, a new line after each."""
    for line in lines:
        yield from line
        yield Segment.line()


def rendered_height(console: Console, options: ConsoleOptions, *parts: RenderableType) -> int:
    return sum(len(body_lines(console, options, part)) for part in parts)
