"""``shapetrace exercise watch``: re-check on every save, one screen per check (rustlings is the model).

Each check clears the screen and puts the verdict on top, then the exercise, a progress bar and the
keys. A save is checked once (changes settle, then the content hash must differ from the last check).
After a pass the next exercise waits for a key (n or Enter), so the pass stays on screen. Nothing
prints a hint or a fix unless asked (h). Ctrl-C stops cleanly: the checker's child is killed with its
whole process group, the file watcher is stopped and joined, and nothing the learner wrote is touched.
"""

from __future__ import annotations

import io
import os
import select
import sys
import threading
import time
from pathlib import Path

from rich.console import Console, Group
from rich.segment import Segments
from rich.text import Text

from shapetrace.errors import ShapetraceError
from shapetrace.exercises.progress import file_hash, learner_file, start_file
from shapetrace.tui.viewport import Scroll, body_lines, segments, window

POLL_SECONDS = 0.5
#: After a change, how long the file must stay quiet before it is checked (editors write in steps).
SETTLE_SECONDS = 0.25


def _digest(path: Path) -> str | None:
    try:
        return file_hash(path)
    except OSError:
        return None


class FileWatcher:
    """``changed()`` says whether the file's content differs from the last time it said yes."""

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

    def wait_poke(self, timeout: float) -> bool:
        """Block up to ``timeout`` for a file event (polling mode: always wakes, to compare hashes)."""
        if self.observer is None:
            time.sleep(min(timeout, POLL_SECONDS))
            return True
        got = self.poked.wait(timeout)
        self.poked.clear()
        return got

    def changed(self) -> bool:
        """True once per new content, after the file has been quiet for ``SETTLE_SECONDS``."""
        if self.observer is not None:
            while self.poked.wait(SETTLE_SECONDS):
                self.poked.clear()
        now = _digest(self.path)
        if now is not None and now != self.last:
            if self.observer is None:
                time.sleep(SETTLE_SECONDS)
                now = _digest(self.path) or now
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


class Keys:
    """Single keys from the terminal (cbreak mode), or lines from a pipe; restored on exit."""

    def __init__(self, stream=None):
        self.stream = stream if stream is not None else sys.stdin
        self.saved = None
        self.closed = self.stream is None   # (started with stdin closed, ``<&-``: no key will come)

    def __enter__(self) -> Keys:
        try:
            if self.stream.isatty():
                import termios
                import tty

                fd = self.stream.fileno()
                self.saved = termios.tcgetattr(fd)
                tty.setcbreak(fd)
        except (OSError, ValueError, AttributeError):
            self.saved = None
        return self

    def __exit__(self, *exc) -> None:
        if self.saved is not None:
            import termios

            termios.tcsetattr(self.stream.fileno(), termios.TCSADRAIN, self.saved)

    def _key(self) -> str | None:
        """One key; an arrow's escape sequence (``\\x1b[B``) as one key."""
        fd = self.stream.fileno()
        key = os.read(fd, 1)
        if key == b"\x1b" and select.select([fd], [], [], 0.02)[0]:
            key += os.read(fd, 2)
        return key.decode("utf-8", "replace") or None

    def poll(self, timeout: float) -> str | None:
        """A key ("\\n" for Enter), or None when none came within ``timeout``."""
        if self.closed:
            time.sleep(timeout)
            return None
        try:
            ready, _, _ = select.select([self.stream], [], [], timeout)
        except (OSError, ValueError):
            self.closed = True
            return None
        if not ready:
            return None
        if self.saved is not None:
            return self._key()
        line = self.stream.readline()
        if not line:
            self.closed = True
            return None
        return line.strip()[:1].lower() or "\n"


