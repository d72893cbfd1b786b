"""A fork server: one sandboxed process imports torch once; each check is a process forked from it.

Starting the checker's child used to cost an interpreter that imports torch (1.1 s of CPU on a quiet
core, measured) for every check, and a learner-written test starts one child per implementation. Now
one process per checker (the *server*) starts inside bubblewrap, exactly as a child did, loads the
worker and torch, and from then on only forks. The server never runs learner code, never reads a
request and never holds an implementation: it receives three pipe ends and forks.

Each forked check is as far from its siblings as separate bubblewrap sandboxes are from each other:

* the forked process unshares its own user, PID, network, IPC and UTS namespaces; their init (PID 1)
  forks the check as PID 2, as bubblewrap's init does (it cannot see, signal or count its siblings,
  and its PID says nothing about the order the checks started in);
* it has no network interface at all (a new network namespace), no SysV IPC or abstract sockets
  shared with a sibling, and no capability left (dropped before any request is read);
* it has a mount namespace of its own (:func:`fresh_mounts`): a fresh ``/proc`` of its own PID
  namespace (its ``NSpid`` holds its own PID alone), a private, size-capped tmpfs on ``/tmp`` and on
  ``/dev/shm`` (nothing a sibling stored there, no extended attributes or timestamps it left, and
  nothing it stores outlives it or grows past the cap), and the device nodes remounted read-only (no
  timestamp or mode of a device node can change); a check that damages any of them damages its own;
* nothing in it says when it started: its id is drawn at random, the server's table of the checks it
  runs is emptied in the forked process, and the checker starts the checks of one learner-written test
  in an order drawn at random (:mod:`.checker`), so what is left of the server's memory tells nothing
  about which implementation a check holds;
* Landlock then closes ``/proc`` with everything else (:func:`.isolation.readable`), so no sibling can
  be listed by its outer PID; seccomp refuses ``pidfd_open``, ``kill`` of another process, ``socket``.

The server's side (:func:`serve`) runs inside the sandbox; the checker's side (:class:`Server`,
:func:`server`) runs in the checker and hands out :class:`Forked`, which behaves like the
``subprocess.Popen`` of a direct child for :mod:`.sandbox`. Where the server cannot start or cannot
give a check namespaces of its own, the checker starts one sandbox per check, as before. Where
bubblewrap is turned off or cannot start, a server outside it (``namespaces=False``) forks checks that
take no namespaces and keep what a child started on its own held (its passes are ``unverified``).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import secrets
import select
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1
_CLONE_NEWUTS, _CLONE_NEWIPC, _CLONE_NEWUSER = 0x04000000, 0x08000000, 0x10000000
_CLONE_NEWPID, _CLONE_NEWNET, _CLONE_NEWNS = 0x20000000, 0x40000000, 0x00020000
#: The namespaces each forked check gets of its own.
NAMESPACES = _CLONE_NEWUSER | _CLONE_NEWPID | _CLONE_NEWNET | _CLONE_NEWIPC | _CLONE_NEWUTS | _CLONE_NEWNS
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME = 0x400, 0x800, 0x200000
_MNT_DETACH = 2
#: statvfs flag -> mount flag, for a remount that must keep the flags the kernel locked.
_KEPT_FLAGS = ((0x1, _MS_RDONLY), (0x2, _MS_NOSUID), (0x4, _MS_NODEV), (0x8, _MS_NOEXEC), (0x400, _MS_NOATIME),
               (0x800, _MS_NODIRATIME), (0x1000, _MS_RELATIME))
#: Each check's private /tmp and /dev/shm: bytes, and inodes (a tmpfs counts extended attributes against
#: its inode space, so the inode cap bounds them too).
TMP_OPTIONS = "size=16m,nr_inodes=256,mode=1777"
#: How the process between the server and the check exits when it could not set the check up.
SETUP_FAILED = 125
#: Seconds the checker waits for the server to say it is ready (importing torch on a busy machine).
SERVER_GRACE = 90.0


# -- inside the sandbox: the server ----------------------------------------------------------------------

def _libc():
    return ctypes.CDLL(None, use_errno=True)


#: madvise(2) advice: back a range with transparent huge pages, and move what it holds into them now.
_MADV_HUGEPAGE, _MADV_COLLAPSE = 14, 25
_HUGE_PAGE = 1 << 21


def huge_pages() -> int:
    """Move the server's private anonymous memory (the heap torch and the interpreter built while importing,
    ~150 MB) into 2 MB pages where the kernel offers them, before the first check is forked. Every check is
    a fork of this process (and forks twice more): a fork copies, and an exit frees, one entry per 2 MB page
    instead of 512 page-table entries, about 19 ms of a check's ~85 ms of CPU (benchmarks/README.md). The
    pages' contents do not change. Returns the bytes advised; 0 where the kernel refuses (transparent huge
    pages turned off, or a kernel before 6.1 without MADV_COLLAPSE), and nothing else changes then."""
    libc = _libc()
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    advised = 0
    with open("/proc/self/maps") as f:
        ranges = [line.split() for line in f]
    for fields in ranges:
        if fields[1] != "rw-p" or (len(fields) > 5 and fields[5] != "[heap]"):
            continue  # private anonymous memory only: never a file's pages, the stack or a shared mapping
        start, end = (int(x, 16) for x in fields[0].split("-"))
        start, end = -(-start // _HUGE_PAGE) * _HUGE_PAGE, end // _HUGE_PAGE * _HUGE_PAGE
        if end - start >= _HUGE_PAGE and libc.madvise(start, end - start, _MADV_HUGEPAGE) == 0:
            if libc.madvise(start, end - start, _MADV_COLLAPSE) == 0:
                advised += end - start
    return advised


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def own_namespaces() -> None:
    """Put this process in new user, PID, network, IPC and UTS namespaces, keeping its user and group
    (mapped onto themselves). Raises OSError where the kernel refuses."""
    uid, gid = os.getuid(), os.getgid()
    if _libc().unshare(NAMESPACES) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare: {os.strerror(err)}")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(text: str | None) -> bytes | None:
        return text.encode() if text is not None else None

    if _libc().mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def _read_only_again(path: str) -> None:
    """Remount the bind mount at ``path`` read-only, keeping every flag it has (the kernel refuses to
    drop a flag it locked when this mount namespace was made)."""
    have = os.statvfs(path).f_flag
    flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY
    for st, ms in _KEPT_FLAGS:
        if have & st:
            flags |= ms
    _mount(None, path, None, flags)


def device_mounts() -> list[str]:
    """The device nodes bound into ``/dev`` (each its own mount point, as bubblewrap binds them)."""
    found = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                point = line.split()[4]
                if point.startswith("/dev/") and os.path.exists(point) and not os.path.isdir(point):
                    found.append(point)
    except OSError:
        pass
    return found


def fresh_mounts() -> None:
    """In a new mount namespace, as PID 1 of a new PID namespace: nothing propagates in or out, a fresh
    read-only ``/proc`` of this PID namespace, a private capped tmpfs on ``/tmp`` and ``/dev/shm``, and the
    device nodes read-only. Raises OSError where the kernel refuses any of it (the check never starts)."""
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    devices = device_mounts()  # read from the old /proc: the new one lists this namespace's mounts too
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC | _MS_RDONLY)
    kept = mounts_under("/tmp")   # a venv, a checkout or the file under check bound below /tmp
    for place in ("/dev/shm", "/tmp"):
        if os.path.isdir(place):
            held = _hold(kept) if place == "/tmp" else []
            _mount("tmpfs", place, "tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, TMP_OPTIONS)
            _put_back(kept, held)
    for device in devices:
        _read_only_again(device)


def _unescape(field: str) -> str:
    """A mountinfo path: spaces, tabs, newlines and backslashes are written as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mounts_under(place: str) -> list[str]:
    """The outermost mount points strictly below ``place`` (the binds a fresh tmpfs there would hide)."""
    with open("/proc/self/mountinfo") as f:
        points = sorted({_unescape(line.split()[4]) for line in f})
    below = [p for p in points if p.startswith(place.rstrip("/") + "/")]
    return [p for p in below if not any(p != q and p.startswith(q + "/") for q in below)]


