"""The traced runs the live classroom's tests share, traced once per worker (imported by name: a
conftest.py here would shadow tests/conftest.py)."""

from __future__ import annotations

from functools import cache

from shapetrace.app.classroom import ViewOptions

RUNS = {
    "reference": {},
    "skip-transpose": {"broken": "skip-transpose"},
    # B = T = H = 4 (d_k = 8): equal sizes, where only the names tell two axes apart
    "equal-sizes": {"batch": 4, "seq_len": 4, "heads": 4, "d_model": 32},
}


@cache
def moments(run: str) -> tuple:
    """The predict moments of one of :data:`RUNS`, or of ``lesson N``."""
    if run.startswith("quiz "):  # "quiz strides": the first 4 questions of a topic of the quiz bank
        from shapetrace.live.moments import quiz_moments

        return tuple(quiz_moments(run.split()[1], 4))
    if run.startswith("lesson "):
        from shapetrace.live.moments import lesson_moments

        return tuple(lesson_moments(int(run.split()[1]))[1])
    from shapetrace.app.request import RunRequest
    from shapetrace.app.session import trace_request
    from shapetrace.live.moments import build_moments

    report = trace_request(RunRequest(**RUNS[run]).checked(), "cpu", None).report()
    return tuple(build_moments(report, ViewOptions()))


def fresh_class(run: str = "reference"):
    """A new class (no student yet) over one of :data:`RUNS`."""
    from shapetrace.live.classstate import LiveClass

    return LiveClass(list(moments(run)))
