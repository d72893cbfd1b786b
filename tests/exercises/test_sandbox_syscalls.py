"""System calls a check never needs, each a way past another layer (issue 34, the checker's fifth hostile
round): what it may hold outside its own address space (System V IPC objects, POSIX message queues and
pipes), what it may do to another process without ``kill`` (its I/O class, its CPUs, a SIGIO the kernel
sends), and kernel interfaces a tensor function never uses (io_uring, userfaultfd, perf events, bpf,
another's descriptors).

An address-space cap counts what a process maps, not what the kernel keeps for it elsewhere. A System V
shared-memory segment, once detached, is counted by no cap and outlives its creator until removed
(shmget(2), shm_overview(7); the "memory outside the cap" of round 4's extended attributes again); a
message queue keeps its messages the same way (mq_overview(7)); a pipe keeps what was written to it. As in
test_sandbox_layers_round4.py each attack runs with one layer alone (``layers=...``) and, as a control,
without the layer that stops it, where it gets through; nothing is mocked. The hostile files
tests/hostile/sysv_shm_memory.py, mqueue_classmate.py and pipe_memory.py are the same attacks in the
full sandbox.
"""

from __future__ import annotations

import ctypes
import resource
import secrets
import subprocess
import time
from pathlib import Path

import pytest

from shapetrace.exercises import confine, isolation
from shapetrace.exercises.checker import Job, check_job
from shapetrace.exercises.content import load

CURRICULUM = load()
NO_BWRAP = isolation.bwrap_problem()
needs_bwrap = pytest.mark.skipif(bool(NO_BWRAP), reason=f"bubblewrap cannot start here: {NO_BWRAP}")
BWRAP, SECCOMP, RLIMITS, LANDLOCK = ("bwrap",), ("seccomp",), ("rlimits",), ("landlock",)
HEAD_DIM = '''
def head_dim(d_model, heads):
    if d_model % heads:
        raise ValueError(f"d_model {d_model} is not divisible by heads {heads}")
    return d_model // heads
'''
_libc = ctypes.CDLL(None, use_errno=True)
IPC_RMID = 0


def _check(folder: Path, name: str, attack: str, layers=(), memory_mb: int = 512) -> dict:
    path = folder / f"{name}-{'-'.join(layers) or 'none'}.py"
    path.write_text(attack + "\n" + HEAD_DIM)
    return check_job(Job("head-dim", str(path)), CURRICULUM.root, time_limit=5, memory_mb=memory_mb, layers=layers)


def _raised(v: dict, text: str) -> None:
    assert v["verdict"] == "crash", v
    assert v["summary"].startswith(f"your file raised {text}"), v


# -- System V shared memory: past the address-space cap, and past the check --------------------------------

#: (braces doubled: each attack below is a format string)
SHM_CALLS = """import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmdt.argtypes = [ctypes.c_void_p]
def _or_raise(got, what):
    if got in (None, -1, ctypes.c_void_p(-1).value):
        err = ctypes.get_errno()
        raise OSError(err, f"{{what}}: {{os.strerror(err)}}")
    return got
"""
#: 16 segments of 16 MiB, each attached, filled and detached: 256 MiB kept by the kernel beside a 64 MiB cap.
SHM_STORE = SHM_CALLS + """stored = 0
try:
    for n in range(16):
        seg = _or_raise(libc.shmget({key} + n, 16 << 20, 0o1600), "shmget")
        at = _or_raise(libc.shmat(seg, None, 0), "shmat")
        ctypes.memset(at, 1, 16 << 20)
        libc.shmdt(at)
        stored += 16
except OSError as exc:
    raise ValueError(f"stored {{stored}} MiB: {{exc}}")
raise ValueError(f"stored {{stored}} MiB")
"""
SHM_WRITE = SHM_CALLS + """seg = _or_raise(libc.shmget({key}, 4096, 0o1600), "shmget")
at = _or_raise(libc.shmat(seg, None, 0), "shmat")
ctypes.memmove(at, b"solution", 8)
"""
SHM_READ = SHM_CALLS + """seg = _or_raise(libc.shmget({key}, 0, 0), "shmget")
at = _or_raise(libc.shmat(seg, None, 0o10000), "shmat")  # SHM_RDONLY
raise ValueError(ctypes.string_at(at, 8))
"""