def _hold(points: list[str]) -> list[str]:
    """Bind each of ``points`` (with what is mounted below it) to a holder in the private /dev/shm, so
    that a tmpfs mounted over their parent does not hide them for good."""
    held = []
    for i, point in enumerate(points):
        holder = f"/dev/shm/.held-{i}"
        _make_point(holder, point)
        _mount(point, holder, None, _MS_BIND | _MS_REC)
        held.append(holder)
    return held


def _put_back(points: list[str], held: list[str]) -> None:
    """Bind each holder back at its place in the fresh tmpfs (read-only flags it had are locked and kept;
    a writable one is made read-only) and let the holder go."""
    for point, holder in zip(points, held):
        _make_point(point, holder)
        _mount(holder, point, None, _MS_BIND | _MS_REC)
        if not os.statvfs(point).f_flag & 0x1:
            _read_only_again(point)
        if _libc().umount2(holder.encode(), _MNT_DETACH) == 0:
            (os.rmdir if os.path.isdir(holder) else os.unlink)(holder)


def _make_point(path: str, like: str) -> None:
    """An empty folder (or file, where ``like`` is a file) at ``path``, its parents made too."""
    if os.path.isdir(like):
        os.makedirs(path, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))


def drop_capabilities() -> None:
    """No capability left in any set (the new user namespace gave this process all of them in it)."""
    import pyprctl

    for cap in pyprctl.Cap:
        if pyprctl.capbset_read(cap):
            pyprctl.capbset_drop(cap)
    pyprctl.cap_ambient_clear_all()
    pyprctl.CapState(effective=set(), permitted=set(), inheritable=set()).set_current()
    if pyprctl.CapState.get_current().permitted:
        raise OSError("capabilities are still held")


