"""Each layer of the checker's sandbox, alone, blocks the attacks it is there for.

Every attack runs with one layer on and the others off (``check_job(layers=...)``), and once with no
layer at all as a control: there the attack succeeds, so each test can fail. Nothing is mocked: the
kernel refuses (bubblewrap's namespaces, Landlock, seccomp, rlimits). A test skips, saying why, only
where this kernel lacks the mechanism.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import platform
import signal
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import alive, descendants

from shapetrace.exercises import confine, isolation
from shapetrace.exercises.checker import Job, check_job
from shapetrace.exercises.content import load

CURRICULUM = load()
HEAD_DIM = '''
def head_dim(d_model, heads):
    if d_model % heads:
        raise ValueError(f"d_model {d_model} is not divisible by heads {heads}")
    return d_model // heads
'''
ABI = confine.landlock_abi()
NO_BWRAP = isolation.bwrap_problem()
NONE: tuple[str, ...] = ()
BWRAP, LANDLOCK, SECCOMP, RLIMITS = ("bwrap",), ("landlock",), ("seccomp",), ("rlimits",)


class Targets:
    """What the attacks aim at: a secret file, a folder, a TCP listener and this process's signals."""

    def __init__(self, root: Path):
        self.secret = root / "secret.txt"
        self.secret.write_text("s3cret")
        self.folder = root / "out"
        self.folder.mkdir()
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.signals = 0
        self.me = os.getpid()

    def accepted(self) -> int:
        while True:
            try:
                conn, _ = self.listener.accept()
            except (TimeoutError, OSError):
                return self.connections
            conn.close()
            self.connections += 1


def attacks(t: Targets) -> dict[str, str]:
    return {
        "read": f"assert open({str(t.secret)!r}).read() == 's3cret'",
        "write": f"open({str(t.folder / 'x.txt')!r}, 'w').write('x')",
        "fifo": f"import os\nos.mkfifo({str(t.folder / 'fifo')!r})",
        "connect": f"import socket\nsocket.create_connection(('127.0.0.1', {t.port}), timeout=2).close()",
        "signal": f"import os, signal\nos.kill({t.me}, signal.SIGWINCH)",
        "fork": "import os\npid = os.fork()\nif pid == 0:\n    os._exit(0)\nos.waitpid(pid, 0)",
        "memory": "import torch\nbig = torch.ones(6 * 2**30 // 4)",
        # fork(2) by its i386 number through `int 0x80`: a filter that reads x86-64 numbers alone misses it
        # (the classic seccomp bypass; seccomp(2), "the architecture"): tests/hostile/int80_fork.py
        "i386-fork": "import ctypes, mmap, os\n"
                     "code = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
                     "code.write(bytes([0xB8, 2, 0, 0, 0, 0xCD, 0x80, 0xC3]))  # mov eax, 2; int 0x80; ret\n"
                     "pid = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(code)))()\n"
                     "if pid == 0:\n    os._exit(0)\nassert pid > 0, pid",
        "proc-mem": f"fh = open('/proc/{t.me}/mem', 'rb')\n"
                    f"fh.seek(int(open('/proc/{t.me}/maps').readline().split('-')[0], 16))\nfh.read(16)",
    }


