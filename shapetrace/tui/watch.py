"""Wait for a learner's file to change: watchdog when importable, polling otherwise (no Rich).

Changes are detected by content hash, so an editor that saves the same text
twice, or touches the file, does not trigger a second check.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from shapetrace.exercises.progress import file_hash

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

    def __enter__(self) -> FileWatcher:
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


def watch_exercises(curriculum, workspace, exercise_id, poll, time_limit, console, progress_loader,
                    check_file) -> None:
    """The watch loop with Rich output (Ctrl-C quits cleanly)."""
    from shapetrace.exercises.progress import learner_file, start_file
    from shapetrace.render.exercise import print_verdict

    progress = progress_loader()
    if exercise_id:
        first = curriculum.exercise(exercise_id).id
    else:
        pending = [e.id for e in curriculum.exercises
                   if progress.status(e.id, learner_file(workspace, e.id)) != "passed"]
        if not pending:
            console.print("[green]every exercise has passed[/green]; `shapetrace exercise reset --all` "
                          "starts over")
            return

        first = pending[0]

    def file_of(ex_id: str) -> Path:
        path = learner_file(workspace, ex_id)
        if not path.exists():
            start_file(curriculum.exercise(ex_id).starter, workspace, ex_id)
        return path

    def announce(ex_id: str, path: Path, mode: str) -> None:
        ex = curriculum.exercise(ex_id)
        console.rule(f"[bold]{ex.id}[/bold] · {ex.title}")
        console.print(f"{ex.task}\nedit [cyan]{path}[/cyan]; checking on every save ({mode}); "
                      "Ctrl-C to stop", highlight=False)

    def check(ex_id: str, path: Path) -> bool:
        ex = curriculum.exercise(ex_id)
        verdict = check_file(ex, path, time_limit, 3072, console.width)
        p = progress_loader()
        p.record_check(ex.id, verdict["verdict"], path)
        p.save()
        print_verdict(verdict, console, file=str(path))
        console.print("[dim]waiting for your next save…[/dim]" if verdict["verdict"] != "pass" else "")
        return verdict["verdict"] == "pass"

    try:
        left = watch_loop(first, lambda i: (n.id if (n := curriculum.next_after(i)) else None),
                          file_of, check, announce, poll=poll)
    except KeyboardInterrupt:
        console.print("\nstopped watching; your files and progress are saved")
        return
    if left is None:
        console.print("[bold green]every exercise in the curriculum passes. Well done.[/bold green]")
