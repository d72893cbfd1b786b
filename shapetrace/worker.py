"""The checker's child process: ``python -m shapetrace.worker REQUEST.json``.

An entry point, like ``__main__.py`` (so it sits at the top, above every layer): it composes the
judge (:mod:`shapetrace.exercises.judge`) with the Rich table renderer for the traced tables of a
verdict, so that ``exercises/`` itself never imports the rendering layer.

Caps its own address space (``RLIMIT_AS``) before importing torch, judges each
job under an alarm-based time limit, and appends one JSON line per job to the
result file, so the parent still learns which job was running if this process
is killed.
"""

from __future__ import annotations

import json
import resource
import sys


def _cap_memory(limit: int) -> None:
    if limit > 0:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        try:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
        except (ValueError, OSError):  # some platforms (macOS) refuse an address-space cap
            pass


def _cap_cpu(seconds: float) -> None:
    """A CPU-time cap from now on: stops a busy C-level loop that the alarm cannot interrupt."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(usage.ru_utime + usage.ru_stime + seconds) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard == resource.RLIM_INFINITY or soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
        except (ValueError, OSError):
            pass


def _timeout_verdict(exercise: str, limit: float, exc, path: str) -> dict:
    from shapetrace.exercises.calls import learner_frame
    from shapetrace.exercises.judge import Verdict

    frame = learner_frame(exc, path)
    v = Verdict(exercise, "timeout", f"your function ran for more than {limit:g} s and was stopped",
                explanation=["an endless loop, or work that grows much faster than the inputs; "
                             "the checker's inputs are tiny, so a correct answer takes milliseconds"],
                line=frame[0] if frame else None, code=frame[1] if frame else "")
    return v.to_dict()


def main(argv: list[str]) -> int:
    with open(argv[1], encoding="utf-8") as fh:
        request = json.load(fh)
    _cap_memory(int(request.get("memory_bytes", 0)))
    import torch

    torch.set_num_threads(1)
    from shapetrace.engine import diagnose, propagate, tracer  # noqa: F401  (before the clock starts)
    from shapetrace.exercises import judge as judge_mod  # noqa: F401  (import before the clock starts)
    from shapetrace.exercises.calls import CheckTimeout, start_clock, stop_clock
    from shapetrace.exercises.content import load
    from shapetrace.render import table as _table  # noqa: F401
    from shapetrace.render.exercise import trace_tables

    curriculum = load(request["lessons"])
    limit = float(request.get("time_limit", 10))
    _cap_cpu(limit * len(request["jobs"]) + 5)
    with open(request["result"], "a", encoding="utf-8") as out:
        for i, job in enumerate(request["jobs"]):
            exercise = curriculum.exercise(job["exercise"])
            try:
                start_clock(limit)
                verdict = judge_mod.judge(exercise, job["file"], int(request.get("width", 80)),
                                          tables=trace_tables).to_dict()
            except CheckTimeout as exc:
                verdict = _timeout_verdict(exercise.id, limit, exc, job["file"])
            finally:
                stop_clock()
            out.write(json.dumps({"job": i, "verdict": verdict}, default=str) + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
