"""A screen that fits its terminal (shapetrace/tui/viewport.py): pages of whole units, and the line scroll.

``lesson 1 --present`` at 80×24 showed screen 4 as 22 lines cut after two lines of its ✗ error (``↓ 8 more
lines``): a presenter scrolled through the middle of the explanation. A presented screen is now pages of
whole units (a paragraph; an example's code; its traced table with its findings), the way a slide deck
continues a tall slide on the next one (Beamer's ``allowframebreaks``). The step and watch screens keep
their line scroll (no units: unchanged).
"""

from __future__ import annotations

import io

from rich.console import Console
from rich.text import Text

from shapetrace.tui.step import StepState
from shapetrace.tui.viewport import Scroll, body_lines, window


def _console() -> Console:
    return Console(file=io.StringIO(), width=80, height=24, color_system=None, legacy_windows=False)


def _lines(console: Console, count: int):
    return [body_lines(console, console.options, Text(f"line {i}"))[0] for i in range(count)]


def _shown(console: Console, got) -> list[str]:
    return ["".join(seg.text for seg in line).rstrip() for line in got]


#: lesson 1's screen 4 at 80 columns: its prose (6 lines), its example's code (5), the traced table with
#: its ✗ error (15) and the closing paragraph (4): 30 lines in 23 rows.
UNITS = [0, 6, 11, 26]


def test_a_page_ends_before_the_first_unit_it_cannot_show_whole():
    console, scroll = _console(), Scroll()
    lines = _lines(console, 30)
    shown = _shown(console, window(console, console.options, lines, 23, scroll, UNITS))
    assert shown == [f"line {i}" for i in range(11)] + ["↓ 19 more lines (lines 1-11 of 30) · Space/↓ shows them"]
    assert (scroll.next, scroll.below) == (11, 19)
    assert scroll.down() and scroll.offset == 11   # the next page starts at the table, not 21 lines on
    shown = _shown(console, window(console, console.options, lines, 23, scroll, UNITS))
    assert shown == [f"line {i}" for i in range(11, 30)] + ["↑ lines 12-30 of 30 · ↑ scrolls back"]
    assert scroll.below == 0 and not scroll.down()
    assert scroll.up() and scroll.offset == 0   # back to the page before, exactly


def test_a_unit_taller_than_the_window_is_cut_where_a_part_starts_else_by_lines():
    console, scroll = _console(), Scroll()
    lines = _lines(console, 60)
    # one unit of 60 lines (a tall table, then two findings at 40 and 50): cut before the finding at 40?
    # no: the window holds 22 rows, so the first page is cut by lines, the second before the finding at 40
    window(console, console.options, lines, 23, scroll, [0], [0, 40, 50])
    assert (scroll.offset, scroll.page, scroll.next) == (0, 22, None)
    scroll.down()
    assert scroll.offset == 21   # a line cut keeps the last line in sight, as before
    shown = _shown(console, window(console, console.options, lines, 23, scroll, [0], [0, 40, 50]))
    assert shown[0] == "line 21" and shown[-2] == "line 39" and scroll.next == 40
    assert shown[-1] == "↓ 20 more lines (lines 22-40 of 60) · Space/↓ shows them"


def test_without_units_the_scroll_is_the_line_scroll_it_was():
    console, scroll = _console(), Scroll()
    lines = _lines(console, 30)
    shown = _shown(console, window(console, console.options, lines, 23, scroll))
    assert shown[-1] == "↓ 8 more lines (lines 1-22 of 30) · Space/↓ shows them"
    scroll.down()
    shown = _shown(console, window(console, console.options, lines, 23, scroll))
    assert shown[0] == "line 8" and shown[-1] == "↑ lines 9-30 of 30 · ↑ scrolls back"


def test_a_presented_lesson_pages_with_every_key_that_goes_on_and_back():
    paged, stepped = StepState(7, index=3, paged=True), StepState(7, index=3)
    for state in (paged, stepped):
        state.scroll.below, state.scroll.next = 19, 11
    assert paged.apply("next") and (paged.index, paged.scroll.offset) == (3, 11)   # Enter: the next page
    assert stepped.apply("next") and (stepped.index, stepped.scroll.offset) == (4, 0)   # step: the next op
    paged.scroll.below = 0
    assert paged.apply("back") and (paged.index, paged.scroll.offset) == (3, 0)   # b: the page before
    assert paged.apply("back") and paged.index == 2   # then the screen before
