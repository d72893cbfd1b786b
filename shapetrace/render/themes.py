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