def _segment(key: int) -> int:
    """The id of this host's segment under ``key`` (-1: none)."""
    return _libc.shmget(key, 0, 0)


@pytest.fixture
def shm_key():
    """Keys of this test's own (``key`` to ``key + 15``); every segment under them is removed afterwards."""
    key = 0x5EA70000 + secrets.randbelow(1 << 12) * 16
    yield key
    for n in range(16):
        if _segment(key + n) >= 0:
            _libc.shmctl(_segment(key + n), IPC_RMID, None)


def test_control_under_the_memory_cap_alone_shared_memory_holds_four_times_it_and_outlives_the_check(
        tmp_path, shm_key):
    v = _check(tmp_path, "store", SHM_STORE.format(key=shm_key), RLIMITS, memory_mb=64)
    _raised(v, "ValueError: stored 256 MiB while loading")
    assert all(_segment(shm_key + n) >= 0 for n in range(16))  # still here, the check long gone


def test_control_with_no_layer_a_check_reads_the_segment_another_left(tmp_path, shm_key):
    _check(tmp_path, "write", SHM_WRITE.format(key=shm_key))
    _raised(_check(tmp_path, "read", SHM_READ.format(key=shm_key)), "ValueError: b'solution'")


def test_seccomp_alone_refuses_system_v_shared_memory(tmp_path, shm_key):
    v = _check(tmp_path, "store", SHM_STORE.format(key=shm_key), SECCOMP, memory_mb=64)
    _raised(v, "ValueError: stored 0 MiB: [Errno 1] shmget: Operation not permitted")
    assert _segment(shm_key) < 0


@needs_bwrap
def test_bubblewrap_alone_a_segment_dies_with_its_checks_ipc_namespace(tmp_path, shm_key):
    _check(tmp_path, "write", SHM_WRITE.format(key=shm_key), BWRAP)
    assert _segment(shm_key) < 0  # not on the host
    _raised(_check(tmp_path, "read", SHM_READ.format(key=shm_key), BWRAP),
            "FileNotFoundError: [Errno 2] shmget: No such file or directory")


# -- POSIX message queues -----------------------------------------------------------------------------------

#: Creates a queue and leaves a message in it (mq_open(3): O_CREAT | O_RDWR).
MQ_SEND = """import ctypes, os
rt = ctypes.CDLL("librt.so.1", use_errno=True)
q = rt.mq_open({name!r}, 0o100 | 2, 0o600, None)
if q < 0:
    err = ctypes.get_errno()
    raise OSError(err, f"mq_open: {{os.strerror(err)}}")
rt.mq_send(q, b"solution", 8, 0)
"""


@pytest.fixture
def queue_name():
    name = f"/shapetrace-{secrets.token_hex(6)}".encode()
    yield name
    ctypes.CDLL("librt.so.1").mq_unlink(name)


def _queue_exists(name: bytes) -> bool:
    rt = ctypes.CDLL("librt.so.1", use_errno=True)
    q = rt.mq_open(name, 0)
    if q >= 0:
        rt.mq_close(q)
    return q >= 0


def test_control_with_no_layer_a_queue_and_its_message_outlive_the_check(tmp_path, queue_name):
    v = _check(tmp_path, "send", MQ_SEND.format(name=queue_name))
    assert v["verdict"] == "unverified", v
    assert _queue_exists(queue_name)


def test_seccomp_alone_refuses_message_queues(tmp_path, queue_name):
    _raised(_check(tmp_path, "send", MQ_SEND.format(name=queue_name), SECCOMP),
            "PermissionError: [Errno 1] mq_open: Operation not permitted")
    assert not _queue_exists(queue_name)


def test_rlimits_alone_give_message_queues_no_bytes(tmp_path, queue_name):
    _raised(_check(tmp_path, "send", MQ_SEND.format(name=queue_name), RLIMITS),
            "OSError: [Errno 24] mq_open: Too many open files")  # (mq_open(3): RLIMIT_MSGQUEUE met)
    assert not _queue_exists(queue_name)


