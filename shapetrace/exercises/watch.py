"""Wait for a learner's file to change: watchdog when importable, polling otherwise (no Rich).

Changes are detected by content hash, so an editor that saves the same text
twice, or touches the file, does not trigger a second check.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

from .progress import file_hash

POLL_SECONDS = 0.5


def _digest(path: Path) -> str | None:
    try:
        return file_hash(path)
    except OSError:
        return None


class FileWatcher:
    """``wait()`` blocks until the file's content differs from the last time it returned."""

    def __init__(self, path: Path, poll: bool = False):
        self.path = Path(path).resolve()
        self.last = _digest(self.path)
        self.poked = threading.Event()
        self.observer = None
        self.mode = "polling"
        if not poll:
            self._start_watchdog()

    def _start_watchdog(self) -> None:
        try:
            from watchdog.events import FileSystemEventHandler
            from watchdog.observers import Observer
        except ImportError:
            return
        target, poked = str(self.path), self.poked

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event):
                paths = {getattr(event, "src_path", ""), getattr(event, "dest_path", "")}
                if target in {str(Path(p).resolve()) for p in paths if p}:
                    poked.set()

        observer = Observer()
        observer.schedule(Handler(), str(self.path.parent), recursive=False)
        observer.daemon = True
        observer.start()
        self.observer, self.mode = observer, "watchdog"

    def wait(self, stop: threading.Event | None = None) -> bool:
        """Block until the content changes (True) or ``stop`` is set (False)."""
        while not (stop and stop.is_set()):
            self.poked.wait(POLL_SECONDS if self.observer is None else 1.0)
            self.poked.clear()
            now = _digest(self.path)
            if now is not None and now != self.last:
                self.last = now
                return True
        return False

    def close(self) -> None:
        if self.observer is not None:
            self.observer.stop()
            self.observer.join(timeout=2)

    def __enter__(self) -> "FileWatcher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def watch_loop(first: str, next_of: Callable[[str], str | None], file_of: Callable[[str], Path],
               check: Callable[[str, Path], bool], announce: Callable[[str, Path, str], None],
               poll: bool = False, stop: threading.Event | None = None) -> str | None:
    """Check ``first`` now and on every change; on a pass move to ``next_of``; return when done.

    Returns the id being watched when ``stop`` was set, or None when every exercise passed.
    """
    current: str | None = first
    while current is not None:
        path = file_of(current)
        with FileWatcher(path, poll=poll) as watcher:
            announce(current, path, watcher.mode)
            passed = check(current, path)
            while not passed:
                if not watcher.wait(stop):
                    return current
                passed = check(current, path)
        current = next_of(current)
    return None
