"""The colours of exported files: a light theme for projectors and paper, a dark one for a terminal look."""

from __future__ import annotations

from rich.terminal_theme import MONOKAI, TerminalTheme

#: White background, ANSI colours darkened so yellow and cyan stay readable on paper.
LIGHT_THEME = TerminalTheme(
    (255, 255, 255), (30, 30, 30),
    [(30, 30, 30), (180, 25, 25), (0, 115, 0), (155, 95, 0), (25, 65, 190), (145, 30, 145),
     (0, 115, 135), (110, 110, 110)],
    [(85, 85, 85), (205, 40, 40), (20, 140, 20), (175, 110, 0), (45, 95, 220), (170, 50, 170),
     (0, 135, 155), (40, 40, 40)],
)
TERMINAL_THEMES = {"light": LIGHT_THEME, "dark": MONOKAI}

#: The colour of dim text in exports: Rich blends dim text halfway to the background, which reads at
#: 2.9:1 on the page's light panel; these pass WCAG AA (4.5:1) on every background of their theme.
DIM_COLOURS = {"light": "#595959", "dark": "#a8a8a8"}


def readable_segments(console, renderable, theme: str):
    """``renderable`` rendered on ``console`` as :class:`rich.segment.Segments` whose dim text has the
    theme's readable dim colour instead (a dim text with its own colour keeps it, undimmed)."""
    from rich.segment import Segment, Segments
    from rich.style import Style

    colour = DIM_COLOURS[theme]

    def undim(segment: Segment) -> Segment:
        style = segment.style
        if style is None or not style.dim:
            return segment
        own = style.color is not None and not style.color.is_default
        fix = Style(dim=False) if own else Style(dim=False, color=colour)
        return Segment(segment.text, style + fix, segment.control)

    return Segments([undim(s) for s in console.render(renderable)])
