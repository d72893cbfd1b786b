"""Plain-data helpers for the classroom modes (step, predict, export); no Rich, no torch.

>>> long_name_map(["B", "H*d_k", "!T*H"])["H*d_k"]
'heads*d_head'
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING

from shapetrace.app.exportpath import check_export_path
from shapetrace.app.oprange import parse_op_range
from shapetrace.app.textinput import read_answers
from shapetrace.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import Event
    from shapetrace.engine.tracer import Trace

#: Axis names spelled out for beginners (``--long-names``).
LONG_NAMES = {"B": "batch", "T": "seq_len", "D": "d_model", "H": "heads", "d_k": "d_head"}
EXPLAIN_MODES = ("full", "brief")
THEMES = ("dark", "light")
PREDICT_MODES = ("shape", "strides")
#: The columns a table may be rendered at.
MIN_WIDTH, MAX_WIDTH = 40, 1000


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


@dataclass(frozen=True)
class ClassroomRequest:
    """The validated classroom options of one ``run`` or ``trace``: how the trace is shown and exported."""

    view: ViewOptions = ViewOptions()
    export: str | None = None
    theme: str = "light"
    step: bool = False
    auto: float | None = None
    predict: str | None = None
    answers: str | None = None
    force: bool = False
    static: bool = False
    ops: tuple[int, int] | None = None  #: --ops FIRST-LAST: export only these ops

    @classmethod
    def checked(cls, *, json_out: bool = False, all_ops: bool = False, ops: str | None = None,
                **options) -> ClassroomRequest:
        """Validate the options before any tensor is traced (UsageError on bad input).

        Args:
            json_out: ``--json``, which refuses the classroom modes and ``--export``.
            all_ops: ``--all``: no folding of repeated blocks.
            ops: ``--ops FIRST-LAST`` as typed (only with ``--export``).
            **options: the fields of :class:`ViewOptions` (width, compact, explain, long_names) and of
                this class (export, theme, step, auto, predict, answers, force, static) by name; one
                left out keeps its default.
        """
        view = ViewOptions(**{f.name: options.pop(f.name) for f in fields(ViewOptions) if f.name in options},
                           fold=not all_ops)
        request = cls(view, **options)
        request._check(json_out)
        return replace(request, ops=_checked_op_range(ops, request.export))

    def _check(self, json_out: bool) -> None:
        if json_out and (self.step or self.predict or self.export):
            raise UsageError("--json prints only the JSON trace: use it without --step, --predict or --export")
        _check_choice("--explain", self.view.explain, EXPLAIN_MODES)
        _check_choice("--theme", self.theme, THEMES)
        check_width(self.view.width)
        if self.export is not None:
            check_export_path(self.export, self.force)
        elif self.force or self.static:
            raise UsageError(f"{'--force' if self.force else '--static'} only works with --export PATH")
        _check_modes(self.step, self.auto, self.predict, self.answers)


def check_width(width: int | None) -> int | None:
    """``--width`` between 40 and 1000 columns (a UsageError otherwise: nothing is printed at -5)."""
    from shapetrace.attention.sizes import shown  # here: the checker's sandbox imports this module without attention

    if width is not None and not MIN_WIDTH <= width <= MAX_WIDTH:
        raise UsageError(f"--width {shown(width)}: use {MIN_WIDTH} to {MAX_WIDTH} columns")
    return width


def _checked_op_range(ops: str | None, export: str | None) -> tuple[int, int] | None:
    if ops is None:
        return None
    if export is None:
        raise UsageError("--ops FIRST-LAST only works with --export PATH (a range of ops for a slide)")
    return parse_op_range(ops)


def _check_choice(flag: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise UsageError(f"{flag} {value!r}: choose one of {', '.join(choices)}")


#: The longest ``--auto`` pause on one screen: an hour (``inf`` or ``1e308`` overflowed the terminal's wait:
#: 'OverflowError: timestamp out of range for platform time_t').
MAX_AUTO = 3600.0


def check_auto(seconds: float | None) -> float | None:
    """``--auto SECONDS`` (step, present): a finite number of seconds above 0, up to :data:`MAX_AUTO`.

    >>> check_auto(1.5)
    1.5
    """
    if seconds is not None and not (math.isfinite(seconds) and 0 < seconds <= MAX_AUTO):
        raise UsageError(f"--auto {seconds:g}: use a number of seconds above 0, up to {MAX_AUTO:g}")
    return seconds


def _check_modes(step: bool, auto: float | None, predict: str | None, answers: str | None) -> None:
    if step and predict:
        raise UsageError("--step and --predict are separate modes: use one at a time")
    if auto is not None and not step:
        raise UsageError("--auto SECONDS only works with --step")
    check_auto(auto)
    if predict is not None:
        _check_choice("--predict", predict, PREDICT_MODES)
    if answers is not None and predict is None:
        raise UsageError("--answers FILE only works with --predict")
    if answers is not None and answers != "-":
        read_answers(answers, "--answers")  # missing, a folder, too large, not UTF-8: answered now


def predict_mode(predict: bool, what: str | None) -> str | None:
    """``--predict`` alone means shape; ``--predict strides`` (a word after the flag) asks for strides too."""
    if what is not None and not predict:
        if what in PREDICT_MODES:
            raise UsageError(f"unexpected argument {what!r} (did you mean --predict {what}?)")
        raise UsageError(f"unexpected argument {what!r}: this command takes options only (see --help)")
    if what is not None:
        _check_choice("--predict", what, PREDICT_MODES)
    return (what or "shape") if predict else None


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
