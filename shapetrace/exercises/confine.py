"""The kernel layers the checker's child puts on itself before the learner's code runs (no torch).

The child already runs inside bubblewrap (:mod:`.isolation`): its own user, PID, network, IPC and
mount namespaces, a read-only root holding only the interpreter and its packages. Here, inside, it
adds layers that hold even if one of those fails, each from a maintained part:

* **Landlock** (the ``landlock`` package): the file system becomes read-only and reachable only under
  the folders it names (interpreter, packages, the learner's own file): no writes, no new files,
  FIFOs, sockets or devices anywhere. Where the kernel has them: no TCP bind/connect (ABI 4), and
  scoping (ABI 6): no signals to, and no abstract unix sockets of, processes outside the sandbox.
* **seccomp** (``pyseccomp``, on libseccomp): no new processes (threads stay allowed), no ptrace,
  no reading other processes' memory, no prlimit or kill of other processes, no sockets, no mknod,
  no mount or namespace changes, no exec, no io_uring, no bpf, no userfaultfd; no change of any
  file's mode, owner, timestamps or extended attributes (Landlock covers none of these: a device node
  bound in from the host, a shared ``/proc`` or ``/tmp`` could otherwise be marked or broken); and no
  lock, lease or watch on a file (flock, fcntl's locks, inotify, fanotify), through which two checks
  running at once would signal each other on any file both may read; no System V IPC or POSIX
  message queue (memory that outlives the process and that no address-space cap counts); no
  change of another process's I/O class or pages, nor of any process's CPUs (a grade pins each check to
  its own, :mod:`.cpus`); and no owner for a file's SIGIO (a signal the
  kernel would send for it, past the rule on ``kill``).
* **rlimits**, hard and unraisable (no capabilities): address space, CPU seconds, file size 0, no
  core files, at most ``MAX_TASKS`` processes and threads and ``MAX_FILES`` open files, no bytes of
  POSIX message queues; and the process is made non-dumpable (its
  /proc files are root's).

Every layer says whether it took hold; :func:`confine` returns the ones that did not, in words, and
the checker refuses to record a pass while any is missing.
"""

from __future__ import annotations

import errno
import os
import resource
from pathlib import Path

# -- rlimits -----------------------------------------------------------------------------------------------


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


#: Processes and threads the sandbox's user may hold in its own user namespace (the check, its init and
#: the process between, the implementation's process, the learner's threads): a thread needs room under
#: this limit once the sandbox runs as a user other than the host's root (root alone is exempt from it),
#: and a fork bomb stops here even where seccomp is off.
MAX_TASKS = 64
#: Open files a check may hold: what it needs (its pipes, the files it reads, an implementation's pipes)
#: with room to spare. Each pipe can hold a page or more of kernel memory that no address-space cap counts:
#: a host's hard limit (20,000 here, 524,288 where systemd sets it) let 10,000 pipes hold 39 MiB (a GiB
#: and more at the larger limit) beside the cap (tests/hostile/pipe_memory.py).
MAX_FILES = 256


def limits(memory_bytes: int, cpu_seconds: int) -> list[str]:
    missing = []
    if memory_bytes > 0 and not hard_limit(resource.RLIMIT_AS, vm_size() + memory_bytes):
        missing.append("rlimit: address space")
    for which, value, name in ((resource.RLIMIT_CPU, max(1, cpu_seconds), "CPU"),
                               (resource.RLIMIT_FSIZE, 0, "file size"), (resource.RLIMIT_CORE, 0, "core"),
                               (resource.RLIMIT_NPROC, MAX_TASKS, "processes"),
                               (resource.RLIMIT_NOFILE, MAX_FILES, "open files"),
                               (resource.RLIMIT_MSGQUEUE, 0, "message queues")):
        if not hard_limit(which, value):
            missing.append(f"rlimit: {name}")
    return missing


# -- Landlock ----------------------------------------------------------------------------------------------

_FS_READ = (1 << 0) | (1 << 2) | (1 << 3)  # EXECUTE, READ_FILE, READ_DIR
_FILE_READ = (1 << 0) | (1 << 2)
_NET_ALL = (1 << 0) | (1 << 1)  # BIND_TCP, CONNECT_TCP (ABI 4)
_SCOPE_ALL = (1 << 0) | (1 << 1)  # ABSTRACT_UNIX_SOCKET, SIGNAL (ABI 6)
#: Every file-system right each ABI knows (handled rights not granted below are denied everywhere).
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}


_abi_problem: list[str] = []


def landlock_abi() -> int:
    """The kernel's Landlock ABI (0: none, or the bindings could not ask; the reason is kept)."""
    import ctypes

    try:
        from landlock.plumbing import landlock_abi_version

        ctypes.set_errno(0)  # the bindings read errno even on success: a stale one reads as a failure
        return int(landlock_abi_version())
    except Exception as exc:
        _abi_problem[:] = [f"{type(exc).__name__}: {str(exc).splitlines()[0][:100] if str(exc) else ''}"]
        return 0


