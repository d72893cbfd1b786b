"""Start the checker's child, read its channel and stderr with caps, and kill it on every exit path.

Parent side; no torch. The child (:mod:`shapetrace.worker`) is forked by the checker's fork server
(:mod:`.forks`: one bubblewrap sandbox that imports torch once) into namespaces of its own; where the
server cannot run, it is started in a bubblewrap sandbox of its own (:mod:`.isolation`). Its request
goes over its standard input (no request file, no temp folder); a child started on its own reads its
modules there first. It dies with the parent: ``--die-with-parent`` (bubblewrap), and
``PR_SET_PDEATHSIG`` on the process this one starts (the server's: on a thread that lives as long as
the checker). Deadlines are measured here: one to start
(importing torch), then one overall deadline for the whole check, fixed when the child says it is
ready, which no frame can move; each phase (loading the file, each input case) also has its own,
never past the overall one. Frames are capped in size and number before they are buffered.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from shapetrace.errors import CheckerRefused
from shapetrace.exercises import forks, isolation
from shapetrace.exercises.frames import MAX_BODY, BadFrame, Decoder, Frame
from shapetrace.exercises.untrusted import clean

#: Seconds allowed for the child to start (importing torch on a busy machine).
STARTUP_GRACE = 90.0
#: Extra seconds past a phase's time limit before the parent kills the child (its own alarm comes first).
KILL_GRACE = 1.5
#: Bytes of frames read from the channel; of stderr, the last ``STDERR_KEEP`` are kept.
CHANNEL_LIMIT = 64 << 20
#: Frames a check needs: ready, and a start and a result per phase; far more is a flood.
MAX_FRAMES = 64
STDERR_KEEP = 4000
#: After the child exits, how long a descendant may keep a pipe open before reading stops.
EXIT_GRACE = 0.5


@dataclass
class ChildRun:
    """What came back from one child: its frames, the phase it died in, and how it ended."""

    frames: list[Frame] = field(default_factory=list)
    returncode: int | None = None
    timed_out_phase: int | None = None  # -2 startup, -1 loading, i >= 0 input case i
    killed_for: str = ""  # "", "deadline", "channel", "output"
    stderr: str = ""
    stderr_total: int = 0
    bad_channel: str = ""
    #: Layers of the sandbox that did not take hold, in words (the parent's and the child's own report,
    #: sent before any learner code ran): a pass is then not recorded.
    missing: list[str] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return any(f.header.get("kind") == "ready" for f in self.frames)


def kill_group(proc: subprocess.Popen | forks.Forked) -> None:
    """SIGKILL the child's whole process group (it leads its own session); a forked check: its whole
    PID namespace, through the fork server."""
    if isinstance(proc, forks.Forked):
        proc.kill()
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _Reader:
    """Reads the channel and stderr until both close, the child is killed, or a deadline passes."""

    def __init__(self, proc: subprocess.Popen, limit: float, phases: int, channel_extra: int = 0,
                 progress: Callable[[int, int], None] | None = None,
                 answer: Callable[[Frame], bytes] | None = None):
        self.proc, self.limit, self.run = proc, limit, ChildRun()
        self.progress = progress  # told (case, cases) as each case starts
        self.answer = answer  # the word the child waits for after each case (its standard input stays open)
        self.channel_limit = CHANNEL_LIMIT + channel_extra
        self.decoder = Decoder(MAX_BODY + channel_extra)
        self.channel_bytes = 0
        self.phases = phases
        self.phase, self.deadline = -2, time.monotonic() + STARTUP_GRACE
        self.overall = self.deadline  # fixed once, when the child is ready
        self.exited_at: float | None = None
        self.err = bytearray()

    def _on_frame(self, frame: Frame) -> None:
        if len(self.run.frames) >= MAX_FRAMES:
            raise BadFrame(f"more than {MAX_FRAMES} frames")
        self.run.frames.append(frame)
        kind, now = frame.header.get("kind"), time.monotonic()
        if kind == "ready" and self.phase == -2:
            missing = frame.header.get("missing")
            self.run.missing += [str(m)[:200] for m in missing[:16]] if isinstance(missing, list) else \
                ["the child did not say which layers took hold"]
            self.overall = now + (self.limit + KILL_GRACE) * (self.phases + 2)
            self.phase, self.deadline = -1, min(self.overall, now + self.limit + KILL_GRACE)
        elif self.phase == -2:
            raise BadFrame("a frame before the child was ready")
        elif kind == "start" and isinstance(frame.header.get("case"), int):
            self.phase, self.deadline = frame.header["case"], min(self.overall, now + self.limit + KILL_GRACE)
            if self.progress is not None and 0 <= self.phase < self.phases:
                self.progress(self.phase + 1, self.phases)
        elif kind == "case" and self.answer is not None:
            self._reply(self.answer(frame))

    def _reply(self, word: bytes) -> None:
        try:
            os.write(self.proc.stdin.fileno(), word)
        except (OSError, ValueError):  # the child is gone, or closed its end
            pass

    def _channel(self, data: bytes) -> bool:
        self.channel_bytes += len(data)
        if self.channel_bytes > self.channel_limit:
            self.run.killed_for = "channel"
            return False
        try:
            for frame in self.decoder.feed(data):
                self._on_frame(frame)
        except BadFrame as exc:
            self.run.bad_channel = str(exc)
            return False
        return True

    def _stderr(self, data: bytes) -> None:
        self.run.stderr_total += len(data)
        self.err += data
        if len(self.err) > 2 * STDERR_KEEP:
            del self.err[:-STDERR_KEEP]

    def read(self) -> ChildRun:
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ, "channel")
        sel.register(self.proc.stderr, selectors.EVENT_READ, "stderr")
        try:
            while sel.get_map():
                now = time.monotonic()
                if now > self.deadline:
                    self.run.timed_out_phase, self.run.killed_for = self.phase, "deadline"
                    return self.run
                if self.exited_at is None and self.proc.poll() is not None:
                    self.exited_at = now
                if self.exited_at is not None and now > self.exited_at + EXIT_GRACE:
                    return self.run
                for key, _ in sel.select(timeout=0.1):
                    data = os.read(key.fileobj.fileno(), 1 << 16)
                    if not data:
                        sel.unregister(key.fileobj)
                    elif key.data == "stderr":
                        self._stderr(data)
                    elif not self._channel(data):
                        return self.run
            return self.run
        finally:
            sel.close()
            self.run.stderr = clean(bytes(self.err[-STDERR_KEEP:]).decode("utf-8", "replace"))


_PR_SET_PDEATHSIG = 1


def _preexec(cpu_seconds: int | None, prepare: Callable[[], None] | None = None):
    """Runs in the new process before it starts bubblewrap: ``prepare`` (started as root: bubblewrap's
    binds staged and the user dropped, :func:`.isolation.unprivileged`), then die with the parent (the
    thread that started it; set after any change of user, which clears it), a CPU cap (none for the fork
    server, which lasts as long as the checker), no core files."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    setrlimit, cpu, core = resource.setrlimit, resource.RLIMIT_CPU, resource.RLIMIT_CORE

    def apply() -> None:
        if prepare is not None:
            prepare()
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if cpu_seconds is not None:
            setrlimit(cpu, (cpu_seconds, cpu_seconds))
        setrlimit(core, (0, 0))
    return apply


