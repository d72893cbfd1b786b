"""The checker's fork server (:mod:`shapetrace.exercises.forks`): each check forked from it is as far
from its siblings as checks in separate bubblewrap sandboxes, and where the server cannot run each check
starts its own sandbox, as before.

Every check here goes through the real server and the real kernel; where a property is shown with one
layer alone (``layers=("bwrap",)``), the same probe is first shown to succeed where the property does not
hold (a control), so the test can fail.
"""

from __future__ import annotations

import ast
import os
import signal
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import ROOT, alive, descendants

from shapetrace.exercises import forks, isolation, sandbox
from shapetrace.exercises.checker import Job, check_job
from shapetrace.exercises.content import load

CURRICULUM = load()
NO_BWRAP = isolation.bwrap_problem()
pytestmark = pytest.mark.skipif(bool(NO_BWRAP), reason=f"bubblewrap cannot start here: {NO_BWRAP}")

HEAD_DIM = '''
def head_dim(d_model, heads):
    if d_model % heads:
        raise ValueError(f"d_model {d_model} is not divisible by heads {heads}")
    return d_model // heads
'''

#: Reports, as the error of a crash, what the check sees of itself: its PID and its parent's, whether it
#: can list /proc, and how many capabilities it holds.
WHO_AM_I = '''
import os
def head_dim(d_model, heads):
    seen = {"pid": os.getpid(), "ppid": os.getppid()}
    try:
        os.listdir("/proc")
        seen["proc"] = "listed"
    except OSError as exc:
        seen["proc"] = type(exc).__name__
    import pyprctl
    seen["caps"] = len(pyprctl.CapState.get_current().permitted)
    raise ValueError(repr(seen))
'''

#: What WHO_AM_I reports in a check with every layer on.
SEALED = "{'pid': 2, 'ppid': 1, 'proc': 'PermissionError', 'caps': 0}"

#: Looks for a sibling two ways while the other check runs: an abstract socket name that only one process
#: per network namespace can hold, and every PID from 1 to 400 that answers signal 0.
SIBLING = '''
import os, socket, time
def _alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
def head_dim(d_model, heads):
    s = socket.socket(socket.AF_UNIX)
    s.bind("\\0shapetrace-sibling-probe")  # OSError (address in use) if a sibling holds it
    time.sleep(0.4)
    pids = [p for p in range(1, 400) if _alive(p)]
    s.close()
    if pids != [1, 2]:
        raise ValueError(f"other processes: {pids}")
''' + HEAD_DIM.split("\n", 2)[2]


def _check(tmp_path: Path, source: str, name: str = "probe.py", time_limit: float = 5, **kw) -> dict:
    path = tmp_path / name
    path.write_text(source)
    return check_job(Job("head-dim", str(path)), CURRICULUM.root, time_limit=time_limit, **kw)


def test_a_forked_check_is_pid_2_of_its_own_namespace_with_no_capability_and_no_proc(tmp_path):
    v = _check(tmp_path, WHO_AM_I)
    assert v["verdict"] == "crash", v
    assert v["summary"] == f"your function raised ValueError: {SEALED}"


def test_its_pid_is_2_and_proc_is_closed_by_landlock_not_by_the_namespaces(tmp_path):
    """With bubblewrap alone (Landlock off) /proc can be listed: Landlock is the layer that closes it."""
    v = _check(tmp_path, WHO_AM_I, layers=("bwrap",))
    assert v["verdict"] == "crash", v
    assert v["summary"] == "your function raised ValueError: " + SEALED.replace("'PermissionError'", "'listed'")


def test_the_sibling_probe_finds_a_sibling_that_shares_its_namespaces():
    """The control: two holders of the abstract name in one network namespace collide."""
    first = socket.socket(socket.AF_UNIX)
    first.bind("\0shapetrace-sibling-probe")
    try:
        with pytest.raises(OSError, match="Address already in use"):
            socket.socket(socket.AF_UNIX).bind("\0shapetrace-sibling-probe")
    finally:
        first.close()


