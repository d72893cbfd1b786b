"""Plain-data helpers for the classroom modes (step, predict, export); no Rich, no torch.

>>> long_name_map(["B", "H*d_k", "!T*H"])["H*d_k"]
'heads*d_head'
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.tracer import Event, Trace

#: Axis names spelled out for beginners (``--long-names``).
LONG_NAMES = {"B": "batch", "T": "seq_len", "D": "d_model", "H": "heads", "d_k": "d_head"}
EXPLAIN_MODES = ("full", "brief")
THEMES = ("dark", "light")


@dataclass(frozen=True)
class ViewOptions:
    """How the trace is shown: on screen, in step mode and in exported files.

    Attributes:
        width: columns to render at (None: the terminal's width; 100 for exports).
        compact: drop the strides and contiguity columns for narrow or zoomed terminals.
        explain: ``"full"`` sentences or ``"brief"`` symbols under each op.
        long_names: spell out axis names (batch, seq_len, d_model, heads, d_head).
        fold: show a repeated block of ops (k and v split like q) as one line, and the input as a row;
            ``--all`` turns it off.
    """

    width: int | None = None
    compact: bool = False
    explain: str = "full"
    long_names: bool = False
    fold: bool = True


def _long(label: str) -> str:
    mixed = label.startswith("!")
    parts = [LONG_NAMES.get(p, p) for p in label.lstrip("!").split("*")]
    return ("!" if mixed else "") + "*".join(parts)


_SHORT_NAME = re.compile(r"(?<![\w])(" + "|".join(sorted(LONG_NAMES, key=len, reverse=True)) + r")(?![\w])")


def spell_long(text: str, long_names: dict[str, str] | None) -> str:
    """A sentence with its axis names spelled out as ``--long-names`` asks (``splits D into H × d_k`` ->
    ``splits d_model into heads × d_head``); unchanged when ``long_names`` is None."""
    if not long_names:
        return text
    return _SHORT_NAME.sub(lambda m: LONG_NAMES[m.group(1)], text)


def long_name_map(labels: Iterable[str | None]) -> dict[str, str]:
    """Map every axis label (plain, merged ``H*d_k`` or mixed ``!T*H``) to its long spelling."""
    return {label: _long(label) for label in labels if label}


def trace_labels(trace: Trace) -> set[str]:
    """Every axis label that appears in a trace's inputs and outputs."""
    return {d for e in trace.events for t in (*e.inputs, *e.outputs) for d in t.dims if d}


def names_for(trace: Trace, options: ViewOptions) -> dict[str, str] | None:
    """The ``long_names`` mapping the table renderers take, or None for short names."""
    return long_name_map(trace_labels(trace)) if options.long_names else None


def changes_layout(e: Event) -> bool:
    """True when an op's output differs from its first input in shape or strides."""
    o = e.output
    if o is None or not e.inputs or e.error:
        return False
    i = e.inputs[0]
    return o.shape != i.shape or o.stride != i.stride
