"""One head's attention scores and weights as a small heat map of Rich cells.

The engine (:func:`shapetrace.engine.findings.heat_map`) hands over plain 2-D lists;
this module only draws them. Cells carry a shade character as well as a colour,
so the picture survives without colour (tests, pipes, NO_COLOR).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.table import Table
from rich.text import Text

SHADES = "░▒▓█"
MASKED = "··"
NAN = "!!"
PALETTE = ["#1d3557", "#457b9d", "#e9c46a", "#f4a261"]


def _level(value: float, lo: float, hi: float) -> int:
    if hi <= lo:
        return len(SHADES) - 1
    return min(len(SHADES) - 1, int((value - lo) / (hi - lo) * len(SHADES)))


def grid_text(grid: Sequence[Sequence[float]], lo: float | None = None, hi: float | None = None,
              zero_is_masked: bool = False) -> list[Text]:
    """One Text line per row: two cells per value, ``··`` for -inf (masked, or an exact 0 weight
    when ``zero_is_masked``), ``!!`` for NaN."""
    finite = [v for row in grid for v in row if math.isfinite(v)]
    lo = min(finite) if lo is None and finite else (lo or 0.0)
    hi = max(finite) if hi is None and finite else (hi if hi is not None else 1.0)
    lines = []
    for i, row in enumerate(grid):
        line = Text(f"{i:>3} ", style="dim")
        for v in row:
            if math.isnan(v):
                line.append(NAN, style="bold red")
            elif math.isinf(v) or (zero_is_masked and v == 0.0):
                line.append(MASKED, style="dim")
            else:
                k = _level(v, lo, hi)
                line.append(SHADES[k] * 2, style=PALETTE[k])
        lines.append(line)
    return lines


def scores_title(masked: bool, masked_run: bool | None) -> str:
    """The scores panel's title: "after masking" only when an entry is masked; a run with no mask at all
    (cross-attention with --kv-len alone) says so rather than "no entry masked here"."""
    if masked:
        return "scores after masking"
    return "scores (no mask in this run)" if masked_run is False else "scores (no entry masked here)"


class HeatMap:
    """Masked scores and weights of one head, side by side, with a legend."""

    def __init__(self, heat: dict, q_name: str = "T", k_name: str = "T",
                 lead: tuple[str, str] = ("sequence", "head"), roles: bool = True, masked_run: bool | None = None):
        self.heat, self.q_name, self.k_name = heat, q_name, k_name
        self.lead, self.roles = lead, roles
        self.masked_run = masked_run  # False: the run applies no mask at all (None: not known)

    def _panel(self, title: str, grid, lo=None, hi=None, zero_is_masked: bool = False) -> Group:
        n_k = len(grid[0]) if grid else 0
        cols = Text("    " + "".join(f"{j % 100:<2}" if j % 2 == 0 else "  " for j in range(n_k)), style="dim")
        return Group(Text(title, style="bold"), cols, *grid_text(grid, lo, hi, zero_is_masked))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        h = self.heat
        n_q, n_k = h["shape"]
        crop = "" if tuple(h["crop"]) == (n_q, n_k) else f" · first {h['crop'][0]}×{h['crop'][1]} shown"
        rows, cols = ("queries ", "keys ") if self.roles else ("", "")
        yield Text(f"\n{self.lead[0]} {h['batch']}, {self.lead[1]} {h['head']} · rows: {rows}{self.q_name}={n_q} · "
                   f"columns: {cols}{self.k_name}={n_k}{crop}", style="bold")
        panels = []
        if h.get("scores") is not None:
            masked = any(v == -math.inf for row in h["scores"] for v in row)
            title = scores_title(masked, self.masked_run)
            panels.append(self._panel(title, h["scores"]))
        top = max((v for row in h["weights"] for v in row if math.isfinite(v)), default=1.0)
        panels.append(self._panel("weights = softmax(scores)", h["weights"], 0.0, top or 1.0, True))
        grid = Table.grid(padding=(0, 4))
        for _ in panels:
            grid.add_column()
        grid.add_row(*panels)
        yield grid
        yield Text(f"{SHADES[0]*2} low … {SHADES[-1]*2} high (scores: min…max of this head; weights: 0…max) · "
                   f"{MASKED} masked (score -inf, weight exactly 0) · {NAN} NaN", style="dim")
