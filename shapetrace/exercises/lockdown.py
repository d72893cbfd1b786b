"""Limits the checker's child sets on itself before any learner code runs (no torch, no Rich).

Everything here only ever lowers what the process may do, and nothing can be raised again:

* hard resource limits (address space, CPU seconds, file size, no core files, no new processes);
* every Linux capability dropped from the bounding, permitted and effective sets, and ``no_new_privs``,
  so a root child cannot lift a hard limit either (CAP_SYS_RESOURCE is gone);
* a seccomp filter that refuses ``fork``/``vfork``/``clone`` of a process (threads stay allowed) and
  ``ptrace``: a process limit that holds even for root, for whom ``RLIMIT_NPROC`` does not count;
* an audit hook (it cannot be removed) that refuses writing files, starting programs, loading foreign
  code with ctypes, handing out the garbage collector's object lists (through which it could be reached),
  and reading the exercises' reference solutions; a read of a solution is reported through ``on_peek``
  before it is refused.
"""

from __future__ import annotations

import ctypes
import os
import platform
import resource
import struct
from collections.abc import Callable
from pathlib import Path

FILE_SIZE_LIMIT = 0  # the child never needs to write a file

# -- resource limits ---------------------------------------------------------------------------------------


def hard_limit(which: int, value: int) -> bool:
    """Set soft = hard = ``value`` (never above the current hard limit); False where refused."""
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    try:
        resource.setrlimit(which, (value, value))
        return True
    except (ValueError, OSError):
        return False


