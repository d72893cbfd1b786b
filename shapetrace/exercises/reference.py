"""The reference solution traced on one input case: shown with the solution, never with a verdict."""

from __future__ import annotations

import random


def reference_trace(ex):
    """``(trace, sizes)`` of the exercise's solution on a fixed distinct-sizes case (lesson code only)."""
    if ex.kind == "test":  # the solution is a test: there is no function of tensors to trace
        return None, ""
    from shapetrace.exercises import inputs as inp
    from shapetrace.exercises.calls import call

    case = inp.draw(ex.inputs, random.Random(0))[0]
    fn = ex.solution_function()
    return call(fn, case.fresh(), case.names, case.dims).trace, case.describe()