#: (attack, layers): the runs the tests below read.
RUNS = [("read", NONE), ("read", BWRAP), ("read", LANDLOCK),
        ("write", NONE), ("write", BWRAP), ("write", LANDLOCK),
        ("fifo", BWRAP), ("fifo", LANDLOCK),
        ("connect", NONE), ("connect", BWRAP), ("connect", LANDLOCK), ("connect", SECCOMP),
        ("signal", NONE), ("signal", BWRAP), ("signal", LANDLOCK), ("signal", SECCOMP),
        ("fork", NONE), ("fork", SECCOMP), ("i386-fork", NONE), ("i386-fork", SECCOMP),
        ("memory", RLIMITS),
        ("proc-mem", NONE), ("proc-mem", BWRAP), ("proc-mem", LANDLOCK)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    t = Targets(tmp_path_factory.mktemp("targets"))
    folder = tmp_path_factory.mktemp("attacks")
    code = attacks(t)
    previous = signal.signal(signal.SIGWINCH, lambda *a: setattr(t, "signals", t.signals + 1))

    def one(run):
        attack, layers = run
        path = folder / f"{attack}-{'-'.join(layers) or 'none'}.py"
        path.write_text(code[attack] + "\n" + HEAD_DIM)
        if "bwrap" in layers and NO_BWRAP:
            return None
        v = check_job(Job("head-dim", str(path)), CURRICULUM.root, time_limit=5, memory_mb=512, layers=layers)
        return v, t.accepted(), t.signals, sorted(p.name for p in t.folder.iterdir())

    try:
        # one at a time: the counters (connections, signals, files) are read right after each run
        with ThreadPoolExecutor(max_workers=1) as pool:
            out = dict(zip(RUNS, pool.map(one, RUNS)))
    finally:
        signal.signal(signal.SIGWINCH, previous)
        t.listener.close()
    return out


def _ran(runs, attack, layers):
    got = runs[attack, layers]
    if got is None:
        pytest.skip(f"bubblewrap cannot start here: {NO_BWRAP}")
    return got


def _blocked(v: dict, error: str) -> None:
    assert v["verdict"] == "crash", v
    # (raised by the attack when the file loads, or when its function is called)
    assert v["summary"].startswith((f"your function raised {error}", f"your file raised {error}")), v


# -- the controls: with no layer, every attack gets through (so the tests below can fail) ------------

def test_without_layers_the_attacks_get_through(runs):
    v, *_ = _ran(runs, "read", NONE)
    assert v["verdict"] == "unverified", v  # it read the secret (the assert in the file held)
    assert "not recorded: the sandbox ran without bubblewrap (turned off for this check)" in v["summary"]
    assert "x.txt" in _ran(runs, "write", NONE)[3]
    assert _ran(runs, "connect", NONE)[0]["verdict"] == "unverified"
    assert _ran(runs, "signal", NONE)[0]["verdict"] == "unverified"
    assert _ran(runs, "fork", NONE)[0]["verdict"] == "unverified"
    assert _ran(runs, "proc-mem", NONE)[0]["verdict"] == "unverified"
    assert threading.main_thread() is threading.current_thread()


# -- bubblewrap: namespaces and a root that holds only the interpreter and its packages ----------------

def test_bwrap_alone_hides_files_and_keeps_writes_out(runs):
    _blocked(_ran(runs, "read", BWRAP)[0], "FileNotFoundError")
    v, _, _, files = _ran(runs, "write", BWRAP)
    _blocked(v, "FileNotFoundError")
    v, _, _, files = _ran(runs, "fifo", BWRAP)
    _blocked(v, "FileNotFoundError")
    assert files == ["x.txt"]  # only the control's file


def test_bwrap_alone_has_no_network_and_sees_no_other_process(runs):
    v, connections, *_ = _ran(runs, "connect", BWRAP)
    assert v["verdict"] == "crash" and ("ConnectionRefusedError" in v["summary"] or "unreachable" in v["summary"]), v
    v, _, signals, _ = _ran(runs, "signal", BWRAP)
    _blocked(v, "ProcessLookupError")
    _blocked(_ran(runs, "proc-mem", BWRAP)[0], "FileNotFoundError")
    assert connections == 1 and signals == 1  # the controls' only


# -- Landlock: read-only, only under the interpreter's folders; no TCP; scoped signals; no ptrace ------

def test_landlock_alone_refuses_reads_writes_and_fifos(runs):
    _blocked(_ran(runs, "read", LANDLOCK)[0], "PermissionError")
    _blocked(_ran(runs, "write", LANDLOCK)[0], "PermissionError")
    v, _, _, files = _ran(runs, "fifo", LANDLOCK)
    _blocked(v, "PermissionError")
    assert files == ["x.txt"]


def test_landlock_alone_refuses_other_processes_memory(runs):
    _blocked(_ran(runs, "proc-mem", LANDLOCK)[0], "PermissionError")


@pytest.mark.skipif(ABI < 4, reason=f"Landlock ABI {ABI} has no network rules (ABI 4)")
def test_landlock_alone_refuses_tcp(runs):
    v, connections, *_ = _ran(runs, "connect", LANDLOCK)
    _blocked(v, "PermissionError")


@pytest.mark.skipif(ABI < 6, reason=f"Landlock ABI {ABI} has no signal scoping (ABI 6)")
def test_landlock_alone_refuses_signals_out_of_the_sandbox(runs):
    v, _, signals, _ = _ran(runs, "signal", LANDLOCK)
    _blocked(v, "PermissionError")


# -- seccomp: no processes, no sockets, no signals to others -------------------------------------------

def test_seccomp_alone_refuses_fork_sockets_and_signals(runs):
    _blocked(_ran(runs, "fork", SECCOMP)[0], "BlockingIOError")
    _blocked(_ran(runs, "connect", SECCOMP)[0], "PermissionError")
    v, connections, signals, _ = _ran(runs, "signal", SECCOMP)
    _blocked(v, "PermissionError")
    assert connections == 1 and signals == 1


def _has_i386_abi() -> bool:
    """Whether this kernel runs i386 system calls from a 64-bit process (IA32 emulation)."""
    code = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    code.write(bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3]))  # mov eax, 20 (i386 getpid); int 0x80; ret
    return ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(code)))() == os.getpid()


