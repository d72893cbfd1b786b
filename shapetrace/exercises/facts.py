"""What the child reports about one call of the learner's function, as plain JSON-able data.

Runs in the checker's child (imports torch through the tracer's results). These facts only explain a
verdict (the learner's line, the traced ops, what copied); the parent decides pass or fail from the
values alone, so a forged fact can mislead an explanation but never pass a wrong answer.
"""

from __future__ import annotations

from typing import Any

from shapetrace.exercises.calls import message_of
from shapetrace.exercises.explain_check import crash_lines, diagnostics_of, in_place_line, layout_copies

TEXT_LIMIT = 4000


def exc_info(exc: BaseException | None, timed_out: bool = False) -> dict | None:
    if exc is None:
        return None
    text, unshown = ("", "") if timed_out else message_of(exc)
    return {"type": type(exc).__name__, "mro": [c.__name__ for c in type(exc).__mro__],
            "message": text[:TEXT_LIMIT], "unshown": unshown, "timed_out": timed_out}


def event_key(e) -> dict[str, Any]:
    out = e.output
    return {"index": e.index, "op": e.op, "shape": list(out.shape) if out else None,
            "dims": list(out.dims) if out else None, "error": bool(e.error), "args": e.args,
            "inputs": [list(t.shape) for t in e.inputs],
            "source": e.source, "code": e.code}


def load_facts(got, path: str, timed_out: bool = False) -> dict[str, Any]:
    """Facts about loading the learner's file (it raised, or lacks the function)."""
    return {"exc": exc_info(got.exc, timed_out), "frame": list(got.frame) if got.frame else None,
            "output": got.output, "output_total": got.output_total}


def learner_facts(got, path: str, timed_out: bool, short: str, type_name: str) -> dict[str, Any]:
    """Facts about one call: exception, line, prints, allocations, and the traced ops."""
    trace = got.trace
    facts = load_facts(got, path, timed_out)
    facts.update(short=short, type=type_name, alloc_bytes=got.alloc_bytes,
                 events=[event_key(e) for e in trace.events] if trace is not None else [],
                 diagnostics=diagnostics_of(trace), crash_lines=crash_lines(trace),
                 copies=layout_copies(trace), allocs=layout_copies(trace, allocs=True),
                 in_place=list(in_place_line(trace, path)))
    return facts