# -- memfd: a file in memory, with no name and on no disk ----------------------------------------------------

#: 256 MiB written into a memfd (memfd_create(2)): page cache that no address space counts while unmapped.
MEMFD = """import os
fd = os.memfd_create("held")
os.write(fd, b"x" * (256 << 20))
raise ValueError(os.fstat(fd).st_size >> 20)
"""


def test_control_with_no_layer_a_memfd_holds_256_mib(tmp_path):
    _raised(_check(tmp_path, "memfd", MEMFD), "ValueError: 256 while loading")


def test_rlimits_alone_give_a_memfd_no_byte(tmp_path):
    """RLIMIT_FSIZE 0 holds for every file a check writes, one in memory too (tests/hostile/memfd_memory.py)."""
    _raised(_check(tmp_path, "memfd", MEMFD, RLIMITS), "OSError: [Errno 27] File too large while loading")


# -- pipes: kernel memory by the open file ------------------------------------------------------------------

#: 1,000 pipes, 4 KiB written into each (a page of kernel memory apiece, in no address space).
PIPES = """import os
held = []
try:
    for n in range(1000):
        r, w = os.pipe()
        os.write(w, b"x" * 4096)
        held.append((r, w))
except OSError as exc:
    raise ValueError(f"{len(held)} pipes: {exc}")
raise ValueError(f"{len(held)} pipes")
"""


@pytest.mark.skipif(resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 2100, reason="the host's own limit is lower")
def test_control_with_no_layer_a_check_holds_pipes_by_the_thousand(tmp_path):
    _raised(_check(tmp_path, "pipes", PIPES), "ValueError: 1000 pipes while loading")


def test_rlimits_alone_cap_open_files(tmp_path):
    v = _check(tmp_path, "pipes", PIPES, RLIMITS)
    _raised(v, "ValueError: ")
    held = int(v["summary"].removeprefix("your file raised ValueError: ").split(" pipes")[0])
    assert 100 <= held < confine.MAX_FILES // 2, v  # what the check already held counts too
    assert "[Errno 24] Too many open files" in v["summary"], v


# -- another process's I/O class and CPUs (as setpriority, refused already, its nice value) ------------------

#: ioprio_set(2) on the parent (IOPRIO_WHO_PROCESS, class idle), then sched_setaffinity(2) on it: what a
#: process may do to any other of its user, here the process the check was forked from.
RESCHEDULE = """import ctypes, os
sc = ctypes.CDLL(None, use_errno=True).syscall
sc.restype = ctypes.c_long
parent = os.getppid()
io = sc(251, 1, parent, 3 << 13), ctypes.get_errno()
try:
    os.sched_setaffinity(parent, os.sched_getaffinity(parent))
    cpus = "set"
except OSError as exc:
    cpus = exc.strerror
raise ValueError(f"ioprio_set {io}, class now {sc(252, 1, parent) >> 13}; affinity {cpus}")
"""


def test_control_with_no_layer_a_check_idles_its_parents_io_and_sets_its_cpus(tmp_path):
    _raised(_check(tmp_path, "reschedule", RESCHEDULE), "ValueError: ioprio_set (0, 0), class now 3; affinity set")


def test_seccomp_alone_refuses_to_change_another_process_scheduling(tmp_path):
    _raised(_check(tmp_path, "reschedule", RESCHEDULE, SECCOMP),
            "ValueError: ioprio_set (-1, 1), class now 0; affinity Operation not permitted")


# -- a signal the kernel sends for the check: SIGIO to the owner of a file in O_ASYNC mode ------------------

#: The owner of the pipe's read end is a process outside; the write makes it readable: the kernel sends that
#: process SIGIO, whose default action ends it (fcntl(2), F_SETOWN). No kill(2) is called.
SIGIO = """import fcntl, os
r, w = os.pipe()
fcntl.fcntl(r, fcntl.F_SETOWN, {pid})
fcntl.fcntl(r, fcntl.F_SETFL, os.O_ASYNC)
os.write(w, b"x")
"""