@pytest.mark.skipif(platform.machine() != "x86_64" or not _has_i386_abi(), reason="no i386 system calls here")
def test_control_without_layers_a_fork_through_the_i386_abi_gets_through(runs):
    assert _ran(runs, "i386-fork", NONE)[0]["verdict"] == "unverified"


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the i386 ABI is an x86-64 kernel's")
def test_seccomp_alone_kills_a_system_call_through_another_abi(runs):
    """libseccomp's filter checks the architecture first: a call through `int 0x80` is killed (SIGSYS)."""
    v = _ran(runs, "i386-fork", SECCOMP)[0]
    assert (v["verdict"], v["summary"]) == ("crash", "the checker process died (signal 31) while running your file")


# -- rlimits: the address space ----------------------------------------------------------------------

def test_rlimits_alone_cap_memory(runs):
    v = _ran(runs, "memory", RLIMITS)[0]
    assert v["verdict"] == "crash" and "can't allocate memory" in " ".join([v["summary"], *v["explanation"]]), v


# -- the child tree dies with the checker ----------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_killing_the_checker_takes_its_whole_sandbox_with_it(tmp_path, sig):
    import subprocess
    import sys
    import time

    from conftest import ROOT

    loop = tmp_path / "loop.py"
    loop.write_text("import threading\ndef split_heads(x, heads):\n"
                    "    threading.Thread(target=lambda: [0 for _ in iter(int, 1)]).start()\n"
                    "    while True:\n        pass\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), SHAPETRACE_STATE_DIR=str(tmp_path / "state"))
    proc = subprocess.Popen([sys.executable, "-m", "shapetrace", "exercise", "check", "split-heads", "--file",
                             str(loop), "--time-limit", "60"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=lambda: _default_action(sig))
    # (the signal's default action, as in a terminal: a suite started under nohup, or in the background of a
    # shell without job control, hands its children SIGHUP or SIGINT ignored)
    tree: set[int] = set()
    deadline, started = time.monotonic() + 120, None
    # bubblewrap (two processes) and the fork server, then the check's middle process, init and the check
    # itself; a checker whose server cannot run starts bubblewrap and the interpreter only
    while time.monotonic() < deadline and len(tree) < 6:
        time.sleep(0.2)
        tree = {p for p in descendants(proc.pid) if alive(p)}
        if len(tree) >= 2 and started is None:
            started = time.monotonic()
        if started is not None and time.monotonic() > started + 5:
            break
    assert len(tree) >= 2, "the sandbox never started"
    time.sleep(1)  # the learner's loop is running now
    tree |= descendants(proc.pid)
    proc.send_signal(sig)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(p) for p in tree):
        time.sleep(0.2)
    assert [p for p in tree if alive(p)] == [], f"{sig!r}: the sandbox outlived the checker"


def _default_action(sig: signal.Signals) -> None:
    if sig != signal.SIGKILL:   # (SIGKILL's action cannot be set, nor ignored)
        signal.signal(sig, signal.SIG_DFL)


def test_without_bubblewrap_a_pass_is_shown_but_never_recorded(tmp_path):
    import json
    import subprocess
    import sys

    from conftest import ROOT, in_reach_of

    sol = CURRICULUM.exercise("head-dim").solution
    env = dict(os.environ, SHAPETRACE_NO_BWRAP="1", SHAPETRACE_STATE_DIR=str(tmp_path / "state"),
               PYTHONPATH=str(ROOT))
    argv = [sys.executable, "-m", "shapetrace", "exercise", "check", "head-dim", "--file", str(sol), "--json"]
    if os.geteuid() == 0:  # started as root, the check runs as nobody: the interpreter within its reach
        argv = in_reach_of(isolation.UNPRIVILEGED, argv)
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 1, r.stderr
    v = json.loads(r.stdout)
    assert v["verdict"] == "unverified"
    assert v["summary"].endswith("; not recorded: the sandbox ran without bubblewrap turned off "
                                 "(SHAPETRACE_NO_BWRAP=1)")
    entry = json.loads((tmp_path / "state" / "progress.json").read_text())["exercises"]["head-dim"]
    assert entry["last_verdict"] == "unverified" and "ever_passed" not in entry


@pytest.mark.skipif(bool(NO_BWRAP), reason=f"bubblewrap cannot start here: {NO_BWRAP}")
def test_a_package_folder_under_tmp_stays_readable_inside_bubblewrap(monkeypatch):
    """A venv or a checkout under /tmp (a fresh clone there) is bound into the sandbox after its private
    /tmp is mounted, so the child still imports from it; anything else under /tmp stays hidden."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(dir="/tmp") as root, tempfile.TemporaryDirectory(dir="/tmp") as other:
        Path(root, "marker.txt").write_text("visible")
        Path(other, "secret.txt").write_text("hidden")
        monkeypatch.setattr(isolation, "package_paths", lambda: [root])
        argv = isolation.bwrap_argv(None)
        assert argv.index("/tmp") < argv.index(root)  # the tmpfs first, then the bind on top of it
        script = f"cat {root}/marker.txt; cat {other}/secret.txt 2>/dev/null || echo ' gone'"
        proc = subprocess.run([*argv, "/bin/sh", "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.stdout == "visible gone\n", proc.stderr