def vm_size() -> int:
    """This process's virtual memory size in bytes (0 where /proc is missing)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def preexec_limits(cpu_seconds: int) -> Callable[[], None]:
    """The ``preexec_fn`` of the child: a CPU hard limit and no core files (the rest follows in the child)."""
    def apply() -> None:
        hard_limit(resource.RLIMIT_CPU, max(1, int(cpu_seconds)))
        hard_limit(resource.RLIMIT_CORE, 0)
    return apply


# -- capabilities and seccomp ------------------------------------------------------------------------------

_PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 24, 38, 22, 2
_CAP_SETPCAP, _LAST_CAP = 8, 63

# syscall numbers: fork, vfork, clone, clone3, ptrace, process_vm_readv, process_vm_writev
_SYSCALLS = {
    "x86_64": (0xC000003E, dict(fork=57, vfork=58, clone=56, clone3=435, ptrace=101, pvr=310, pvw=311)),
    "aarch64": (0xC00000B7, dict(clone=220, clone3=435, ptrace=117, pvr=270, pvw=271)),
}
_CLONE_THREAD = 0x00010000
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_EAGAIN, _EPERM, _ENOSYS = 11, 1, 38


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def drop_capabilities() -> bool:
    """Drop every capability for good (a root child keeps uid 0 but loses its powers)."""
    try:
        libc = _libc()
        for cap in range(_LAST_CAP + 1):
            if cap != _CAP_SETPCAP:
                libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
        libc.prctl(_PR_CAPBSET_DROP, _CAP_SETPCAP, 0, 0, 0)
        header = struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
        data = ctypes.create_string_buffer(24)  # two zeroed {effective, permitted, inheritable}
        ok = libc.capset(ctypes.c_char_p(header), data) == 0
        libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        return ok
    except (OSError, AttributeError):
        return False


def _filter_program(arch: str) -> list[tuple[int, int, int, int]] | None:
    if arch not in _SYSCALLS:
        return None
    audit_arch, nr = _SYSCALLS[arch]
    ld_w_abs, jeq_k, jset_k, ret_k = 0x20, 0x15, 0x45, 0x06
    deny = {k: _EAGAIN for k in ("fork", "vfork") if k in nr}
    deny.update({"clone3": _ENOSYS, "ptrace": _EPERM, "pvr": _EPERM, "pvw": _EPERM})
    prog: list[tuple[int, int, int, int]] = [(ld_w_abs, 0, 0, 4), (jeq_k, 1, 0, audit_arch),
                                             (ret_k, 0, 0, _RET_ALLOW), (ld_w_abs, 0, 0, 0)]
    for name, errno in deny.items():
        prog += [(jeq_k, 0, 1, nr[name]), (ret_k, 0, 0, _RET_ERRNO | errno)]
    prog += [(jeq_k, 0, 3, nr["clone"]), (ld_w_abs, 0, 0, 16), (jset_k, 1, 0, _CLONE_THREAD),
             (ret_k, 0, 0, _RET_ERRNO | _EAGAIN), (ret_k, 0, 0, _RET_ALLOW)]
    return prog


def no_new_processes() -> bool:
    """A seccomp filter: no fork, vfork or process clone (threads allowed), no ptrace."""
    prog = _filter_program(platform.machine())
    if prog is None:
        return False
    raw = b"".join(struct.pack("HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))
    fprog = struct.pack("HxxxxxxQ", len(prog), ctypes.addressof(buf))
    try:
        libc = _libc()
        libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        return libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.c_char_p(fprog), 0, 0) == 0
    except (OSError, AttributeError):
        return False


# -- audit hook --------------------------------------------------------------------------------------------

_SPAWN = ("os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "subprocess.Popen",
          "pty.spawn", "os.startfile")
_CHANGE = ("os.remove", "os.rename", "os.rmdir", "os.link", "os.symlink", "os.truncate", "os.chmod",
           "os.chown", "os.mkdir", "os.utime", "shutil.", "os.kill", "os.killpg", "signal.pthread_kill",
           "os.putenv", "os.unsetenv", "sys.setprofile", "sys.settrace", "gc.get_", "ctypes.",
           "sys.addaudithook")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def make_guard(protected: list[str], on_peek: Callable[[str], None]) -> Callable[[str, tuple], None]:
    """The audit hook: refuses what a learner's function never needs, and reports a peek at a solution.

    Hardened against a learner who patches modules: every function it calls is bound now (``posix.stat``,
    ``str`` methods), its state is immutable (a frozenset of file identities), a path is judged by the
    identity of each of its prefixes (so ``..`` and symlinks resolve in the kernel, not in patchable
    Python), and the garbage collector's object lists, which could reach it, are refused.
    """
    import posix

    stat, getcwd, audit_fspath = posix.stat, posix.getcwd, posix.fspath
    ids = []
    for path in protected:
        try:
            st = stat(path)
            ids.append((st.st_dev, st.st_ino))
        except OSError:
            pass
    protected_ids, pid, spawn, change, write_flags = frozenset(ids), posix.getpid(), _SPAWN, _CHANGE, _WRITE_FLAGS

    def text_of(path) -> str | None:
        if type(path) is str:
            return path
        if type(path) is bytes:
            return path.decode("utf-8", "surrogateescape")
        if type(path) is int:
            return None
        try:
            return text_of(audit_fspath(path))
        except Exception:
            return None

    def is_protected(path) -> bool:
        text = text_of(path)
        if text is None:
            return False
        if not text.startswith("/"):
            text = getcwd() + "/" + text
        if text.startswith("/proc/") and text.endswith(("/mem", "/environ")):
            return True
        while text:
            try:
                st = stat(text)
                if (st.st_dev, st.st_ino) in protected_ids:
                    return True
            except OSError:
                pass
            text = text.rpartition("/")[0]
        return False

    def writes(args: tuple) -> bool:
        mode, flags = (args[1] if len(args) > 1 else None), (args[2] if len(args) > 2 else 0)
        if type(mode) is str and ("w" in mode or "a" in mode or "x" in mode or "+" in mode):
            return True
        return type(flags) is int and bool(flags & write_flags)

    def guard(event: str, args: tuple) -> None:
        if event == "open":
            if is_protected(args[0]):
                on_peek(text_of(args[0]) or "?")
                raise PermissionError(f"the checker does not let your function read {args[0]}")
            if writes(args):
                raise PermissionError("the checker does not let your function write files")
        elif event in ("os.listdir", "os.scandir") and args and is_protected(args[0] or "."):
            on_peek(text_of(args[0]) or ".")
            raise PermissionError("the checker does not let your function list the lessons")
        elif event.startswith(spawn):
            raise PermissionError("the checker does not let your function start other programs")
        elif event.startswith(change):
            if event == "os.kill" and args and args[0] == pid:
                return
            raise PermissionError(f"the checker does not let your function use {event}")

    return guard


def lock_down(memory_bytes: int, protected: list[str], on_peek: Callable[[str], None]) -> None:
    """Everything above, in order; the audit hook goes in last and can never be removed."""
    import sys

    if memory_bytes > 0:
        hard_limit(resource.RLIMIT_AS, vm_size() + memory_bytes)
    hard_limit(resource.RLIMIT_FSIZE, FILE_SIZE_LIMIT)
    hard_limit(resource.RLIMIT_NPROC, 0)
    no_new_processes()
    drop_capabilities()
    sys.addaudithook(make_guard(protected, on_peek))