def test_two_checks_at_once_do_not_see_each_other(tmp_path):
    """Namespaces alone (Landlock and seccomp off, so the probe may open a socket): two checks run at
    once, each holds the abstract name in its own network namespace for 2 s, and no PID but its init and
    itself answers a signal. Layers off: a clean run is "unverified", a sibling seen is a crash."""
    paths = [tmp_path / "a.py", tmp_path / "b.py"]
    for path in paths:
        path.write_text(SIBLING)
    with ThreadPoolExecutor(max_workers=2) as pool:
        got = list(pool.map(lambda p: check_job(Job("head-dim", str(p)), CURRICULUM.root, time_limit=5,
                                                layers=("bwrap",)), paths))
    for v in got:
        assert v["verdict"] == "unverified", v
        assert v["summary"].startswith("head-dim: correct on all 5 random input cases"), v


def test_without_the_fork_server_each_check_starts_its_own_sandbox(tmp_path, monkeypatch):
    monkeypatch.setenv("SHAPETRACE_NO_FORK_SERVER", "1")
    started = []
    monkeypatch.setattr(forks.Server, "start", lambda self, cpu: started.append(cpu))
    v = _check(tmp_path, WHO_AM_I)
    assert started == []
    assert v["summary"] == f"your function raised ValueError: {SEALED}"


def test_a_server_that_cannot_start_leaves_each_check_its_own_sandbox(tmp_path, monkeypatch):
    real = isolation.python_argv

    def broken(entry: str = "main") -> list[str]:
        argv = real(entry)
        return argv[:-1] + ["import sys; sys.stderr.write('no torch here\\n'); sys.exit(3)"] \
            if entry == "fork_server" else argv

    monkeypatch.setattr(isolation, "python_argv", broken)
    monkeypatch.setattr(forks, "_failed", {})
    v = _check(tmp_path, HEAD_DIM)
    assert v["verdict"] == "pass", v
    assert forks.problem() == "the fork server stopped before it was ready: no torch here"


def _server_tree(server: forks.Server) -> list[str]:
    """The command names of the server's bubblewrap and everything under it that is running."""
    names = []
    for pid in {server.proc.pid} | descendants(server.proc.pid):
        try:
            if alive(pid):
                names.append(Path(f"/proc/{pid}/comm").read_text().strip())
        except OSError:
            continue
    return sorted(names)


def test_a_check_stopped_at_its_deadline_leaves_nothing_behind_in_the_server(tmp_path):
    v = _check(tmp_path, "import time\ndef head_dim(d_model, heads):\n    time.sleep(60)\n", time_limit=1)
    assert v["verdict"] == "timeout", v
    server = sandbox.fork_server()
    assert server is not None and server.children == {}
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len([n for n in _server_tree(server) if n != "bwrap"]) > 1:
        time.sleep(0.1)
    assert len([n for n in _server_tree(server) if n != "bwrap"]) == 1, _server_tree(server)  # the server


def _huge_pages_offered() -> str:
    """'' where a process may ask for transparent huge pages and collapse its memory into them, else why not."""
    try:
        mode = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return "this kernel offers no transparent huge pages"
    if "[never]" in mode:
        return "transparent huge pages are turned off on this machine ([never])"
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    return "" if (major, minor) >= (6, 1) else "MADV_COLLAPSE needs Linux 6.1 or later"


def _anon_huge_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("AnonHugePages:"):
            return int(line.split()[1])
    return 0


def test_the_servers_memory_is_in_huge_pages_so_each_forked_check_copies_less(tmp_path):
    """forks.huge_pages: the server's ~150 MB heap (torch's, the interpreter's) sits in 2 MB pages before the
    first fork, so each check's three forks copy a few hundred page entries instead of ~37,000 (19-26 ms of
    a check's ~85-110 ms of CPU, benchmarks/README.md). Where the kernel is in ``madvise`` mode, as here, a
    process gets huge pages only by asking: without the call the server held none (AnonHugePages 0 kB)."""
    why = _huge_pages_offered()
    if why:
        pytest.skip(why)
    assert _check(tmp_path, HEAD_DIM)["verdict"] == "pass"
    server = sandbox.fork_server()
    assert server is not None and server.ready()
    below = descendants(server.proc.pid)
    pythons = [pid for pid in below if os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith("python")]
    the_server = [pid for pid in pythons if int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
                  not in pythons]
    assert len(the_server) == 1, pythons
    assert _anon_huge_kib(the_server[0]) >= 64 << 10, Path(f"/proc/{the_server[0]}/smaps_rollup").read_text()


