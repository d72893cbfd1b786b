"""Grade a class: every student's exercise files, each checked in the sandbox, a few at a time (no torch here).

``SUBMISSIONS/`` holds one folder per student; in it, one file per exercise, named as ``exercise start``
names it (``split_heads.py``) or by the exercise's id (``split-heads.py``). Each file is checked exactly
as ``exercise check`` checks it (:func:`shapetrace.exercises.checker.check_job`), in its own sandboxed
child; a student's crash, hang, memory bomb or attack ends in their own cell. A file the grader will
not hand to the checker (a symlink, a FIFO or device, a folder, over :data:`MAX_FILE_BYTES`) is
``refused`` without being opened: a symlink could point at the teacher's own files.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from shapetrace.errors import UsageError

MAX_FILE_BYTES = 256 << 10
#: Cell statuses, in the order a summary counts them.
STATUSES = ("pass", "fail", "timed out", "refused", "unverified", "missing")


@dataclass
class Cell:
    """One student's result for one exercise (plain data; ``to_dict`` is a row of ``--json``/``--csv``)."""

    student: str
    exercise: str
    status: str
    verdict: str = ""
    summary: str = ""
    file: str = ""

    @property
    def first_line(self) -> str:
        return self.summary.splitlines()[0] if self.summary else ""

    def to_dict(self) -> dict:
        return dict(student=self.student, exercise=self.exercise, status=self.status, verdict=self.verdict,
                    summary=self.first_line, file=self.file)


def _exercise_of(name: str, ids: set[str]) -> str | None:
    stem = name[:-3] if name.endswith(".py") else None
    if stem is None:
        return None
    for candidate in (stem, stem.replace("_", "-")):
        if candidate in ids:
            return candidate
    return None


def find_submissions(root: Path, ids: list[str]) -> tuple[list[str], list[tuple[str, str, Path]]]:
    """``(students, [(student, exercise, file)])`` under ``root``; files of no exercise are ignored."""
    if not root.is_dir():
        raise UsageError(f"{root} is not a folder of submissions (one folder per student)")
    known, students, found = set(ids), [], []
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        students.append(entry.name)
        for item in sorted(os.scandir(entry.path), key=lambda e: e.name):
            exercise = _exercise_of(item.name, known)
            if exercise is not None:
                found.append((entry.name, exercise, Path(item.path)))
    if not students:
        raise UsageError(f"{root} holds no student folders")
    return students, found


def refusal(path: Path) -> str:
    """Why the grader will not check ``path`` ('' when it will); decided from ``lstat``, never opening it."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"cannot read it: {exc.strerror}"
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link (the grader checks only a student's own files)"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_size > MAX_FILE_BYTES:
        return f"{st.st_size} bytes (the grader takes up to {MAX_FILE_BYTES})"
    return ""


def _status(verdict: dict) -> str:
    name = verdict.get("verdict")
    if name == "pass":
        return "pass"
    if name == "timeout":
        return "timed out"
    if name == "unverified":
        return "unverified"
    return "fail"


def grade_one(student: str, exercise: str, path: Path, check: Callable[[str, Path], dict]) -> Cell:
    """One cell; nothing a student's file does escapes it (every error becomes the cell's status)."""
    why = refusal(path)
    if why:
        return Cell(student, exercise, "refused", summary=f"refused: {why}", file=str(path))
    from shapetrace.exercises.digests import TamperedError

    try:
        verdict = check(exercise, path)
    except TamperedError:  # the checker's own files changed: no cell can be trusted, the grading stops
        raise
    except Exception as exc:  # the checker could not run this file: the cell says so, the class goes on
        return Cell(student, exercise, "refused", summary=f"not checked: {str(exc).splitlines()[0][:200]}",
                    file=str(path))
    return Cell(student, exercise, _status(verdict), verdict=str(verdict.get("verdict", "")),
                summary=str(verdict.get("summary", "")), file=str(path))


def default_workers() -> int:
    """Children at once: one per two cores (each child runs one thread), at least one."""
    return max(1, (os.cpu_count() or 2) // 2)


def grade(root: Path, lessons: Path, time_limit: float, memory_mb: int, workers: int | None = None,
          on_done: Callable[[Cell, int, int], None] | None = None) -> list[Cell]:
    """Every cell of the class, students in name order and exercises in curriculum order.

    Raises :class:`~shapetrace.exercises.digests.TamperedError` (and checks nothing more) when the
    checker's own files change during the grading.

    ``on_done(cell, done, total)`` is called once per finished cell (a progress bar). A student with no
    file for an exercise that someone in the class submitted gets a ``missing`` cell.
    """
    from shapetrace.exercises.checker import Job, check_job
    from shapetrace.exercises.content import load

    ids = [e.id for e in load(lessons).exercises]
    students, found = find_submissions(root, ids)

    def check(exercise: str, path: Path) -> dict:
        return check_job(Job(exercise, str(path.absolute())), lessons, time_limit=time_limit, memory_mb=memory_mb)

    from shapetrace.exercises.recovery import Watch, settle

    watch = Watch(check)  # a check that breaks the sandbox: named, and the cells it cost checked again
    cells: dict[tuple[str, str], Cell] = {}
    pool = ThreadPoolExecutor(max_workers=workers or default_workers())
    try:
        futures = [pool.submit(grade_one, s, e, p, watch) for s, e, p in found]
        for future in as_completed(futures):
            cell = future.result()
            cells[cell.student, cell.exercise] = cell
            if on_done is not None:
                on_done(cell, len(cells), len(futures))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # after a refusal, the files not started never start
    cells = settle(watch, cells, lambda s, e, p: grade_one(s, e, p, watch))
    used = [e for e in ids if any(k[1] == e for k in cells)]
    return [cells.get((s, e)) or Cell(s, e, "missing") for s in students for e in used]


def csv_text(cells: list[Cell]) -> str:
    """The cells as CSV, one row per student and exercise."""
    import csv

    buf = io.StringIO()
    fields = ["student", "exercise", "status", "verdict", "summary", "file"]
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for cell in cells:
        writer.writerow(cell.to_dict())
    return buf.getvalue()