#: The last payload and what it was encoded from: (sources, payload).
_last_payload: tuple[dict, bytes] = ({}, b"")


def modules_payload() -> bytes:
    """What the boot code reads first on standard input: the import path and the modules' sources (each
    read and checked against its digest on every call). Encoding them (about 2 MB of JSON) costs more than
    reading them, and before each check the fork server's key needs the payload: encoded again only when
    the sources differ from the last ones encoded."""
    global _last_payload
    sources = {"path": isolation.package_paths(), "modules": isolation.module_sources()}
    last, payload = _last_payload
    if sources != last:
        modules = json.dumps(sources).encode()
        payload = len(modules).to_bytes(8, "big") + modules
        _last_payload = (sources, payload)
    return payload


def request_payload(meta: dict, body: bytes, secret: bytes = b"") -> bytes:
    """What the worker reads on standard input: the request, and the secret: for a learner-written test,
    the implementation under test, read only by the process the child forks to run it (:mod:`.remote`),
    never by the process that runs the learner's code."""
    request = json.dumps(meta).encode()
    return (len(request).to_bytes(8, "big") + request + len(body).to_bytes(8, "big") + body
            + len(secret).to_bytes(8, "big") + secret)


def payload(meta: dict, body: bytes, secret: bytes = b"") -> bytes:
    """A child started on its own: its modules, then the request (:func:`request_payload`)."""
    return modules_payload() + request_payload(meta, body, secret)


