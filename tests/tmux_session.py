"""Drive an interactive shapetrace in a real terminal: a detached tmux session on its own socket."""

from __future__ import annotations

import os
import subprocess
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
        """Poll the pane until ``expect`` (a substring or a predicate) holds; fail with the screen.

        A program draws a frame in several writes, so the first capture that matches may hold the new
        title above the old body (CI caught that twice under load): once ``expect`` holds, the pane is
        captured again 50 ms later and that later capture is returned if it still holds."""
        check = (lambda s: expect in s) if isinstance(expect, str) else expect
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if check(screen):
                time.sleep(0.05)
                later = self.screen()
                if check(later):
                    return later
                continue
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {expect!r}; screen:\n{screen}")
            time.sleep(0.05)

    def kill(self) -> None:
        """Stop this session's tmux server and remove its socket file."""
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)
        if self.socket_path:
            Path(self.socket_path).unlink(missing_ok=True)
