"""A learner-written test cannot tell the reference's run from a broken version's (issue 34).

A learner's test that checks nothing passes if it can tell which implementation it was handed from
anything but what the implementation does: the order the checks started in (its PID outside its own
namespace, the fork server's request id in inherited frames and in memory, mount and pipe numbers, the
clock, the page cache), or a mark an earlier check left on a shared ``/tmp`` or ``/dev/shm``. Here such a
test (``SPOTTER``) reads every one of those channels and hands what it saw back in its exception; each
round runs it against every implementation of one test-writing exercise through the real fork server,
and for every channel we count the rounds in which the reference stands out (its value the smallest,
the largest, or the only one unlike the rest): a test that trusted that channel passes exactly then.

Fair means: no channel lets the reference stand out more often than a fair draw among the
implementations would (a binomial bound a fair draw passes with probability 1 - 1e-5 per channel
and way, so about 1 run in 1,000 of the whole test fails by chance). The
control runs the same spotter with the reference's child started first and the checks one at a time
(the order before issue 34): there the channels give the reference away, so the test can fail.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from shapetrace.exercises import checker, isolation
from shapetrace.exercises.checker import Job
from shapetrace.exercises.content import load
from shapetrace.exercises.testjudge import REFERENCE, TestJudge

CURRICULUM = load()
NO_BWRAP = isolation.bwrap_problem()
pytestmark = pytest.mark.skipif(bool(NO_BWRAP), reason=f"bubblewrap cannot start here: {NO_BWRAP}")

#: The learner's test: every channel it can read, as numbers (strings folded by crc32), raised back.
SPOTTER = r'''
import gc, json, os, sys, time, zlib

def _read(path):
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        return type(exc).__name__.encode()

def _num(text):
    return zlib.crc32(text if isinstance(text, bytes) else str(text).encode())

def _stat(path, field):
    try:
        return getattr(os.stat(path), field)
    except OSError:
        return -1

def _frames():
    found = []
    f = sys._getframe()
    while f is not None:
        for name, v in f.f_locals.items():
            if type(v) is int and name in ("ident", "middle", "init", "pid", "me", "cpu_seconds"):
                found.append(v)
            elif type(v) is dict and isinstance(v.get("id"), int):
                found.append(v["id"])
        f = f.f_back
    return found

def _heap():
    ids, table = [], -1
    for o in gc.get_objects():
        if type(o) is dict and o.get("op") == "fork":
            ids.append(o.get("id"))
        elif type(o).__name__ == "_Children":
            table = len(o.by_id)
    return ids, table

def _cold_read():
    path = os.path.join(os.path.dirname(os.__file__), "pydoc_data", "topics.py")
    start = time.perf_counter_ns()
    _read(path)
    return time.perf_counter_ns() - start

def check(split_heads):
    seen = {"monotonic_ns": time.monotonic_ns(), "time_ns": time.time_ns()}
    status = _read("/proc/self/status").decode("ascii", "replace")
    nspid = next((l.split()[1:] for l in status.splitlines() if l.startswith("NSpid")), [])
    seen["nspid_outer"] = int(nspid[0]) if nspid else -1
    seen["nspid_levels"] = len(nspid)
    stat = _read("/proc/self/stat").decode("ascii", "replace").rsplit(")", 1)[-1].split()
    seen["start_ticks"] = int(stat[19]) if len(stat) > 19 else -1
    seen["pid"], seen["ppid"] = os.getpid(), os.getppid()
    frames = _frames()
    seen["frame_ints"] = sum(frames)
    seen["frame_count"] = len(frames)
    ids, table = _heap()
    seen["request_ids"] = sum(i for i in ids if isinstance(i, int))
    seen["server_table"] = table
    mounts = [l.split() for l in _read("/proc/self/mountinfo").decode("ascii", "replace").splitlines()]
    seen["mount_ids"] = max((int(m[0]) for m in mounts if m and m[0].isdigit()), default=-1)
    seen["mounts"] = _num(" ".join(m[4] for m in mounts if len(m) > 4))
    for place in ("/tmp", "/dev/shm"):
        try:
            listing = sorted(os.listdir(place))
        except OSError as exc:
            listing = [type(exc).__name__]
        seen[place + " list"] = _num(json.dumps(listing))
        try:
            seen[place + " xattrs"] = _num(json.dumps(sorted(os.listxattr(place))))
        except OSError as exc:
            seen[place + " xattrs"] = _num(type(exc).__name__)
        seen[place + " dev"] = _stat(place, "st_dev")
    for path in ("/tmp", "/dev/shm", "/dev/full", "/dev/null", "/proc"):
        seen[path + " mtime"] = _stat(path, "st_mtime_ns")
        seen[path + " ctime"] = _stat(path, "st_ctime_ns")
    seen["environ"] = _num(json.dumps(sorted(os.environ.items())))
    seen["argv"] = _num(json.dumps(sys.argv))
    try:
        fds = sorted(os.listdir("/proc/self/fd"), key=int)
        seen["fds"] = _num(json.dumps(fds))
        seen["fd_inodes"] = sum(_num(os.readlink("/proc/self/fd/" + fd)) for fd in fds[:3])
        seen["fd0_inode"] = int(os.readlink("/proc/self/fd/0").split("[")[-1].rstrip("]") or -1)
    except (OSError, ValueError) as exc:
        seen["fds"] = _num(type(exc).__name__)
    seen["cold_read_ns"] = _cold_read()
    seen["since_start_ns"] = time.monotonic_ns() - seen["monotonic_ns"]
    raise AssertionError("SEEN" + json.dumps(seen))
'''


def observations(runs: dict, judge: TestJudge) -> dict[str, dict]:
    """``{implementation id: {channel: value}}`` from each child's first run of the spotter."""
    seen = {}
    for i, run in runs.items():
        _, got = checker._test_results(run)
        assert got, f"{judge.cases[i].id}: the spotter did not run ({run.stderr[-300:]})"
        message = str((got[0].exc or {}).get("message", ""))
        assert message.startswith("SEEN"), message[:300]
        seen[judge.cases[i].id] = json.loads(message[4:])
    return seen