def _die_with_parent(parent: int) -> None:
    _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(SETUP_FAILED)


def _exit_status(raw: int) -> int:
    """A wait status as an exit code: the code, or 128 + N for a process killed by signal N (as
    bubblewrap reports its command)."""
    code = os.waitstatus_to_exitcode(raw)
    return 128 - code if code < 0 else code


def _wait_for(pid: int) -> int:
    """Wait for ``pid`` (reaping any other child on the way, as an init must); its exit status."""
    while True:
        got, raw = os.waitpid(-1, 0)
        if got == pid:
            return _exit_status(raw)


def _middle(fds: list[int], cpu_seconds: int, check: Callable[[], int], close: list[int], report: int,
            namespaces: bool = True, forget: Callable[[], None] = lambda: None) -> None:
    """The forked process: leads a session of its own, takes the check's pipes as 0, 1, 2, moves into
    namespaces of its own (``namespaces``), forks their init (PID 1), which drops every capability and
    forks the check (PID 2, as under bubblewrap); tells the server the init's PID (killing it takes the
    whole namespace), waits, and exits with the check's status. Never returns."""
    status = SETUP_FAILED
    try:
        forget()  # the server's table of running checks: nothing of it stays in this process's copy
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _die_with_parent(os.getppid())
        os.setsid()
        for fd in close:
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        import resource

        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))  # until the check sets its own
        if namespaces:
            own_namespaces()
        init = os.fork()
        if init == 0:
            os.close(report)
            _init(check, namespaces)
        os.write(report, str(init).encode())
        os.close(report)
        status = _wait_for(init)  # holding the pipes: they close once this process has the check's status
    except BaseException as exc:  # noqa: B036  (the check never started: say why on its stderr)
        try:
            os.write(2, f"the fork server could not set the check up: {exc}\n".encode())
        except OSError:
            pass
    finally:
        os._exit(status)


def _init(check: Callable[[], int], namespaces: bool = True) -> None:
    """PID 1 of the check's namespace: no capability left (the new user namespace gave it all), then the
    check as PID 2; exits with the check's status (the namespace, the implementation's process included,
    goes with it). Without namespaces (a server outside bubblewrap), the same two processes in the
    checker's own, with what a child started on its own would hold."""
    _die_with_parent(os.getppid())  # in a namespace of its own, its parent's PID reads 0
    if namespaces:
        fresh_mounts()
        drop_capabilities()
    me = os.getpid()
    pid = os.fork()
    if pid == 0:  # the check
        _die_with_parent(me)
        _run_check(check)
    os._exit(_wait_for(pid))


