"""Check a learner's file: draw inputs, run the file in a sandboxed child, judge here.

The parent (this process) never imports the learner's code. It draws fresh random inputs for every
check and sends them as values (the seed stays here), starts :mod:`shapetrace.worker` in the kernel
sandbox (:mod:`.sandbox`, :mod:`.isolation`, :mod:`.confine`), reads back bounded plain data
(:mod:`.plain`: no pickle, no code, no tensor subclass survives the trip) and decides the verdict with
:mod:`.judge`, a case at a time as the child sends them (:class:`_Answers`: the first wrong case ends the
run). Nothing the child writes is a verdict. A pass from a sandbox that lacked a layer is
``unverified``: shown, never recorded. A child that dies, hangs
or floods becomes a verdict for the case it was running; a checker that cannot even start raises
:class:`CheckerError`, which is never blamed on the learner.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import secrets
import signal
import stat
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from shapetrace.errors import CheckerError

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


#: Every layer of the sandbox: bubblewrap; outside it, started as root, nobody instead of root
#: (:func:`.sandbox.plain_user`; inside bubblewrap the sandbox never maps to root); then what the child puts
#: on itself (:data:`.confine.LAYERS`).
ALL_LAYERS = ("bwrap", "user", "dumpable", "rlimits", "landlock", "seccomp")


@dataclass(frozen=True)
class Job:
    """One file to check against one exercise."""

    exercise: str
    file: str
    show_all: bool = False   # the traced table shows the calls without a row of their own (``--all``)
    cpus: tuple[int, ...] = ()   # the CPUs the check runs on (a grade's slot, :mod:`.cpus`); () : any
    tables: bool = True   # each case's traced table, shown when the verdict fails on it; a grade shows none


def _probe_seed(seed: int) -> int:
    """The memory probe's own seed: the probe's input says nothing about the small cases' inputs."""
    digest = hashlib.sha256(f"probe {seed}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def _request(job: Job, source: str, ex, limit: float, memory_mb: int, width: int, layers=ALL_LAYERS) -> dict:
    """The child's request, less its inputs: the file's text and the limits (no seed, no paths to read)."""
    return {"path": job.file, "source": source, "function": ex.function, "inputs": ex.inputs, "kind": ex.kind,
            "time_limit": limit, "memory_bytes": memory_mb << 20, "width": width, "show_all": job.show_all,
            "tables": job.tables,
            "layers": [name for name in layers if name not in ("bwrap", "user")],
            "watch_autograd": bool(ex.autograd),  # a backward by hand, judged against autograd: not by autograd
            "cpus": list(job.cpus),
            "replies": ex.kind != "test"}  # the parent's word after each case (_Answers): no case after a wrong one


def _case_request(cases: list) -> tuple[list[dict], bytes]:
    """The input cases as plain data: their names and sizes in JSON, their values as raw storages."""
    from shapetrace.exercises.plain import pack

    meta = [{"case": c.case, "names": list(c.names), "dims": dict(c.dims), "sizes": dict(c.sizes)} for c in cases]
    return meta, pack({f"case{i}": c.fresh() for i, c in enumerate(cases)})


class _Unreadable(Exception):
    pass


def _learned(body: bytes, limit: int | None = None):
    from shapetrace.exercises.judge import Learned
    from shapetrace.exercises.plain import MAX_TENSOR_BYTES, NotPlain, unpack
    from shapetrace.exercises.untrusted import Unreadable, checked_facts

    if not body:
        return Learned()
    try:  # (unpack cleans every string of control characters; the facts must have the child's types)
        values, facts = unpack(body, limit or MAX_TENSOR_BYTES)
        facts = checked_facts(facts)
    except (NotPlain, Unreadable) as exc:  # a forged or unreadable body is the learner's doing, never a pass
        raise _Unreadable(str(exc)[:200]) from None
    args = values.get("args") if isinstance(values.get("args"), list) else []
    return Learned(value=values.get("value"), args=args, facts=facts)


def _dead_verdict(judge, run, inputs, limit: float):
    """The verdict for the phase the child died in (no frame came back for it)."""
    where = dict(case=inputs.case, sizes=inputs.describe()) if inputs is not None else {}
    if run.killed_for == "deadline" or run.returncode == -signal.SIGXCPU:
        return judge.timeout(None, "", {}, limit, loading=inputs is None,
                             stopped_by="deadline" if run.killed_for == "deadline" else "cpu-limit", **where)
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


#: A wrong case's table while it is on its way: what a verdict judged before it came holds in its place (never a
#: text the child could send: strings from the child are cleaned of control characters).
_PENDING = "\0the table of this case\0"


class _Answers:
    """The parent's word to the child after each case's result (:func:`shapetrace.worker._answered`):
    ``n`` when the judge finds the case right (the next case runs), else ``t`` (send the traced table of
    this case, the one the verdict shows; ``s`` when the job shows none): the first wrong case decides the
    verdict, so no later case runs and no other table is rendered. ``right``: the cases found right, in
    order from case 0; ``wrong``: the first wrong case and its verdict (each case judged once)."""

    def __init__(self, judge, limit: float, tables: bool):
        self.judge, self.limit, self.tables = judge, limit, tables
        self.right: set[int] = set()
        self.wrong: tuple[int, object] | None = None
        self.settled = False   # a case was wrong, or came out of order: nothing more is judged here

    def __call__(self, frame) -> bytes:
        i = frame.header.get("case")
        if self.settled or type(i) is not int or i != len(self.right) or i >= len(self.judge.cases):
            self.settled = True
            return b"s"   # out of order or again: the verdict is settled from the frames as they are
        self.settled = True
        try:
            got = _learned(frame.body)
        except _Unreadable:
            return b"s"
        if len(got.args) != len(self.judge.cases[i].args):
            return b"s"
        got.facts["table"] = _PENDING
        with _JUDGE_LOCK:
            found = self.judge.case(self.judge.cases[i], got, self.limit)
        if found is None:
            self.right.add(i)
            self.settled = False
            return b"n"
        self.wrong = (i, found)
        return b"t" if self.tables else b"s"


def _decide(judge, run, cases, limit: float, answers: _Answers | None = None):
    """The verdict from the child's frames: the first case that is wrong (``answers``: the cases already
    judged as they came, :class:`_Answers`), with the table the child sent for it."""
    loaded, results, tables = None, {}, {}
    for frame in run.frames:
        kind = frame.header.get("kind")
        try:
            if kind == "loaded":
                loaded = _learned(frame.body)
            elif kind == "case" and frame.header.get("case") in range(len(cases)) \
                    and frame.header["case"] not in results:   # (the first result of a case: the one answered)
                got = _learned(frame.body)
                if len(got.args) != len(cases[frame.header["case"]].args):
                    raise _Unreadable("a result without the arguments the function was called with")
                results[frame.header["case"]] = got
            elif kind == "table" and frame.header.get("case") in range(len(cases)):
                tables[frame.header["case"]] = str(_learned(frame.body).facts.get("table", ""))
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
        if answers is not None and i in answers.right:
            continue
        if answers is not None and answers.wrong is not None and answers.wrong[0] == i:
            found = answers.wrong[1]
            if found.table == _PENDING:   # (a verdict that shows its case's table: the one the child sent)
                found.table = tables.get(i, "")
            return found
        if i in tables:
            results[i].facts["table"] = tables[i]
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


def unverified(verdict: dict, missing: list[str]) -> dict:
    """A pass from a sandbox that lacked a layer: shown, never recorded (the verdict is ``unverified``)."""
    if verdict.get("verdict") != "pass" or not missing:
        return verdict
    return dict(verdict, verdict="unverified",
                summary=f"{verdict['summary']}; not recorded: the sandbox ran without {missing[0]}",
                explanation=[f"missing: {m}" for m in missing] + list(verdict.get("explanation") or []))


#: The largest learner file the checker reads (a lesson answer is a few hundred bytes).
MAX_SOURCE_BYTES = 1 << 20


def _read_source(job: Job) -> str:
    """The learner's file: a regular file, opened without blocking (a FIFO never hangs the checker), capped."""
    try:
        fd = os.open(job.file, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise CheckerError(f"cannot read {job.file}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CheckerError(f"{job.file} is not a regular file")
        if st.st_size > MAX_SOURCE_BYTES:
            raise CheckerError(f"{job.file} holds {st.st_size} bytes; the checker reads up to {MAX_SOURCE_BYTES}")
        data = os.read(fd, MAX_SOURCE_BYTES + 1)
    except OSError as exc:
        raise CheckerError(f"cannot read {job.file}: {exc.strerror}") from None
    finally:
        os.close(fd)
    return data[:MAX_SOURCE_BYTES].decode("utf-8", errors="replace")


def check_job(job: Job, lessons: str | Path, time_limit: float = DEFAULT_TIME_LIMIT,
              memory_mb: int = DEFAULT_MEMORY_MB, width: int = 80, seed: int | None = None,
              layers: tuple[str, ...] = ALL_LAYERS, progress=None) -> dict:
    """The verdict dictionary for one file; raises :class:`CheckerError` if the checker cannot run, and
    :class:`~shapetrace.exercises.digests.TamperedError` if what it would run differs from its digests.

    The inputs are drawn here and sent as values (the seed never leaves this process); the fork server
    (:mod:`.forks`) starts in the background while this process loads the reference, then the check is
    forked from it. ``layers``: the tests of each layer turn the others off (a pass is then
    ``unverified``); the commands never do.
    ``progress``: called with (done, total) as the check goes (cases; for a test, implementations).
    """
    from shapetrace.exercises.content import load
    from shapetrace.exercises.digests import verify
    from shapetrace.exercises.sandbox import warm_up

    if "bwrap" in layers:
        warm_up()  # the fork server imports torch while this process loads the reference
    curriculum = load(Path(lessons))
    ex = curriculum.exercise(job.exercise)
    verify(curriculum.root)  # the solutions, the judge and the broken versions are as recorded, or nothing runs
    source = _read_source(job)
    seed = secrets.randbits(63) if seed is None else seed
    if ex.kind == "test":
        return _check_test(ex, job, source, seed, time_limit, max(memory_mb, MIN_MEMORY_MB), width, layers,
                           progress)
    from shapetrace.exercises import inputs as inp
    from shapetrace.exercises.probe import plan
    from shapetrace.exercises.sandbox import finish_child, start_child

    cases = inp.draw(ex.inputs, random.Random(seed))
    probe = plan(ex)  # the child's memory cap, known without running the reference
    meta = _request(job, source, ex, time_limit, max(memory_mb, MIN_MEMORY_MB), width, layers)
    meta["cases"], body = _case_request(cases)
    if probe is not None:
        probe = dict(probe, seed=_probe_seed(seed))
    meta["probe"] = probe
    with _JUDGE_LOCK:
        judge = _prepare(ex, job, source, cases, probe)
    answers = _Answers(judge, time_limit, job.tables) if meta["replies"] else None
    proc = start_child(meta, body, time_limit, len(cases) + 1, "bwrap" in layers, drop="user" in layers,
                       replies=answers is not None)
    run = finish_child(proc, time_limit, len(cases) + (probe is not None),
                       probe["out_bytes"] if probe is not None else 0, progress, answers)
    if not run.ready:
        raise _not_started(run, memory_mb)
    with _JUDGE_LOCK:
        return unverified(_decide(judge, run, judge.cases, time_limit, answers).to_dict(), run.missing)


def _prepare(ex, job: Job, source: str, cases: list, probe: dict | None):
    from shapetrace.exercises.judge import Judge
    from shapetrace.exercises.probe import prepare
    from shapetrace.exercises.untrusted import clean

    judge = Judge(ex, job.file, cases, clean(source))  # (the judge shows lines of it)
    judge.probe = prepare(ex, judge.reference, probe["seed"]) if probe is not None else None
    return judge


#: How many times a learner's test runs on each implementation, each in its own fresh child: it must
#: pass the reference and fail each broken version every time.
TEST_RUNS = 3


def _check_test(ex, job: Job, source: str, seed: int, limit: float, memory_mb: int, width: int,
                layers=ALL_LAYERS, progress=None) -> dict:
    """A learner-written test: one fresh child per implementation, none told which one it holds.

    The request is the same for every implementation; the implementation's code goes in the secret
    section, which only the child's implementation process reads (:mod:`.remote`), never the test's.
    The children start in an order drawn at random for this check alone (:func:`start_order`), every one
    of them runs, and the verdict is settled only when all have finished: whatever a test can read of
    the order it ran in (its request id, a PID, what a sibling's run left in the page cache), the order
    itself says nothing about which implementation it holds."""
    from shapetrace.exercises.testjudge import TestJudge
    from shapetrace.exercises.untrusted import clean

    judge = TestJudge(ex, job.file, seed, clean(source))  # (the judge shows lines of it)
    runs = run_implementations(judge, ex, job, source, limit, memory_mb, width, layers, progress)
    missing = list(dict.fromkeys(m for run in runs.values() for m in run.missing))
    if not all(run.ready for run in runs.values()):
        raise _not_started(next(run for run in runs.values() if not run.ready), memory_mb)
    with _JUDGE_LOCK:
        return unverified(_decide_test(judge, runs, limit).to_dict(), missing)


def start_order(count: int) -> list[int]:
    """The order the implementations' children start in: drawn from the operating system's randomness
    for each check (never from the check's seed, which a teacher may fix), the reference in no fixed place."""
    order = list(range(count))
    random.SystemRandom().shuffle(order)
    return order


def run_implementations(judge, ex, job: Job, source: str, limit: float, memory_mb: int, width: int,
                        layers=ALL_LAYERS, progress=None) -> dict:
    """``{implementation index: ChildRun}``: every implementation's child, started in :func:`start_order`,
    a few at a time, each one run to its end."""
    from shapetrace.exercises.sandbox import run_child

    meta = _request(job, source, ex, limit, memory_mb, width, layers)
    meta.update(subjects=list(ex.subjects), runs=TEST_RUNS)
    done = iter(range(1, len(judge.cases) + 1))   # (next() on an iterator is atomic in CPython)

    def one(i: int):
        secret = json.dumps({"code": judge.cases[i].code, "subjects": list(ex.subjects)}).encode()
        run = run_child(meta, b"", limit, TEST_RUNS + 1, "bwrap" in layers, secret, "user" in layers)
        if progress is not None:
            progress(next(done), len(judge.cases))
        return run

    order = start_order(len(judge.cases))
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        return dict(zip(order, pool.map(one, order)))


def _test_results(run):
    """What one implementation's child sent: (loaded, [one result per run]); raises _Unreadable."""
    loaded, got = None, []
    for frame in run.frames:
        kind = frame.header.get("kind")
        if kind == "loaded":
            loaded = _learned(frame.body)
        elif kind == "case" and isinstance(frame.header.get("case"), int):
            got.append(_learned(frame.body))
    return loaded, got


def _decide_test(judge, runs: dict, limit: float):
    """Each implementation's result is the first run that disagrees with the rest (or the last run);
    ``runs`` holds every implementation's child, by implementation."""
    results = {}
    for i, run in sorted(runs.items()):
        impl = judge.cases[i]
        try:
            loaded, got = _test_results(run)
        except _Unreadable as exc:
            return judge.verdict("crash", "the checker could not read back what your test did",
                                 explanation=[str(exc)])
        if loaded is None:
            return _dead_verdict(judge, run, None, limit)
        if loaded.raised:
            return judge.loading_failed(loaded)
        if len(got) < TEST_RUNS and not (got and got[-1].timed_out):  # (the child stops at a timed-out run)
            return _dead_verdict(judge, run, impl, limit)
        results[i] = _settled(got, impl.id)
    return judge.decide(results, limit)


def _settled(got: list, impl_id: str):
    """One result from several runs: a timeout first; then for the reference any run that raised, for a
    broken version any run that did not (a test must give the same answer every time)."""
    from shapetrace.exercises.testjudge import REFERENCE

    for g in got:
        if g.timed_out:
            return g
    want_raise = impl_id != REFERENCE
    for g in got:
        if g.raised != want_raise:
            return g
    return got[-1]


def check_files(jobs: list[Job], lessons: str | Path, time_limit: float = DEFAULT_TIME_LIMIT,
                memory_mb: int = DEFAULT_MEMORY_MB, width: int = 80, seed: int | None = None) -> list[dict]:
    """Verdict dictionaries for ``jobs``, in order; one sandboxed child per file, a few at a time."""
    def one(job: Job) -> dict:
        return check_job(job, lessons, time_limit, memory_mb, width, seed)

    from shapetrace.exercises.content import load

    if jobs:   # the curriculum read once, here: CPython 3.11.7's ast.parse is not safe from several threads at once
        load(Path(lessons))   # ("SystemError: AST constructor recursion depth mismatch"); each job then finds it cached
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        return list(pool.map(one, jobs))


def check_file(exercise: str, file: str | Path, lessons: str | Path, **kw) -> dict:
    """The verdict for one file."""
    show_all = bool(kw.pop("show_all", False))
    return check_job(Job(exercise, str(Path(file).resolve()), show_all), lessons, **kw)
