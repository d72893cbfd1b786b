"""Drive an interactive shapetrace in a real terminal: a detached tmux session on its own socket."""

from __future__ import annotations

import os
import select
import shlex
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from conftest import require_tool

ROOT = Path(__file__).resolve().parents[1]
SHELL = "env -u COLUMNS -u LINES PS1='$ ' bash --norc --noprofile"


class TmuxSession:
    """A detached tmux session running a plain bash in the checkout, on a socket of its own."""

    def __init__(self, name: str, width: int = 100, height: int = 40):
        require_tool("tmux")
        self.socket = f"st-{name}-{uuid.uuid4().hex[:8]}"
        self.tmux("new-session", "-d", "-x", str(width), "-y", str(height), "-c", str(ROOT), SHELL)
        self.socket_path = self.tmux("display-message", "-p", "#{socket_path}").strip()
        self._output = self._pipe_output()

    def _pipe_output(self) -> int:
        """A FIFO that tmux copies the pane's output into (``pipe-pane``): :meth:`wait_for` sleeps until the
        program writes instead of capturing the pane every 50 ms (each capture is a tmux client, about 3 ms
        of CPU, while the program it waits for starts on the same cores). Returns its read end; a write end
        of our own stays open beside it, so the read end never sees an end of file."""
        self._folder = Path(tempfile.mkdtemp(prefix="st-tmux-"))
        fifo = self._folder / "output"  # (kept until kill(): tmux's shell opens it when it gets to it)
        os.mkfifo(fifo)
        read = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        self._keep = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        self.tmux("pipe-pane", "-O", f"exec cat > {shlex.quote(str(fifo))}")
        return read

    def _until_output(self, seconds: float) -> None:
        """Wait until the pane's program writes something, or ``seconds`` pass (at most 0.5 s: tmux also
        changes the pane without output, as when it resizes it); then drop what was written."""
        poll = select.poll()  # (not select(): a worker may hold more than 1,024 descriptors by then)
        poll.register(self._output, select.POLLIN)
        if poll.poll(max(0.0, min(seconds, 0.5)) * 1000):
            try:
                while os.read(self._output, 1 << 16):
                    pass
            except BlockingIOError:
                pass

    def tmux(self, *args: str) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
        proc = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True,
                              env=env, timeout=30)
        assert proc.returncode == 0, f"tmux {' '.join(args)}: {proc.stderr}"
        return proc.stdout

    def type(self, line: str) -> None:
        """Type a shell line and press Enter."""
        self.tmux("send-keys", "-l", line)
        self.tmux("send-keys", "Enter")

    def keys(self, *keys: str) -> None:
        """Send tmux key names (Enter, Space, Right, Left, C-c) or literal characters."""
        self.tmux("send-keys", *keys)

    def resize(self, width: int, height: int) -> None:
        """Make the terminal ``width`` × ``height`` (the program sees a SIGWINCH)."""
        self.tmux("resize-window", "-x", str(width), "-y", str(height))

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p")

    def wait_for(self, expect: str | Callable[[str], bool], timeout: float = 60) -> str:
        """Capture the pane until ``expect`` (a substring or a predicate) holds, again each time the program
        writes (at most every 50 ms; every 0.5 s without output); fail with the screen.

        A program draws a frame in several writes, so the first capture that matches may hold the new
        title above the old body (CI caught that twice under load): once ``expect`` holds, the pane is
        captured again 50 ms later and that later capture is returned if it still holds."""
        check = (lambda s: expect in s) if isinstance(expect, str) else expect
        deadline = time.monotonic() + timeout
        while True:
            captured = time.monotonic()
            screen = self.screen()
            if check(screen):
                time.sleep(0.05)
                later = self.screen()
                if check(later):
                    return later
                continue
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {expect!r}; screen:\n{screen}")
            self._until_output(deadline - time.monotonic())
            time.sleep(max(0.0, captured + 0.05 - time.monotonic()))  # (never more often than every 50 ms)

    def kill(self) -> None:
        """Stop this session's tmux server and remove its socket file."""
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)
        for fd in (self._output, self._keep):
            os.close(fd)
        shutil.rmtree(self._folder, ignore_errors=True)
        if self.socket_path:
            Path(self.socket_path).unlink(missing_ok=True)
