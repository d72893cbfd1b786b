"""``shapetrace lesson N --present``: a lesson as a sequence of full screens.

Each ``## `` section is one screen; its live examples are traced the first time
the screen is shown. Keys and terminal handling are step mode's
(:func:`shapetrace.tui.step.run_interactive`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from shapetrace.app.classroom import ViewOptions
from shapetrace.tui.step import StepState, run_interactive
from shapetrace.tui.viewport import body_lines, segments, window

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.exercises.content import Lesson

HELP = "Enter/Space/→ next · b/← back · q quit"
HELP_NARROW = "⏎ next · b back · q quit"


class PresentScreen:
    """The current screen of a presented lesson, with a title bar and the key help."""

    def __init__(self, lesson: Lesson, screens: list[list[tuple[str, str, str]]],
                 options: ViewOptions = ViewOptions()):
        self.lesson, self.screens, self.options = lesson, screens, options
        self.state = StepState(len(screens), paged=True)
        self._cache: dict[int, list[Any]] = {}

    def units(self, index: int) -> list[list[Any]]:
        """The renderables of one screen, in the units a page keeps whole (live examples traced once,
        then kept)."""
        if index not in self._cache:
            from shapetrace.app.lessons import screen_blocks
            from shapetrace.render.lessons import block_units

            blocks = screen_blocks(self.lesson, self.screens, index)
            self._cache[index] = block_units(blocks)
        return self._cache[index]

    def parts(self, index: int) -> list[Any]:
        """The renderables of one screen."""
        return [part for unit in self.units(index) for part in unit]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """The title bar with the keys, then the screen's text; a screen taller than the terminal is shown
        in pages of whole units under the title (a traced example's table with its findings, a paragraph:
        never an error cut mid-sentence), with a marker line saying what is below and which keys show it."""
        title = self.title_bar(options.max_width)
        title.no_wrap, title.overflow = True, "ellipsis"
        yield title
        lines, units, parts = [], [], []
        for unit in self.units(self.state.index):
            units.append(len(lines))
            for part in unit:   # (a unit taller than the screen is cut where a part starts: a finding)
                parts.append(len(lines))
                lines += body_lines(console, options, part)
        height = options.height or console.height
        yield from segments(window(console, options, lines, height - 1, self.state.scroll, units, parts))

    def title_bar(self, width: int) -> Text:
        """Where we are and the keys, in ``width`` columns: the short keys, then without the lesson's
        title, before anything is cut (``q quit`` stays in sight at 80 columns)."""
        i, n = self.state.index, len(self.screens)
        where = f" shapetrace lesson {self.lesson.number} · {i + 1}/{n}"
        last = " · last screen" if i == n - 1 else ""
        choices = [(f"{where} · {self.lesson.title} ", HELP), (f"{where} · {self.lesson.title} ", HELP_NARROW),
                   (f"{where} ", HELP_NARROW)]
        head, keys = next(((h, k) for h, k in choices if len(h) + 2 + len(k + last) <= width), choices[-1])
        title = Text(head, style="bold reverse")
        title.append(f"  {keys}{last}", style="dim")
        return title


def present_lesson(lesson: Lesson, console: Console, options: ViewOptions = ViewOptions(),
                   auto: float | None = None) -> int:
    """Present ``lesson`` screen by screen; returns the exit code (0 after q)."""
    from shapetrace.app.lessons import lesson_screens

    return run_interactive(PresentScreen(lesson, lesson_screens(lesson), options), console, auto)
