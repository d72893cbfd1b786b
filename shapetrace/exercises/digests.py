"""Digests of what the checker runs in the parent: the solutions, the judge and the broken versions (no torch).

The parent runs lesson code (each ``solution.py``, the reference and known mistakes in ``exercise.toml``)
and its own modules (the judge, the bug catalogue's broken versions in ``shapetrace/attention/``, the
child's modules it sends over the pipe). Their SHA-256 digests are recorded once per process, when this
module is first used (the package) and when a lessons folder is first loaded (every ``*.py`` and
``*.toml`` under it, whichever exercises it holds), and kept in the parent's memory, which the child
can neither write nor read (no ptrace, no ``/proc/PID/mem``: :mod:`.confine`). Before every check the
files are hashed again, and the lesson code the parent is about to run is read from the very bytes that
were checked; any difference is :class:`TamperedError` (one line, exit 1) and nothing runs: one
student's file cannot change what the next student's check runs, in a ``grade`` or ``watch`` session.

A file written at build time would also cover changes between two processes; the sandbox is what
stops those (the child sees none of these files and writes nowhere), and a checkout whose lessons are
edited between two commands must keep working.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

from shapetrace.errors import ShapetraceError

PACKAGE_DIR = Path(__file__).resolve().parents[1]
#: The lesson files the parent reads code from.
LESSON_PATTERNS = ("*.py", "*.toml")


class TamperedError(ShapetraceError):
    """A file the checker runs changed since it was recorded: the checker refuses to run (exit 1)."""

    exit_code = 1


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _files(root: Path, patterns: tuple[str, ...]) -> list[Path]:
    found = {p for pattern in patterns for p in root.rglob(pattern) if "__pycache__" not in p.parts}
    return sorted(p for p in found if p.is_file())


def record(root: Path, patterns: tuple[str, ...]) -> dict[str, str]:
    """``{resolved path: sha256}`` of every file under ``root`` matching ``patterns``."""
    return {str(p.resolve()): sha256(p.read_bytes()) for p in _files(root, patterns)}


_lock = threading.Lock()
#: The recorded digests, by folder: the package's and each lessons folder's, on first use in this process.
_recorded: dict[str, dict[str, str]] = {}


def _folder(root: Path, patterns: tuple[str, ...]) -> dict[str, str]:
    key = str(Path(root).resolve())
    with _lock:
        if key not in _recorded:
            _recorded[key] = record(Path(key), patterns)
        return _recorded[key]


def recorded(lessons: Path | None = None) -> dict[str, str]:
    """The digests recorded for the package and ``lessons`` (each recorded on first use, then kept)."""
    package = _folder(PACKAGE_DIR, ("*.py",))
    return {**package, **_folder(lessons, LESSON_PATTERNS)} if lessons is not None else dict(package)


def _short(path: str, lessons: Path | None) -> str:
    for base in ([Path(lessons).resolve()] if lessons is not None else []) + [PACKAGE_DIR.parent]:
        try:
            return str(Path(path).relative_to(base))
        except ValueError:
            continue
    return path


def verify(lessons: Path) -> None:
    """Raise :class:`TamperedError` unless every recorded file is there, unchanged, and no new one appeared."""
    lessons = Path(lessons).resolve()
    want = recorded(lessons)
    now = {**record(PACKAGE_DIR, ("*.py",)), **record(lessons, LESSON_PATTERNS)}
    for path in sorted(set(want) | set(now)):
        if want.get(path) != now.get(path):
            what = "appeared" if path not in want else "is gone" if path not in now else "changed"
            raise TamperedError(f"refusing to check: {_short(path, lessons)} {what} since the checker recorded "
                                "its digest; restore it (or reinstall shapetrace) and run the check again")


def verified_text(path: Path, lessons: Path | None = None) -> str:
    """The text of a recorded file, read once and checked against its digest (what runs is what was checked)."""
    real = str(Path(path).resolve())
    want = recorded(lessons).get(real)
    data = Path(real).read_bytes()
    if want is None or sha256(data) != want:
        raise TamperedError(f"refusing to check: {_short(real, lessons)} "
                            f"{'is not a recorded file' if want is None else 'changed'} since the checker "
                            "recorded its digest; restore it (or reinstall shapetrace) and run the check again")
    return data.decode("utf-8")
