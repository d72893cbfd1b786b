"""Start the checker's child, read its channel and stderr with caps, and kill it on every exit path.

Parent side; no torch. The child (:mod:`shapetrace.worker`) runs in its own session, so it and every
descendant share one process group that is killed together. Deadlines are measured here, from frames
as they arrive: one to start (importing torch), one per phase (loading the file, each input case). A
descendant that keeps a pipe open cannot stretch them: reading stops at the deadline, and when the
child itself has exited, shortly after.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from shapetrace.exercises.frames import BadFrame, Decoder, Frame
from shapetrace.exercises.lockdown import preexec_limits

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

    @property
    def ready(self) -> bool:
        return any(f.header.get("kind") == "ready" for f in self.frames)


def _package_parent() -> str:
    return str(Path(__file__).resolve().parents[2])


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_package_parent(), env.get("PYTHONPATH")) if p)
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    return env


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the child's whole process group (it leads its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _Reader:
    """Reads the channel and stderr until both close, the child is killed, or a deadline passes."""

    def __init__(self, proc: subprocess.Popen, limit: float, phases: int, channel_extra: int = 0):
        self.proc, self.limit, self.run = proc, limit, ChildRun()
        self.channel_limit = CHANNEL_LIMIT + channel_extra
        self.decoder = Decoder()
        self.channel_bytes = 0
        self.phase, self.deadline = -2, time.monotonic() + STARTUP_GRACE
        self.exited_at: float | None = None
        self.err = bytearray()

    def _on_frame(self, frame: Frame) -> None:
        if len(self.run.frames) >= MAX_FRAMES:
            raise BadFrame(f"more than {MAX_FRAMES} frames")
        self.run.frames.append(frame)
        kind = frame.header.get("kind")
        if kind == "ready":
            self.phase, self.deadline = -1, time.monotonic() + self.limit + KILL_GRACE
        elif kind == "start" and isinstance(frame.header.get("case"), int):
            self.phase, self.deadline = frame.header["case"], time.monotonic() + self.limit + KILL_GRACE
        elif kind in ("case", "loaded"):
            self.deadline = time.monotonic() + self.limit + KILL_GRACE

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
            self.run.stderr = bytes(self.err[-STDERR_KEEP:]).decode("utf-8", "replace")


def start_child(request: str, workdir: str, limit: float, phases: int) -> subprocess.Popen:
    """Start ``python -m shapetrace.worker request`` in its own session, under a CPU hard limit."""
    cpu = int(STARTUP_GRACE + (limit + KILL_GRACE) * (phases + 1)) + 1
    return subprocess.Popen([sys.executable, "-m", "shapetrace.worker", request], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), cwd=workdir,
                            start_new_session=True, preexec_fn=preexec_limits(cpu))


def finish_child(proc: subprocess.Popen, limit: float, phases: int, channel_extra: int = 0) -> ChildRun:
    """Read the child to the end (or its deadline), then kill its process group and reap it.

    ``channel_extra``: bytes the channel may carry on top of the usual cap (a large output sent raw).
    """
    try:
        run = _Reader(proc, limit, phases, channel_extra).read()
    finally:
        stop_child(proc)
    run.returncode = proc.returncode
    return run


def stop_child(proc: subprocess.Popen) -> None:
    """Kill the child's process group, close its pipes and reap it (safe to call twice)."""
    kill_group(proc)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None and not stream.closed:
            stream.close()
    proc.wait()


def run_child(request: str, workdir: str, limit: float, phases: int) -> ChildRun:
    """Start the child and read it to the end; always killed and reaped."""
    return finish_child(start_child(request, workdir, limit, phases), limit, phases)
