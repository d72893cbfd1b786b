"""Faults of shapetrace itself, said as findings rather than crashes.

Inference runs over code nobody here wrote: where working out one op's names fails (a bug of
shapetrace, never of the traced code), that op's results are left unnamed and every other op is
inferred as usual (:func:`.infer.record.op_unnamed`); where one diagnostic rule fails, the others
still run. Each fault becomes a note here, so the table never claims that something was checked when
it was not. With ``SHAPETRACE_STRICT=1`` (the CLI's ``--traceback`` sets it; shapetrace's own tests
set ``SHAPETRACE_TEST=1``, which counts the same) the fault is raised instead, with its traceback.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from shapetrace.engine.diagnostic import Diagnostic
from shapetrace.engine.kinds import Kind

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis

_REPORT = "This is a fault of shapetrace, not of your code."
#: set to 1 to raise a fault of the inference or of a rule rather than say it as a note
STRICT = "SHAPETRACE_STRICT"


def faults_raise() -> bool:
    """Should a fault of shapetrace raise (``--traceback``, shapetrace's tests) rather than become a note?"""
    return os.environ.get(STRICT) == "1" or os.environ.get("SHAPETRACE_TEST") == "1"


def inference_faults(analysis: Analysis) -> list[Diagnostic]:
    """A note per op whose inference failed: its results are unnamed, so nothing about them was checked."""
    return [Kind.INFERENCE_FAILED.found(index, (
        f"shapetrace could not work out the names of {analysis.events[index].op} #{index} ({why}); its "
        f"results are left unnamed, so nothing that depends on them was checked. {_REPORT}"),
        "Please report it, with the script and the output of --traceback.")
        for index, why in analysis.unnamed_by_failure]


def check_failed(rule: str, exc: BaseException) -> Diagnostic:
    """A note for a diagnostic rule that failed on this trace (the other rules still ran)."""
    return Kind.CHECK_FAILED.found(None, (
        f"one of shapetrace's checks ({rule}) failed on this trace ({type(exc).__name__}: {exc}), so what "
        f"it looks for was not checked. {_REPORT}"), "Please report it, with the output of --traceback.")