class Watch:
    """The watch session: which exercise, its last verdict, and how the screen shows them."""

    def __init__(self, curriculum, workspace, console, check_file, progress_loader, record, time_limit: float,
                 show_hint):
        self.curriculum, self.workspace, self.console = curriculum, workspace, console
        self.check_file, self.progress_loader, self.record = check_file, progress_loader, record
        self.time_limit, self.show_hint = time_limit, show_hint
        self.verdicts: dict[str, dict] = {}   # the last verdict of each exercise, for its hints
        self.screen = None                    # (verdict, status) on screen now, or (verdict, status, with hint)
        self.scroll = Scroll()

    def file_of(self, ex_id: str) -> Path:
        path = learner_file(self.workspace, ex_id)
        if not path.exists():
            start_file(self.curriculum.exercise(ex_id).starter, self.workspace, ex_id)
        return path

    def done_count(self) -> int:
        progress = self.progress_loader(quiet=True)
        return sum(progress.status(e.id, learner_file(self.workspace, e.id)) == "passed"
                   for e in self.curriculum.exercises)

    def check(self, ex_id: str, path: Path, mode: str) -> dict | None:
        ex = self.curriculum.exercise(ex_id)
        try:
            verdict = self.check_file(ex, path, self.time_limit, 3072, self.console.width)
        except ShapetraceError as exc:  # the checker's own failure: shown, never recorded
            self.show(ex_id, path, mode, None, str(exc))
            return None
        self.record(ex.id, verdict["verdict"], path)
        self.verdicts[ex.id] = verdict
        self.show(ex_id, path, mode, verdict)
        return verdict

    def show(self, ex_id: str, path: Path, mode: str, verdict: dict | None, problem: str = "") -> None:
        """A fresh screen: the verdict on top, the exercise and keys at the bottom; a verdict taller
        than the terminal scrolls between them (Space/↓, ↑) with a marker saying what is below."""
        from shapetrace.render.exercise import verdict_view, watch_status

        ex = self.curriculum.exercise(ex_id)
        if verdict is not None:
            body = verdict_view(verdict, str(path))
        else:
            body = Text.assemble(("the checker could not run", "bold red"), f": {problem}")
        passed = verdict is not None and verdict["verdict"] == "pass"
        status = watch_status(ex, str(path), mode, self.done_count(), len(self.curriculum.exercises),
                              passed, last=self.curriculum.next_after(ex_id) is None)
        self.screen = (body, status)
        self.scroll.top()
        self.redraw()

    def redraw(self) -> None:
        if self.screen is None:
            return
        body, foot_view = self.screen[0], self.screen[-1]   # (body, status) or (body, status, status + hint)
        console, options = self.console, self.console.options
        foot = body_lines(console, options, foot_view)
        rows = console.height - len(foot) - 1 if console.is_terminal else 10**9  # the last row: the cursor
        lines = window(console, options, body_lines(console, options, body), rows, self.scroll)
        self.console.clear()
        self.console.print(Segments(segments(lines)), end="")
        self.console.print(foot_view)

    def scrolled(self, key: str | None) -> bool:
        """Space/↓ and ↑ move a verdict taller than the terminal; True when the key was one of them."""
        if key in (" ", "\x1b[B", "j"):
            moved = self.scroll.down()
        elif key in ("\x1b[A", "k"):
            moved = self.scroll.up()
        else:
            return False
        if moved:
            self.redraw()
        return True

    def hint(self, ex_id: str) -> None:
        """One more hint, about the fault of the last check (recorded exactly as `exercise hint` does).
        On a watch screen it joins the foot, under the keys, and the verdict above gives up rows for it
        (printed below the screen, it scrolled the verdict off the top of an 80×24 terminal)."""
        ex = self.curriculum.exercise(ex_id)
        verdict = self.verdicts.get(ex.id)
        problem = "" if verdict else "your file has not been checked yet"
        if self.screen is None:
            self.show_hint(ex, verdict, problem, self.console)
            return
        out = io.StringIO()
        self.show_hint(ex, verdict, problem, Console(file=out, width=self.console.width, legacy_windows=False,
                                                     color_system=self.console.color_system,
                                                     force_terminal=self.console.is_terminal))
        body, status = self.screen[:2]
        self.screen = (body, status, Group(status, Text.from_ansi(out.getvalue().rstrip("\n"))))
        self.redraw()

    def run_one(self, ex_id: str, keys: Keys, poll: bool) -> str:
        """Watch one exercise until it passes and the learner moves on ("next") or quits ("quit")."""
        path = self.file_of(ex_id)
        with FileWatcher(path, poll=poll) as watcher:
            verdict = self.check(ex_id, path, watcher.mode)
            while True:
                key = keys.poll(0.1)
                if key == "q":
                    return "quit"
                if self.scrolled(key):
                    continue
                if key == "h":
                    self.hint(ex_id)
                elif key in ("n", "\n") and verdict is not None and verdict["verdict"] == "pass":
                    return "next"
                if key is None and watcher.wait_poke(0.1) and watcher.changed():
                    verdict = self.check(ex_id, path, watcher.mode)


def watch_exercises(curriculum, workspace, exercise_id, poll, time_limit, console, progress_loader,
                    check_file, record, show_hint) -> None:
    """The watch loop with Rich output; Ctrl-C and q quit cleanly.

    ``record(ex_id, verdict, path)`` keeps a check and ``show_hint(exercise, verdict, problem, console)``
    reveals, keeps and prints one more hint about the last verdict's fault, both in the learner's
    progress, through the same code as the CLI commands.
    """

    progress = progress_loader()
    if exercise_id is not None:   # ("" is no exercise: refused as check and hint refuse it)
        first = curriculum.exercise(exercise_id).id
    else:
        pending = [e.id for e in curriculum.exercises
                   if progress.status(e.id, learner_file(workspace, e.id)) != "passed"]
        if not pending:
            console.print("[green]every exercise has passed[/green]; `shapetrace exercise reset --all` "
                          "starts over")
            return
        first = pending[0]
    watch = Watch(curriculum, workspace, console, check_file, progress_loader, record, time_limit, show_hint)
    current: str | None = first
    try:
        with Keys() as keys:
            while current is not None:
                if watch.run_one(current, keys, poll) == "quit":
                    console.print("stopped watching; your files and progress are saved")
                    return
                nxt = curriculum.next_after(current)
                current = nxt.id if nxt else None
    except KeyboardInterrupt:
        console.print("\nstopped watching; your files and progress are saved")
        return
    console.print("[bold green]every exercise in the curriculum passes. Well done.[/bold green]")
