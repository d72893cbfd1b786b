"""Check a learner's file: draw inputs, run the file in a locked-down child, judge here.

The parent (this process) never imports the learner's code. It draws fresh random inputs for every
check, starts :mod:`shapetrace.worker` in its own session (:mod:`.sandbox`), loads what comes back as
plain data (``torch.load(weights_only=True)``: no code and no tensor subclass survives the trip) and
decides the verdict with :mod:`.judge`. Nothing the child writes is a verdict. A child that dies, hangs
or floods becomes a verdict for the case it was running; a checker that cannot even start raises
:class:`CheckerError`, which is never blamed on the learner.
"""

from __future__ import annotations

import io
import json
import os
import random
import secrets
import signal
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from shapetrace.errors import ShapetraceError

DEFAULT_TIME_LIMIT = 10.0
#: Memory (MiB) the learner's code may use on top of what the checker itself needs (torch is loaded).
DEFAULT_MEMORY_MB = 3072
MIN_MEMORY_MB = 256
#: The most input cases a check runs (the CPU limit of the child is set from it).
_PHASES = 6
#: Children run at once when checking many files.
PARALLEL = 2
#: Judging swaps sys.stdout around lesson code and traces it: one judge at a time in this process.
_JUDGE_LOCK = threading.Lock()


class CheckerError(ShapetraceError):
    """The checker itself failed (not the learner's code): no verdict, nothing recorded."""

    exit_code = 2


@dataclass(frozen=True)
class Job:
    """One file to check against one exercise."""

    exercise: str
    file: str


def _git_dirs(root: Path) -> list[str]:
    """The repository's git folders (a worktree's ``.git`` file points at one; objects hold the solutions)."""
    dot = root.parent / ".git"
    if dot.is_dir():
        return [str(dot)]
    try:
        line = dot.read_text(encoding="utf-8").strip()
    except OSError:
        return []
    if not line.startswith("gitdir:"):
        return []
    gitdir = Path(line.split(":", 1)[1].strip())
    return [str(gitdir), str(gitdir.parent.parent)]


def _protected(curriculum) -> list[str]:
    """What the learner's code may not read: every solution, the lessons folder, the git history."""
    return ([str(ex.solution) for ex in curriculum.exercises] + [str(curriculum.root)]
            + _git_dirs(Path(curriculum.root).resolve()))