def _run_check(check: Callable[[], int]) -> None:
    """Run the check and exit as an interpreter would: the code of ``SystemExit``, 1 and a traceback on
    stderr for anything else (never back into the server's code)."""
    import traceback

    code = 1
    try:
        code = check()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: B036
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code if isinstance(code, int) else 1)


class _Children:
    """The server's forked processes: id -> (middle pid, init pid)."""

    def __init__(self):
        self.by_id: dict[int, tuple[int, int]] = {}

    def add(self, ident: int, middle: int, init: int) -> None:
        self.by_id[ident] = (middle, init)

    def kill(self, ident: int) -> None:
        """SIGKILL the check's init (PID 1 of its namespace: everything in it goes too), and the process
        group the middle process leads (init and the check, outside a namespace); the middle process
        then exits with 137."""
        middle, init = self.by_id.get(ident, (0, 0))
        for kill, pid in ((os.kill, init), (os.killpg, middle)):
            if pid > 0:
                try:
                    kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def reap(self) -> list[tuple[int, int]]:
        done = []
        for ident, (middle, _) in list(self.by_id.items()):
            try:
                pid, raw = os.waitpid(middle, os.WNOHANG)
            except ChildProcessError:
                pid, raw = middle, 0
            if pid:
                done.append((ident, _exit_status(raw)))
                del self.by_id[ident]
        return done


def _fork_one(request: dict, fds: list[int], check: Callable[[], int], close: list[int],
              namespaces: bool, forget: Callable[[], None]) -> tuple[int, int]:
    """Fork the middle process for one check; ``(middle pid, init pid)`` (init pid 0: it never started)."""
    r, w = os.pipe()
    cpu_seconds = int(request["cpu_seconds"])
    middle = os.fork()
    if middle == 0:
        request.clear()
        os.close(r)
        _middle(fds, cpu_seconds, check, close, w, namespaces, forget)
    os.close(w)
    got = b""
    while True:
        chunk = os.read(r, 32)
        if not chunk:
            break
        got += chunk
    os.close(r)
    return middle, int(got) if got.isdigit() else 0


def _send(sock: socket.socket, message: dict) -> None:
    sock.send(json.dumps(message).encode())


def serve(control: socket.socket, check: Callable[[], int], namespaces: bool = True) -> int:
    """The server's loop: fork a check for each ``fork`` request (its pipes arrive with it), kill one on
    ``kill``, report each exit; stop when the checker closes the socket. ``check`` runs in the forked
    check (``worker.main``)."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    children, close = _Children(), [control.fileno(), wake_r, wake_w]
    _send(control, {"kind": "hello", "problem": _probe_namespaces() if namespaces else ""})
    try:
        while True:
            for ident, code in children.reap():
                _send(control, {"kind": "exit", "id": ident, "code": code})
            readable, _, _ = select.select([control, wake_r], [], [])
            if wake_r in readable:
                os.read(wake_r, 4096)
            if control not in readable:
                continue
            data, fds, _, _ = socket.recv_fds(control, 1 << 16, 3)
            if not data:
                return 0
            request = json.loads(data)
            if request.get("op") == "fork" and len(fds) == 3:
                ident = int(request["id"])
                middle, pid = _fork_one(request, fds, check, close, namespaces, children.by_id.clear)
                children.add(ident, middle, pid)
            elif request.get("op") == "probe":
                _send(control, {"kind": "probe", "id": int(request["id"]),
                                "problem": _probe_namespaces() if namespaces else ""})
            elif request.get("op") == "kill":
                children.kill(int(request["id"]))
            for fd in fds:
                os.close(fd)
    finally:
        for ident in list(children.by_id):
            children.kill(ident)


def _probe_namespaces() -> str:
    """'' when a forked process can take namespaces of its own and drop its capabilities, else why not."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        why = b""
        try:
            _die_with_parent(os.getppid())
            own_namespaces()
            init = os.fork()
            if init == 0:  # PID 1 of the new namespaces, as a check's init
                try:
                    fresh_mounts()
                    drop_capabilities()
                except BaseException as exc:  # noqa: B036
                    os.write(w, str(exc).encode()[:200] or b"refused")
                os._exit(0)
            os.waitpid(init, 0)
        except BaseException as exc:  # noqa: B036
            why = str(exc).encode()[:200] or b"refused"
        os.write(w, why)
        os._exit(0)
    os.close(w)
    why = b""
    while chunk := os.read(r, 400):
        why += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return why.decode("utf-8", "replace")


