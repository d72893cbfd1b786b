"""``--ops 9-12``: export only a range of ops (a slide), checked before anything is traced.

>>> parse_op_range("9-12")
(9, 12)
>>> parse_op_range("4")
(4, 4)
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

from shapetrace.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.report import Report

_RANGE = re.compile(r"(\d{1,7})(?:-(\d{1,7}))?")


def parse_op_range(text: str) -> tuple[int, int]:
    """``first-last`` (op numbers as printed, ``#0`` first, both included) or one op number.

    Raises:
        UsageError: not a range of op numbers, or a range that ends before it starts.
    """
    match = _RANGE.fullmatch(text.strip())
    if not match:
        raise UsageError(f"--ops {text!r}: give op numbers as printed, e.g. --ops 9-12 or --ops 10")
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) is not None else first
    if last < first:
        raise UsageError(f"--ops {text}: the range ends before it starts (use --ops {last}-{first})")
    return first, last


def ops_in_range(report: Report, first: int, last: int) -> Report:
    """The report with only ops ``#first`` to ``#last`` (numbers kept as printed), their findings, their
    backward rows (with ``run --backward``), and a header line saying which part of the run it is.

    Raises:
        UsageError: the range holds no op of this run.
    """
    events = [e for e in report.events if first <= e.index <= last]
    total = len(report.events)
    if not events:
        raise UsageError(f"--ops {first}-{last}: this run has ops #0-#{total - 1}")
    shown = {e.index for e in events}
    header = dict(report.header)
    lines = list(header.get("lines", []))
    lines.append(f"ops #{events[0].index}-#{events[-1].index} of #0-#{total - 1}")
    header["lines"] = lines
    return replace(report, events=events, header=header,
                   diagnostics=[d for d in report.diagnostics if d.event in shown],
                   backward=_backward_of(report.backward, shown))


def _backward_of(backward, shown: set[int]):
    """The backward's rows of the ops shown (what autograd keeps stays the whole run's); None stays None."""
    if backward is None:
        return None
    return replace(backward, rows=tuple(r for r in backward.rows if r.event in shown))