def test_a_killed_server_is_started_again(tmp_path):
    first = sandbox.fork_server()
    assert first is not None
    os.killpg(first.proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while first.alive and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not first.alive
    v = _check(tmp_path, HEAD_DIM)
    assert v["verdict"] == "pass", v
    second = sandbox.fork_server()
    assert second is not first and second.alive


def test_with_bubblewrap_off_checks_come_from_a_server_outside_it_and_take_no_namespaces(tmp_path):
    """Landlock alone: the check is an ordinary process of the checker's PID namespace (not PID 2), its
    /proc still closed but for its own folder, and its pass is unverified."""
    v = _check(tmp_path, WHO_AM_I, layers=("landlock",))
    seen = ast.literal_eval(v["summary"].removeprefix("your function raised ValueError: "))  # its dict
    assert seen["pid"] > 2 and seen["ppid"] > 2 and seen["proc"] == "PermissionError", v
    server = sandbox.fork_server(bwrap=False, drop=False)
    assert server is not None and "bwrap" not in Path(server.proc.args[0]).name
    assert _check(tmp_path, HEAD_DIM, layers=("landlock",))["verdict"] == "unverified"


def test_a_check_outside_bubblewrap_stopped_at_its_deadline_leaves_nothing_behind(tmp_path):
    v = _check(tmp_path, "import time\ndef head_dim(d_model, heads):\n    time.sleep(60)\n", time_limit=1,
               layers=("landlock", "seccomp"))
    assert v["verdict"] == "timeout", v
    server = sandbox.fork_server(bwrap=False, drop=False)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and [p for p in descendants(server.proc.pid) if alive(p)]:
        time.sleep(0.1)
    assert [p for p in descendants(server.proc.pid) if alive(p)] == []


def test_the_payload_is_encoded_again_whenever_the_modules_read_differ(monkeypatch):
    """Before every check the modules are read and checked against their digests; the payload (and so the
    server's key: a server started from other modules is replaced) is encoded again only when what was
    read differs from the last payload's sources, and then always."""
    import json

    real = isolation.module_sources()
    reads = []

    def sources(modules):
        reads.append(1)
        return modules

    monkeypatch.setattr(isolation, "module_sources", lambda: sources(real))
    first = sandbox.modules_payload()
    assert sandbox.modules_payload() == first and len(reads) == 2   # read each time, the same bytes
    edited = dict(real, **{"shapetrace.errors": [False, real["shapetrace.errors"][1] + "# edited\n",
                                                 real["shapetrace.errors"][2]]})
    monkeypatch.setattr(isolation, "module_sources", lambda: sources(edited))
    second = sandbox.modules_payload()
    assert json.loads(second[8:])["modules"]["shapetrace.errors"][1].endswith("# edited\n")
    assert forks.key_of(["python"], second) != forks.key_of(["python"], first)
    monkeypatch.setattr(isolation, "module_sources", lambda: sources(real))
    assert sandbox.modules_payload() == first and len(reads) == 4


#: In a process that imported torch alone: the server's preload, then the child's side of a check (with
#: and without its tables) of every function exercise's solution; the shapetrace modules the checks
#: imported after the preload.
AFTER_PRELOAD = """
import random, sys
sys.path.insert(0, sys.argv[1])
from shapetrace import worker
worker._preload()
from shapetrace.exercises import checker, inputs
from shapetrace.exercises.content import load
from test_reference_steady import _Collect
preloaded = set(sys.modules)
for ex in load().exercises:
    if ex.kind == "function":
        source = ex.solution.read_text()
        for tables in (False, True):
            meta = checker._request(checker.Job(ex.id, str(ex.solution), tables=tables), source, ex, 10.0, 512, 80)
            worker._check(_Collect(), meta, inputs.draw(ex.inputs, random.Random(1)), source)
print(sorted(m for m in set(sys.modules) - preloaded if m.split(".")[0] == "shapetrace"))
"""


def test_the_server_preloads_every_module_a_check_imports(torch_zygote):
    """A module the server has not imported is compiled from source in every forked check (the child reads
    the package's sources, never its bytecode): five the trace imports lazily (dependencies, probe_inputs,
    readings, report, unattended) cost each check about 10 ms of CPU until the server preloaded them."""
    r = torch_zygote.run(AFTER_PRELOAD, str(ROOT / "tests" / "exercises"), timeout=300,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout + r.stderr[-2000:]