def warm_up() -> None:
    """Start the fork server in the background (the checker loads the reference meanwhile)."""
    if not forks.running():
        threading.Thread(target=_warm, daemon=True, name="shapetrace-warm-up").start()


def _warm() -> None:
    try:
        fork_server()
    except Exception:  # noqa: BLE001  (a refusal: the check itself raises it again, in one line)
        pass


def fork_server(bwrap: bool = True, drop: bool = True) -> forks.Server | None:
    """The checker's fork server (:mod:`.forks`), started on first use: inside bubblewrap, each check
    forked into namespaces of its own; where bubblewrap is turned off (``bwrap=False``) or cannot start,
    a server outside it whose checks take no namespaces, as a child started on its own took none (started
    as root, it runs as nobody: :func:`plain_user`). None where ``SHAPETRACE_NO_FORK_SERVER=1`` or the
    server cannot run (each check then starts on its own)."""
    if os.environ.get("SHAPETRACE_NO_FORK_SERVER") == "1":
        return None
    argv, prepare = _server_command(bwrap, drop)
    return forks.server(argv, isolation.child_env(), modules_payload(), _preexec(None, prepare),
                        owner=_owner(prepare))


def _owner(prepare: Callable[[], None] | None) -> str:
    """Who a server runs as, beside its command line (the same command runs as root or as nobody)."""
    return "" if prepare is None else str(isolation.UNPRIVILEGED)


def _server_command(bwrap: bool = True, drop: bool = True) -> tuple[list[str], Callable[[], None] | None]:
    if bwrap and not isolation.bwrap_problem():
        return isolation.unprivileged(isolation.bwrap_argv(None, server=True) + isolation.python_argv("fork_server"))
    return isolation.python_argv("plain_fork_server"), plain_user(drop)


def plain_user(drop: bool = True) -> Callable[[], None] | None:
    """Outside bubblewrap, what a new process does before learner code can run in it: started as root,
    drop to nobody with no groups (``drop``; the tests of single layers turn it off), or raise
    :class:`~shapetrace.errors.CheckerRefused` saying what to install where nobody cannot run the interpreter;
    None when there is nothing to drop."""
    if not drop or os.geteuid() != 0:
        return None
    problem = isolation.plain_problem()
    if problem:
        raise CheckerRefused(problem)
    return isolation.drop_root


def plain_missing(drop: bool) -> list[str]:
    """The layer a check outside bubblewrap lacks when it keeps root (the tests of single layers)."""
    return ["user (turned off for this check: learner code ran as root)"] if not drop and os.geteuid() == 0 else []


def server_problem(bwrap: bool = True) -> str:
    """'' when the running fork server (if any) still sets a check up, else why not; a server found broken
    is stopped, so the next check starts a new one."""
    try:
        argv, prepare = _server_command(bwrap)
    except Exception:  # noqa: BLE001  (the refusal to run as root outside bubblewrap: no server ran to break)
        return ""
    got = forks.current(argv, _owner(prepare))
    if got is None:
        return ""
    problem = got.healthy()
    if problem:
        forks.replace(argv, _owner(prepare))
    return problem


def _feed(proc: subprocess.Popen, data: bytes, keep_open: bool = False) -> None:
    """Write the request in the background; standard input is then closed, or kept open for the parent's
    word after each case (``keep_open``; :func:`stop_child` closes it)."""
    def write() -> None:
        try:
            proc.stdin.write(data)
            proc.stdin.flush()
            if not keep_open:
                proc.stdin.close()
        except (OSError, ValueError):  # the child died first
            pass
    threading.Thread(target=write, daemon=True).start()