def stands_out(values: dict[str, object]) -> dict[str, bool]:
    """For one channel in one round: is the reference's value the strict smallest, the strict largest,
    or the only one unlike the others (which all agree)?"""
    ref = values[REFERENCE]
    others = [v for k, v in values.items() if k != REFERENCE]
    return {"smallest": all(ref < v for v in others), "largest": all(ref > v for v in others),
            "alone": len(set(others)) == 1 and ref != others[0]}


def fair_bound(rounds: int, p: float, alpha: float = 1e-5) -> int:
    """The most wins a fair draw (each round won with probability ``p``) reaches with probability at
    least ``alpha``: exceeding it is evidence the channel gives the reference away."""
    tail = 0.0
    for k in range(rounds, -1, -1):
        tail += math.comb(rounds, k) * p ** k * (1 - p) ** (rounds - k)
        if tail > alpha:
            return k
    return 0


def spot(tmp_path: Path, rounds: int) -> tuple[dict[str, dict[str, int]], int]:
    """Run the spotter ``rounds`` times; ``({channel: {way: wins}}, implementations)``."""
    ex = CURRICULUM.exercise("test-split-square")
    path = tmp_path / "test_spotter.py"
    path.write_text(SPOTTER)
    wins: dict[str, dict[str, int]] = {}
    for seed in range(rounds):
        judge = TestJudge(ex, str(path), seed, SPOTTER)
        runs = checker.run_implementations(judge, ex, Job(ex.id, str(path)), SPOTTER, 5.0, 1024, 80)
        seen = observations(runs, judge)
        for channel in seen[REFERENCE]:
            values = {impl: seen[impl][channel] for impl in seen}
            for way, won in stands_out(values).items():
                wins.setdefault(channel, {}).setdefault(way, 0)
                wins[channel][way] += won
    return wins, len(ex.mutants) + 1


def given_away(wins: dict[str, dict[str, int]], rounds: int, implementations: int) -> list[str]:
    bound = fair_bound(rounds, 1 / implementations)
    return [f"{channel} ({way}: {n} of {rounds} rounds, a fair draw stays at or below {bound})"
            for channel, ways in wins.items() for way, n in ways.items() if n > bound]


ROUNDS = 16


def test_no_channel_gives_the_reference_away(tmp_path):
    wins, implementations = spot(tmp_path, ROUNDS)
    assert len(wins) >= 25, sorted(wins)  # every channel came back
    assert given_away(wins, ROUNDS, implementations) == []


def test_the_control_reference_first_one_at_a_time_gives_it_away(tmp_path, monkeypatch):
    """The order before issue 34 (the reference's child first) with one check at a time: the channels
    that follow the order (the clocks, the page cache...) give it away, so the test above can fail."""
    first: list[int] = []
    judge_init = TestJudge.__init__

    def remember_the_reference(self, *args, **kw):
        judge_init(self, *args, **kw)
        first[:] = [next(i for i, impl in enumerate(self.cases) if impl.id == REFERENCE)]

    monkeypatch.setattr(TestJudge, "__init__", remember_the_reference)
    monkeypatch.setattr(checker, "start_order", lambda count: first + [i for i in range(count) if i not in first])
    monkeypatch.setattr(checker, "PARALLEL", 1)
    rounds = 8  # a fair draw wins all 8 with probability 0.2 ** 8 = 2.6e-6: the bound is 7
    wins, implementations = spot(tmp_path, rounds)
    found = given_away(wins, rounds, implementations)
    for channel in ("monotonic_ns", "time_ns", "start_ticks"):
        assert any(name.startswith(f"{channel} (smallest") for name in found), found
