"""Run the checker in a separate process and collect verdicts (parent side; no torch).

The child (:mod:`shapetrace.worker`) gets a memory cap, a time limit per job and a
bounded stdout; this side adds a hard wall-clock limit and turns a killed
child into a verdict (timeout, out-of-memory or crash), never a traceback.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

DEFAULT_TIME_LIMIT = 10.0
DEFAULT_MEMORY_MB = 3072
#: Seconds allowed for the child to start (importing torch on a busy machine).
STARTUP_GRACE = 90.0


@dataclass(frozen=True)
class Job:
    """One file to check against one exercise."""

    exercise: str
    file: str


def _package_parent() -> str:
    return str(Path(__file__).resolve().parents[2])


def _dead_child_verdict(job: Job, returncode: int, timed_out: bool, stderr: str, limit: float) -> dict:
    if timed_out or returncode == -signal.SIGXCPU:
        return {"exercise": job.exercise, "verdict": "timeout", "summary":
                f"your file ran for more than {limit:g} s and was stopped (the checker killed it)",
                "explanation": ["an endless loop, or a slow operation that could not be interrupted"]}
    if returncode == -signal.SIGKILL:
        return {"exercise": job.exercise, "verdict": "out-of-memory", "summary":
                "the checker process was killed, most likely for using too much memory", "explanation": []}
    tail = stderr.strip().splitlines()[-3:]
    return {"exercise": job.exercise, "verdict": "crash", "summary":
            f"the checker process died (exit code {returncode}) while running your file",
            "explanation": tail}


def _run_child(jobs: list[Job], lessons: str, limit: float, memory_mb: int, width: int,
               workdir: str) -> tuple[dict[int, dict], int, bool, str]:
    result = os.path.join(workdir, "result.jsonl")
    request = os.path.join(workdir, "request.json")
    if os.path.exists(result):
        os.remove(result)
    with open(request, "w", encoding="utf-8") as fh:
        json.dump({"lessons": lessons, "jobs": [j.__dict__ for j in jobs], "time_limit": limit,
                   "memory_bytes": memory_mb << 20, "width": width, "result": result}, fh)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_package_parent(), env.get("PYTHONPATH")) if p)
    env.setdefault("OMP_NUM_THREADS", "1")
    proc = subprocess.Popen([sys.executable, "-m", "shapetrace.worker", request],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env, start_new_session=True, cwd=workdir)
    timed_out = False
    try:
        _, err = proc.communicate(timeout=STARTUP_GRACE + (limit + 5) * len(jobs))
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
    done: dict[int, dict] = {}
    if os.path.exists(result):
        with open(result, encoding="utf-8") as fh:
            for line in fh:
                try:
                    item = json.loads(line)
                except json.JSONDecodeError:
                    continue
                done[item["job"]] = item["verdict"]
    return done, proc.returncode, timed_out, (err or b"")[-4000:].decode("utf-8", "replace")


def check_files(jobs: list[Job], lessons: str | Path, time_limit: float = DEFAULT_TIME_LIMIT,
                memory_mb: int = DEFAULT_MEMORY_MB, width: int = 80) -> list[dict]:
    """Verdict dictionaries for ``jobs``, in order; one child process for as many jobs as it survives."""
    verdicts: list[dict | None] = [None] * len(jobs)
    pending = list(range(len(jobs)))
    with tempfile.TemporaryDirectory(prefix="shapetrace-check-") as workdir:
        while pending:
            batch = [jobs[i] for i in pending]
            done, code, timed_out, err = _run_child(batch, str(lessons), time_limit, memory_mb, width, workdir)
            for k, v in done.items():
                verdicts[pending[k]] = v
            missing = [pending[k] for k in range(len(batch)) if k not in done]
            if missing:
                first = missing[0]
                verdicts[first] = _dead_child_verdict(jobs[first], code, timed_out, err, time_limit)
                missing = missing[1:]
            pending = missing
    return [v for v in verdicts if v is not None]


def check_file(exercise: str, file: str | Path, lessons: str | Path, **kw) -> dict:
    """The verdict for one file."""
    return check_files([Job(exercise, str(Path(file).resolve()))], lessons, **kw)[0]