def start_child(meta: dict, body: bytes, limit: float, phases: int, bwrap: bool = True,
                secret: bytes = b"", drop: bool = True, replies: bool = False) -> subprocess.Popen:
    """Start the child in the sandbox and send it ``meta`` (JSON), ``body`` (plain values) and ``secret``
    (see :func:`payload`).

    ``meta`` gets ``readable`` (the Landlock rules) and ``cpu_seconds``; the layers the parent could not
    set up are kept on the process as ``proc.missing``. ``bwrap=False`` (tests of the inner layers
    alone) starts the child without bubblewrap, and says so in ``missing``; outside bubblewrap, started as
    root, the child runs as nobody (``drop``, :func:`plain_user`). ``replies``: standard input stays open
    after the request, for the parent's word after each case (``meta["replies"]``, :func:`finish_child`).
    """
    cpu = int((limit + KILL_GRACE) * (phases + 2)) + 1
    meta = dict(meta, readable=isolation.readable(None), cpu_seconds=cpu)
    if bwrap:
        argv, missing = isolation.command(None)
    else:
        argv, missing = isolation.python_argv(), ["bubblewrap (turned off for this check)"]
    if missing:
        missing += plain_missing(drop)
    server = fork_server(bwrap, drop)
    if server is not None:
        child = server.start(int(STARTUP_GRACE) + cpu + 60)
        child.missing, child.status_128 = missing, True  # the server reports a check killed by N as 128 + N
        _feed(child, request_payload(meta, body, secret), replies)
        return child
    argv, prepare = isolation.unprivileged(argv) if not missing else (argv, plain_user(drop))
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=isolation.child_env(), cwd="/", start_new_session=True,
                            preexec_fn=_preexec(int(STARTUP_GRACE) + cpu + 60, prepare))
    proc.missing, proc.status_128 = missing, not missing  # bubblewrap reports its command killed by N as 128 + N
    _feed(proc, payload(meta, body, secret), replies)
    return proc


def finish_child(proc: subprocess.Popen, limit: float, phases: int, channel_extra: int = 0,
                 progress: Callable[[int, int], None] | None = None,
                 answer: Callable[[Frame], bytes] | None = None) -> ChildRun:
    """Read the child to the end (or its deadline), then kill its process group and reap it.

    ``channel_extra``: bytes the channel may carry on top of the usual cap (a large output sent raw);
    ``progress``: called with (case, cases) as the child starts each case (the CLI's progress line);
    ``answer``: for a child started with ``replies``, the word written to it after each case's result.
    """
    try:
        run = _Reader(proc, limit, phases, channel_extra, progress, answer).read()
        if not run.killed_for and not run.bad_channel:
            _await_exit(proc)
    finally:
        stop_child(proc)
    run.returncode = proc.returncode
    if getattr(proc, "status_128", False) and run.returncode is not None and run.returncode > 128:
        run.returncode = 128 - run.returncode  # bubblewrap exits 128 + N when its child died of signal N
    run.missing = list(getattr(proc, "missing", [])) + run.missing
    return run


def _await_exit(proc) -> None:
    """A child whose pipes closed by themselves has exited or is about to: wait ``EXIT_GRACE`` for its
    status, so the kill that follows does not turn its own exit code into a kill."""
    try:
        proc.wait(timeout=EXIT_GRACE)
    except subprocess.TimeoutExpired:
        pass


def stop_child(proc: subprocess.Popen) -> None:
    """Kill the child's process group, close its pipes and reap it (safe to call twice)."""
    kill_group(proc)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None and not stream.closed:
            stream.close()
    proc.wait()


def run_child(meta: dict, body: bytes, limit: float, phases: int, bwrap: bool = True,
              secret: bytes = b"", drop: bool = True) -> ChildRun:
    """Start the child and read it to the end; always killed and reaped."""
    return finish_child(start_child(meta, body, limit, phases, bwrap, secret, drop), limit, phases)
