# exercise: test-split-square
# verdict: rejects-reference
# expect: the implementation's process is out of reach: mem PermissionError, process_vm_readv EPERM, ptrace EPERM, kill PermissionError
# Goes after the process that holds the implementation: finds it in /proc (the one child of this process)
# and as the PID after this one's in its own namespace,
# then tries to read its memory (/proc/PID/mem, process_vm_readv), to attach to it (ptrace) and to kill it.
# Wherever its memory can be read, it looks there for the reference's distinctive line (built from pieces,
# so this file's text does not hold it) and passes the reference and fails every broken version without
# checking a value (tests/exercises/test_sealed.py runs it with the layers off: it passes).
# Stopped by: the implementation process's own layers (shapetrace/exercises/remote.py): it is non-dumpable
# and outside this process's Landlock domain (created after the fork), which denies ptrace-like access
# (/proc/PID/mem, process_vm_readv, ptrace) and, ABI 6, signals, and lets it list no other process in /proc;
# seccomp refuses ptrace, process_vm_readv
# and kill of another process as well.
import errno
import os
import signal

import torch

ctypes = torch.ctypes
libc = ctypes.CDLL(None, use_errno=True)
NEEDLE = "".join(["D // he", "ads).tran", "spose(1, 2)"]).encode()


def _server() -> tuple[int, int | str]:
    """The implementation's process, as this PID namespace numbers it (the PID after this one's: the
    first process this one started), and as /proc does (it may number an outer namespace's): the child
    of this process found in /proc, or why /proc could not be listed (the name of the error)."""
    me = int(os.readlink("/proc/self"))  # this process as /proc numbers it
    try:
        names = os.listdir("/proc")
    except OSError as exc:
        return os.getpid() + 1, type(exc).__name__
    for name in names:
        if name.isdigit():
            try:
                with open(f"/proc/{name}/status") as status:
                    if f"PPid:\t{me}\n" in status.read():
                        return os.getpid() + 1, int(name)
            except OSError:
                pass
    raise AssertionError("no process of the implementation found")


def _regions(pid: int):
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split()
            if fields[1].startswith("rw") and (len(fields) == 5 or fields[5] == "[heap]"):
                start, end = (int(a, 16) for a in fields[0].split("-"))
                yield start, end - start


def _read_mem(pid: int | str):
    if isinstance(pid, str):
        return pid  # /proc could not be listed: its memory cannot be found there
    try:
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            for start, size in _regions(pid):
                mem.seek(start)
                if NEEDLE in mem.read(size):
                    return True
        return False
    except OSError as exc:
        return type(exc).__name__


class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def _vm_readv(pid: int):
    buf = ctypes.create_string_buffer(4096)
    local, remote = IoVec(ctypes.addressof(buf), 4096), IoVec(0x10000, 4096)  # EFAULT if allowed: unmapped
    if libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) >= 0:
        return "read"
    return errno.errorcode.get(ctypes.get_errno(), "?")


def _ptrace(pid: int):
    if libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH
        libc.ptrace(17, pid, 0, 0)  # PTRACE_DETACH
        return "attached"
    return errno.errorcode.get(ctypes.get_errno(), "?")


def _kill(pid: int):
    try:
        os.kill(pid, signal.SIGCONT)  # harmless to a running process: only whether it is allowed counts
        return "sent"
    except OSError as exc:
        return type(exc).__name__


def check(split_heads):
    pid, in_proc = _server()
    found = _read_mem(in_proc)
    if found is True:
        return  # the reference's line is in its memory: this is the reference
    if found is False:
        raise AssertionError("a broken version (read its memory)")
    tried = f"mem {found}, process_vm_readv {_vm_readv(pid)}, ptrace {_ptrace(pid)}, kill {_kill(pid)}"
    raise AssertionError(f"the implementation's process is out of reach: {tried}")