def _write_request(workdir: str, job: Job, source: str, ex, curriculum, seed: int, limit: float,
                   memory_mb: int, width: int, judge_order: list = (), probe=None) -> str:
    """The child's request: where the file is, its text, and the seed both sides draw the inputs from."""
    meta = {"path": job.file, "source": source, "function": ex.function, "inputs": ex.inputs, "seed": seed,
            "time_limit": limit, "memory_bytes": memory_mb << 20, "width": width,
            "protected": _protected(curriculum), "kind": ex.kind,
            "probe": probe}
    if ex.kind == "test":  # the implementations as code, in the judge's order, with no names attached
        meta.update(subjects=list(ex.subjects), implementations=[impl.code for impl in judge_order])
    path = os.path.join(workdir, "request.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(meta, fh)
    os.chmod(path, 0o644)
    return path


def _load_body(body: bytes):
    import torch

    if not body:
        return {}
    try:
        data = torch.load(io.BytesIO(body), weights_only=True)
    except Exception as exc:  # a forged or unreadable body is the learner's doing, never a pass
        raise _Unreadable(str(exc).splitlines()[0][:200]) from None
    return data if isinstance(data, dict) else {}


class _Unreadable(Exception):
    pass


def _learned(body: bytes):
    from shapetrace.exercises.judge import Learned

    data = _load_body(body)
    try:
        facts = json.loads(data.get("facts", "{}"))
    except (TypeError, ValueError):
        facts = {}
    args = data.get("args") if isinstance(data.get("args"), list) else []
    return Learned(value=data.get("value"), args=args, facts=facts if isinstance(facts, dict) else {})


def _dead_verdict(judge, run, inputs, limit: float):
    """The verdict for the phase the child died in (no frame came back for it)."""
    where = dict(case=inputs.case, sizes=inputs.describe()) if inputs is not None else {}
    if run.killed_for == "deadline" or run.returncode == -signal.SIGXCPU:
        return judge.timeout(None, "", {}, limit, loading=inputs is None, **where)
    if run.killed_for == "channel":
        return judge.verdict("crash", "your function returned more data than the checker reads "
                             "(a correct answer is a few kilobytes)", **where)
    if run.bad_channel:
        return judge.verdict("crash", "the checker could not read your function's results: something in "
                             "your file wrote over the checker's channel", explanation=[run.bad_channel], **where)
    if run.returncode == -signal.SIGKILL:
        return judge.verdict("out-of-memory", "the checker process was killed, most likely for using too "
                             "much memory", **where)
    tail = [line[:300] for line in run.stderr.strip().splitlines()[-3:]]
    if run.returncode is not None and run.returncode >= 0:
        during = f"with {inputs.describe()}" if inputs is not None else "while loading your file"
        return judge.verdict("crash", f"your code ended the checker's process (exit code {run.returncode}) "
                             f"{during}, before your function returned", explanation=tail, **where)
    return judge.verdict("crash", f"the checker process died (signal {-(run.returncode or 0)}) while running "
                         "your file", explanation=tail, **where)


def _gave_up(judge, path: str):
    return judge.verdict("gave-up", "your file read the reference solution, and that counts as giving up",
                         explanation=[f"it tried to read {path}; the checker refused and stopped there",
                                      f"`shapetrace exercise solution {judge.ex.id} --give-up` shows the "
                                      "solution; write your own function to pass"])


def _decide(judge, run, cases, limit: float):
    loaded, results = None, {}
    for frame in run.frames:
        kind = frame.header.get("kind")
        if kind == "peek":
            return _gave_up(judge, str(frame.header.get("path", "")))
        try:
            if kind == "loaded":
                loaded = _learned(frame.body)
            elif kind == "case" and isinstance(frame.header.get("case"), int):
                results[frame.header["case"]] = _learned(frame.body)
        except _Unreadable as exc:
            return judge.verdict("crash", "the checker could not read back what your function returned",
                                 explanation=[str(exc)])
    if loaded is None:
        return _dead_verdict(judge, run, None, limit)
    if loaded.raised:
        return judge.loading_failed(loaded)
    if judge.ex.kind == "test":
        missing = next((impl for i, impl in enumerate(cases) if i not in results), None)
        return _dead_verdict(judge, run, missing, limit) if missing else judge.decide(results, limit)
    for i, inputs in enumerate(cases):
        if i not in results:
            return _dead_verdict(judge, run, inputs, limit)
        found = judge.case(inputs, results[i], limit)
        if found is not None:
            return found
    if judge.probe is not None:
        got = _probed(run.frames, len(cases))
        if got is None:
            return _dead_verdict(judge, run, judge.probe.inputs, limit)
        found = judge.large(got, results[0], limit)
        if found is not None:
            return found
    return judge.passed()


def _probed(frames, case: int):
    """What the learner's function did on the large input: its raw output, or the child's facts."""
    from shapetrace.exercises.judge import Learned
    from shapetrace.exercises.probe import received

    frame = next((f for f in frames if f.header.get("kind") == "probe" and f.header.get("case") == case), None)
    if frame is None:
        return None
    if frame.header.get("raw") is not True:
        if frame.header.get("shape") is not None:  # a tensor of another shape or dtype came back
            return Learned(facts={"shape": frame.header.get("shape"), "dtype": frame.header.get("dtype")})
        return _learned(frame.body)
    value = received(frame.header, frame.body)
    return Learned(value=value, facts={} if value is not None else {"unreadable": True})


def _not_started(run, memory_mb: int) -> CheckerError:
    tail = " ".join(run.stderr.strip().splitlines()[-2:])[:300]
    if run.killed_for == "deadline":
        why = "it did not start in time (is the machine very busy?)"
    else:
        why = f"it exited with code {run.returncode}" + (f": {tail}" if tail else "")
    return CheckerError(f"the checker itself could not start, so your file was not checked: {why}. "
                        f"(--memory-mb {memory_mb} is on top of what the checker needs; this is not your code)")


def check_job(job: Job, lessons: str | Path, time_limit: float = DEFAULT_TIME_LIMIT,
              memory_mb: int = DEFAULT_MEMORY_MB, width: int = 80, seed: int | None = None) -> dict:
    """The verdict dictionary for one file; raises :class:`CheckerError` if the checker cannot run.

    The child starts first; this process draws the same inputs from the same seed (a seed says no more
    than the inputs themselves, which the learner's function receives anyway) and loads the reference
    while the child imports torch.
    """
    from shapetrace.exercises.content import load
    from shapetrace.exercises.sandbox import finish_child, start_child, stop_child

    curriculum = load(Path(lessons))
    ex = curriculum.exercise(job.exercise)
    try:
        source = Path(job.file).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise CheckerError(f"cannot read {job.file}: {exc.strerror}") from None
    from shapetrace.exercises.probe import plan

    seed = secrets.randbits(63) if seed is None else seed
    tests = _prepare_tests(ex, job, source, seed) if ex.kind == "test" else None
    probe = plan(ex) if ex.kind != "test" else None  # the child's memory cap, known without torch
    with tempfile.TemporaryDirectory(prefix="shapetrace-check-") as workdir:
        os.chmod(workdir, 0o755)
        request = _write_request(workdir, job, source, ex, curriculum, seed, time_limit,
                                 max(memory_mb, MIN_MEMORY_MB), width, tests.cases if tests else [], probe)
        proc = start_child(request, workdir, time_limit, len(tests.cases) if tests else _PHASES)
        try:
            with _JUDGE_LOCK:
                judge = tests or _prepare(ex, job, source, seed)
        except BaseException:
            stop_child(proc)
            raise
        run = finish_child(proc, time_limit, len(judge.cases) + (probe is not None),
                           probe["out_bytes"] if probe is not None else 0)
    if not run.ready and not any(f.header.get("kind") == "peek" for f in run.frames):
        raise _not_started(run, memory_mb)
    with _JUDGE_LOCK:
        return _decide(judge, run, judge.cases, time_limit).to_dict()


def _prepare(ex, job: Job, source: str, seed: int):
    from shapetrace.exercises import inputs as inp
    from shapetrace.exercises.judge import Judge
    from shapetrace.exercises.probe import prepare

    judge = Judge(ex, job.file, inp.draw(ex.inputs, random.Random(seed)), source)
    judge.probe = prepare(ex, judge.reference, seed)
    return judge


def _prepare_tests(ex, job: Job, source: str, seed: int):
    from shapetrace.exercises.testjudge import TestJudge

    return TestJudge(ex, job.file, seed, source)


def check_files(jobs: list[Job], lessons: str | Path, time_limit: float = DEFAULT_TIME_LIMIT,
                memory_mb: int = DEFAULT_MEMORY_MB, width: int = 80, seed: int | None = None) -> list[dict]:
    """Verdict dictionaries for ``jobs``, in order; one locked-down child per file, a few at a time."""
    def one(job: Job) -> dict:
        return check_job(job, lessons, time_limit, memory_mb, width, seed)

    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        return list(pool.map(one, jobs))


def check_file(exercise: str, file: str | Path, lessons: str | Path, **kw) -> dict:
    """The verdict for one file."""
    return check_job(Job(exercise, str(Path(file).resolve())), lessons, **kw)