def own_proc() -> list[str]:
    """This process's own folder of ``/proc`` (``/proc/self`` resolved), where there is one: the only part
    of ``/proc`` the sandbox may read (its own maps, status and memory; no other process can be listed)."""
    try:
        return [os.path.join("/proc", os.readlink("/proc/self"))]
    except OSError:
        return []


def landlock(readable: list[str]) -> list[str]:
    """Read-only access under ``readable`` and this process's own ``/proc`` folder, nothing else; no TCP;
    scoped signals and sockets."""
    import ctypes

    abi = landlock_abi()
    if abi < 1:
        why = _abi_problem[0] if _abi_problem else "the kernel has none"
        return [f"Landlock ({why}): files outside the sandbox's mounts are not fenced twice"]
    from landlock.plumbing import PathBeneathAttr, get_add_rule, get_create_ruleset, get_prctl, get_restrict_self

    class Attr(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]

    attr = Attr(_FS_BY_ABI.get(abi, (1 << 16) - 1), _NET_ALL if abi >= 4 else 0, _SCOPE_ALL if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    try:
        from landlock.plumbing import RulesetAttr

        ctypes.set_errno(0)  # see landlock_abi
        fd = get_create_ruleset()(ctypes.cast(ctypes.pointer(attr), ctypes.POINTER(RulesetAttr)), size, 0)
        for path in [*readable, *own_proc()]:
            try:
                target = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rights = _FS_READ if os.path.isdir(path) else _FILE_READ
                ctypes.set_errno(0)
                get_add_rule()(fd, 1, ctypes.byref(PathBeneathAttr(rights, target)), 0)
            finally:
                os.close(target)
        ctypes.set_errno(0)
        get_prctl()(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
        ctypes.set_errno(0)
        get_restrict_self()(fd, 0)
        os.close(fd)
    except Exception as exc:
        return [f"Landlock: {str(exc).splitlines()[0]}"]
    missing = []
    if abi < 4:
        missing.append(f"Landlock network rules (kernel ABI {abi} < 4)")
    if abi < 6:
        missing.append(f"Landlock signal and socket scoping (kernel ABI {abi} < 6)")
    return missing


# -- seccomp -----------------------------------------------------------------------------------------------

_CLONE_THREAD = 0x00010000
#: Syscalls refused outright (EPERM): none is needed to run a tensor function.
DENIED = ("fork", "vfork", "execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev",
          "socket", "socketpair", "mknod", "mknodat", "mount", "umount2", "pivot_root", "chroot", "unshare",
          "setns", "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
          "io_uring_setup", "io_uring_enter", "io_uring_register", "pidfd_open", "pidfd_getfd",
          "pidfd_send_signal", "kcmp", "tkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "setpriority",
          "sched_setscheduler", "sched_setattr", "acct", "swapon", "swapoff", "reboot", "kexec_load",
          "init_module", "finit_module", "delete_module", "quotactl", "name_to_handle_at",
          "open_by_handle_at", "move_mount", "open_tree", "fsopen", "fsmount", "fspick", "mount_setattr",
          "landlock_create_ruleset", "personality", "syslog")
#: A file's mode, owner, timestamps and extended attributes: refused (EPERM) whatever the file.
METADATA = ("chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "chown32",
            "fchown32", "lchown32", "utime", "utimes", "utimensat", "futimesat", "utimensat_time64",
            "setxattr", "lsetxattr", "fsetxattr", "setxattrat", "removexattr", "lremovexattr", "fremovexattr",
            "removexattrat")
#: Numbers (x86-64 and the generic table share them) of the newest of these, for a libseccomp too old to
#: know their names: fchmodat2 (6.6), setxattrat and removexattrat (6.13).
_BY_NUMBER = {"fchmodat2": 452, "setxattrat": 463, "removexattrat": 466}
#: What one process sees of another's use of a file both may read (a lock it holds, each open and read of
#: it): two checks running at once, two students of one grade, would talk through any file of the
#: standard library. Refused (EPERM): flock, inotify and fanotify, and fcntl's record locks, leases and
#: directory notifications (F_GETLK 5, F_SETLK 6, F_SETLKW 7, F_OFD_GETLK 36, F_OFD_SETLK 37,
#: F_OFD_SETLKW 38, F_SETLEASE 1024, F_GETLEASE 1025, F_NOTIFY 1026).
SHARED_FILE_SIGNALS = ("flock", "inotify_init", "inotify_init1", "fanotify_init")
FCNTL_SIGNALS = (5, 6, 7, 36, 37, 38, 1024, 1025, 1026)
#: A signal the kernel sends for a check: the owner of a file in O_ASYNC mode gets SIGIO (by default, death)
#: when it is ready. fcntl's F_SETOWN 8, F_SETSIG 10, F_SETOWN_EX 15 and ioctl's FIOSETOWN and SIOCSPGRP name
#: that owner, any process of the user: without a PID namespace a check killed one outside with a pipe it
#: wrote to, past the filter's rule on ``kill`` (tests/hostile/sigio_kill.py). Refused (EPERM).
FCNTL_OWNER = (8, 10, 15)
IOCTL_OWNER = (0x8901, 0x8902)
#: What one process may change of another of its user (its CPUs, its NUMA pages), as ``setpriority`` (refused
#: above) its nice value and ``ioprio_set`` its I/O class: allowed on itself (pid 0) only. Without a PID
#: namespace of its own, a check set its parent's I/O class to idle (tests/exercises/test_sandbox_syscalls.py).
OTHER_PROCESS_SCHEDULING = ("migrate_pages", "move_pages")
#: A check's CPUs are its grade slot's (:mod:`.cpus`, pinned before learner code runs): refused on itself
#: too, so no check widens its set onto a classmate's CPUs.
CPU_SETS = ("sched_setaffinity",)
#: System V shared memory, message queues and semaphores, and POSIX message queues: objects of the IPC
#: namespace, not of the process. A segment outlives its creator until removed and is counted by no
#: address-space cap once detached (one check with a 512 MiB cap held 384 MiB of them in a second, more
#: with every second it ran: tests/hostile/sysv_shm_memory.py); where a check shares the IPC namespace
#: (no bubblewrap), the next finds it by its key. Refused (EPERM); ``ipc`` is the multiplexer some
#: architectures have.
IPC_OBJECTS = ("shmget", "shmat", "shmctl", "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop",
               "semtimedop", "semctl", "ipc", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive",
               "mq_notify", "mq_getsetattr")


def seccomp_filter() -> list[str]:
    """Refuse what a tensor function never needs; allow the rest (threads, files Landlock lets through)."""
    try:
        import pyseccomp as sc
    except Exception as exc:  # libseccomp missing
        return [f"seccomp (libseccomp not loadable: {str(exc).splitlines()[0][:80]})"]
    me = os.getpid()
    try:
        f = sc.SyscallFilter(defaction=sc.ALLOW)
        deny = sc.ERRNO(errno.EPERM)
        for name in DENIED + METADATA + SHARED_FILE_SIGNALS + IPC_OBJECTS:
            try:
                f.add_rule(deny, name)
            except Exception:  # a syscall this architecture lacks, or one libseccomp cannot name
                if name in _BY_NUMBER:
                    f.add_rule(deny, _BY_NUMBER[name])
        for command in FCNTL_SIGNALS + FCNTL_OWNER:
            f.add_rule(deny, "fcntl", sc.Arg(1, sc.EQ, command))
        for command in IOCTL_OWNER:
            f.add_rule(deny, "ioctl", sc.Arg(1, sc.EQ, command))
        f.add_rule(sc.ERRNO(errno.EAGAIN), "clone", sc.Arg(0, sc.MASKED_EQ, _CLONE_THREAD, 0))
        f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")  # its flags live in memory: libc falls back to clone
        f.add_rule(deny, "prlimit64", sc.Arg(0, sc.NE, 0))
        f.add_rule(deny, "ioprio_set")  # (its "who" 0 can mean every process of the user: refused whole)
        for name in OTHER_PROCESS_SCHEDULING:
            f.add_rule(deny, name, sc.Arg(0, sc.NE, 0))
        for name in CPU_SETS:
            f.add_rule(deny, name)
        f.add_rule(deny, "kill", sc.Arg(0, sc.NE, me))
        f.add_rule(deny, "tgkill", sc.Arg(0, sc.NE, me))
        f.load()
    except Exception as exc:
        return [f"seccomp: {str(exc).splitlines()[0][:120]}"]
    return []


def not_dumpable() -> list[str]:
    try:
        import pyprctl

        pyprctl.set_dumpable(False)
        return [] if not pyprctl.get_dumpable() else ["non-dumpable"]
    except Exception as exc:
        return [f"non-dumpable: {str(exc).splitlines()[0][:80]}"]


def preload() -> None:
    """Import what the layers need while files may still be read and programs started."""
    for name in ("pyseccomp", "pyprctl", "landlock.plumbing"):
        try:
            __import__(name)
        except Exception:
            pass
    landlock_abi()


#: The layers :func:`confine` puts on, by name (the tests turn all but one off to prove what each blocks).
LAYERS = ("dumpable", "rlimits", "landlock", "seccomp")


def confine(readable: list[str], memory_bytes: int, cpu_seconds: int, layers=LAYERS) -> list[str]:
    """Every layer in ``layers``, in order; returns the ones that did not take hold (empty: all did).

    The CPU limit is always set (it is the deadline's last resort); a layer left out is reported missing.
    """
    missing = [f"{name} (turned off for this check)" for name in LAYERS if name not in layers]
    if "dumpable" in layers:
        missing += not_dumpable()
    if "rlimits" in layers:
        missing += limits(memory_bytes, cpu_seconds)
    elif not hard_limit(resource.RLIMIT_CPU, max(1, cpu_seconds)):
        missing.append("rlimit: CPU")
    if "landlock" in layers:
        missing += landlock(readable)
    if "seccomp" in layers:
        missing += seccomp_filter()
    return missing