@pytest.fixture
def bystander():
    """A process of this test's user, outside every check: what SIGIO would end."""
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


def _ended_by(proc: subprocess.Popen) -> int | None:
    for _ in range(20):
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    return proc.poll()


def test_control_with_no_layer_a_check_ends_a_process_outside_through_sigio(tmp_path, bystander):
    assert _check(tmp_path, "sigio", SIGIO.format(pid=bystander.pid))["verdict"] == "unverified"
    assert _ended_by(bystander) == -29  # SIGIO


def test_seccomp_alone_refuses_an_owner_for_sigio(tmp_path, bystander):
    _raised(_check(tmp_path, "sigio", SIGIO.format(pid=bystander.pid), SECCOMP),
            "PermissionError: [Errno 1] Operation not permitted")
    assert _ended_by(bystander) is None


@needs_bwrap
def test_bubblewrap_alone_the_process_outside_has_no_pid_inside(tmp_path, bystander):
    _raised(_check(tmp_path, "sigio", SIGIO.format(pid=bystander.pid), BWRAP),
            "ProcessLookupError: [Errno 3] No such process")
    assert _ended_by(bystander) is None


@pytest.mark.skipif(confine.landlock_abi() < 6, reason="Landlock scopes signals from ABI 6")
def test_landlock_alone_drops_sigio_to_a_process_outside_its_domain(tmp_path, bystander):
    assert _check(tmp_path, "sigio", SIGIO.format(pid=bystander.pid), LANDLOCK)["verdict"] == "unverified"
    assert _ended_by(bystander) is None  # (the call succeeds; the kernel never sends the signal)


# -- kernel interfaces a tensor function never needs: each refused by seccomp, each a way past another layer --

#: The raw call and what it reaches: io_uring does file and socket work in kernel threads that no seccomp filter
#: of the caller sees; userfaultfd stalls the kernel on a page fault at will (the heart of many kernel exploits);
#: perf_event_open and bpf load and read kernel state; pidfd_getfd takes a descriptor out of another process
#: (here the one the check was forked from: its pipes, its files).
KERNEL_CALLS = {
    "io_uring_setup": "sc(425, 4, ctypes.create_string_buffer(120))",
    "userfaultfd": "sc(323, 1)",  # UFFD_USER_MODE_ONLY: what an unprivileged caller may ask for
    # a software cpu-clock counter of user space only (flags at byte 40: exclude_kernel, exclude_hv)
    "perf_event_open": "sc(298, ctypes.create_string_buffer(struct.pack('IIQQQQQ', 1, 128, 0, 0, 0, 0, 0x60)"
                       " + bytes(80)), 0, -1, -1, 0)",
    "bpf": "sc(321, 0, ctypes.create_string_buffer(struct.pack('IIII', 2, 4, 4, 1) + bytes(112)), 128)",  # an array map
    "pidfd_getfd": "sc(438, sc(434, os.getppid(), 0), 0, 0)",
}
KERNEL_CALL = """import ctypes, os, struct
sc = ctypes.CDLL(None, use_errno=True).syscall
sc.restype = ctypes.c_long
got = {call}
raise ValueError(f"{{got if got < 0 else 'a descriptor'}} errno {{ctypes.get_errno() if got < 0 else 0}}")
"""


@pytest.mark.parametrize("name", sorted(KERNEL_CALLS))
def test_control_with_no_layer_each_kernel_interface_answers(tmp_path, name):
    v = _check(tmp_path, name, KERNEL_CALL.format(call=KERNEL_CALLS[name]))
    if "a descriptor" not in v["summary"]:
        pytest.skip(f"this host refuses {name} without any layer: {v['summary'][:120]}")
    _raised(v, "ValueError: a descriptor errno 0")


@pytest.mark.parametrize("name", sorted(KERNEL_CALLS))
def test_seccomp_alone_refuses_each_kernel_interface(tmp_path, name):
    _raised(_check(tmp_path, name, KERNEL_CALL.format(call=KERNEL_CALLS[name]), SECCOMP), "ValueError: -1 errno 1")