# -- in the checker: the client ------------------------------------------------------------------------------

class Forked:
    """One check forked by the server, seen like a ``subprocess.Popen``: ``stdin``, ``stdout``, ``stderr``
    (the checker's ends of its pipes), ``poll()``, ``wait()``, ``returncode``, and ``kill()``."""

    def __init__(self, server: Server, ident: int, stdin, stdout, stderr):
        self.server, self.ident = server, ident
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.returncode: int | None = None
        self.exited = threading.Event()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        """Until the server reports the exit; with no timeout, a check the server never reports on is
        killed again every few seconds, and counted as killed after a minute."""
        if timeout is not None:
            if not self.exited.wait(timeout):
                raise subprocess.TimeoutExpired("forked check", timeout)
            return self.returncode
        for _ in range(12):
            if self.exited.wait(5):
                return self.returncode
            self.kill()
        self._ended(-signal.SIGKILL)
        return self.returncode

    def kill(self) -> None:
        if not self.exited.is_set():
            self.server.request({"op": "kill", "id": self.ident})

    def _ended(self, code: int) -> None:
        self.returncode = code
        self.exited.set()


class Server:
    """The checker's side of one fork server: started by a thread that lives as long as the checker
    (bubblewrap dies with the thread that started it), spoken to over a socket, read by another thread."""

    def __init__(self, argv: list[str], env: dict[str, str], modules: bytes, key: str,
                 preexec: Callable[[], None]):
        self.key, self.problem = key, ""
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.lock = threading.Lock()
        self.probes: dict[int, list] = {}
        self.children: dict[int, Forked] = {}
        self.alive, self.hello, self.drained = True, threading.Event(), threading.Event()
        self.proc: subprocess.Popen | None = None
        self.stderr = b""
        started = threading.Event()

        def keep() -> None:
            try:
                self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=theirs.fileno(),
                                             stderr=subprocess.PIPE, env=env, cwd="/", start_new_session=True,
                                             preexec_fn=preexec)
            except OSError as exc:
                self.problem = f"the fork server could not start: {exc}"
                self.drained.set()
                started.set()
                return
            finally:
                theirs.close()
            started.set()
            try:
                self.proc.stdin.write(modules)
                self.proc.stdin.close()
            except OSError:
                pass
            while chunk := os.read(self.proc.stderr.fileno(), 4096):
                self.stderr = (self.stderr + chunk)[-2000:]
            self.drained.set()
            self.proc.wait()

        threading.Thread(target=keep, daemon=True, name="shapetrace-fork-server").start()
        started.wait()
        threading.Thread(target=self._read, daemon=True, name="shapetrace-fork-server-reader").start()

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                break
            message = json.loads(data)
            if message.get("kind") == "hello":
                self.problem = str(message.get("problem") or "")
                self.hello.set()
            elif message.get("kind") == "probe":
                waiting = self.probes.get(int(message["id"]))
                if waiting is not None:
                    waiting[1] = str(message.get("problem") or "")
                    waiting[0].set()
            elif message.get("kind") == "exit":
                with self.lock:
                    child = self.children.pop(int(message["id"]), None)
                if child is not None:
                    child._ended(int(message["code"]))
        with self.lock:
            self.alive = False
            orphans, self.children = list(self.children.values()), {}
        for child in orphans:
            child._ended(-signal.SIGKILL)
        for waiting in list(self.probes.values()):
            waiting[1] = "the fork server stopped"
            waiting[0].set()
        if not self.hello.is_set():
            self.drained.wait(5)  # the server's last words, read by the thread that started it
            tail = self.stderr.decode("utf-8", "replace").strip().splitlines()
            self.problem = self.problem or ("the fork server stopped before it was ready"
                                            + (f": {tail[-1][:160]}" if tail else ""))
        self.hello.set()

    def ready(self, timeout: float = SERVER_GRACE) -> bool:
        return self.hello.wait(timeout) and self.alive and not self.problem

    def healthy(self, timeout: float = 30.0) -> str:
        """'' when the server still forks a process that takes its namespaces and fresh mounts (what every
        check needs before it starts), else why not: a check that damaged what the server holds shows here."""
        if not self.alive:
            return "the fork server stopped"
        ident, waiting = self._new_id(), [threading.Event(), "the fork server did not answer"]
        self.probes[ident] = waiting
        try:
            self.request({"op": "probe", "id": ident})
            waiting[0].wait(timeout)
            return waiting[1] if self.alive or waiting[0].is_set() else "the fork server stopped"
        finally:
            self.probes.pop(ident, None)

    def _new_id(self) -> int:
        """A fresh id, drawn at random: it says nothing about how many checks came before."""
        with self.lock:
            while True:
                ident = secrets.randbits(48)
                if ident not in self.children and ident not in self.probes:
                    return ident

    def request(self, message: dict, fds: list[int] = ()) -> None:
        try:
            socket.send_fds(self.sock, [json.dumps(message).encode()], list(fds))
        except OSError:
            pass  # the server is gone: the reader marks every child ended

    def start(self, cpu_seconds: int) -> Forked:
        """Fork one check; its pipes are made here, their far ends sent to the server and closed here."""
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        ident = self._new_id()
        with self.lock:
            child = Forked(self, ident, open(in_w, "wb", buffering=0), open(out_r, "rb", buffering=0),
                           open(err_r, "rb", buffering=0))
            if self.alive:
                self.children[ident] = child
        try:
            if child.ident in self.children:
                self.request({"op": "fork", "id": ident, "cpu_seconds": cpu_seconds}, [in_r, out_w, err_w])
            else:
                child._ended(-signal.SIGKILL)
        finally:
            for fd in (in_r, out_w, err_w):
                os.close(fd)
        return child

    def stop(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


#: One server per command line (inside bubblewrap, outside it), each replaced when the modules change.
_servers: dict[str, Server] = {}
_failed: dict[str, str] = {}
_servers_lock = threading.Lock()


def key_of(argv: list[str], modules: bytes, owner: str = "") -> str:
    """What a server is started from: a different command line, owner or modules need a new one."""
    return hashlib.sha256(json.dumps([owner, argv]).encode() + modules).hexdigest()


def _slot(argv: list[str], owner: str) -> str:
    return json.dumps([owner, argv])


def server(argv: list[str], env: dict[str, str], modules: bytes, preexec: Callable[[], None],
           owner: str = "") -> Server | None:
    """The running server for this command line and these modules, run as ``owner`` ('' : this process's
    user; its ``preexec`` changes it), started on first use, or None where one cannot run here (the
    reason is kept: :func:`problem`)."""
    slot, key = _slot(argv, owner), key_of(argv, modules, owner)
    with _servers_lock:
        if key in _failed:
            return None
        got = _servers.get(slot)
        if got is not None and got.alive and got.key == key:
            return got
        if got is not None:
            got.stop()  # started from other modules (an edited checkout), or gone
        got = Server(argv, env, modules, key, preexec)
        if not got.ready():
            _failed[key] = got.problem or "the fork server did not answer"
            got.stop()
            _servers.pop(slot, None)
            return None
        _servers[slot] = got
        return got


def replace(argv: list[str], owner: str = "") -> None:
    """Stop the server for this command line (it is started again on next use): one a check damaged."""
    with _servers_lock:
        got = _servers.pop(_slot(argv, owner), None)
    if got is not None:
        got.stop()


def current(argv: list[str], owner: str = "") -> Server | None:
    """The running server for this command line, if one is up (none is started)."""
    got = _servers.get(_slot(argv, owner))
    return got if got is not None and got.alive else None


def running() -> bool:
    """Whether a server is up (or being started)."""
    return _servers_lock.locked() or any(s.alive for s in _servers.values())


def problem() -> str:
    """Why the last server could not run ('' if none failed)."""
    return next(iter(_failed.values()), "")

