"""Grade a class: every student's exercise files, each checked in the sandbox, a few at a time (no torch here).

``SUBMISSIONS/`` holds one folder per student; in it, one file per exercise, named as ``exercise start``
names it (``split_heads.py``) or by the exercise's id (``split-heads.py``). Each file is checked exactly
as ``exercise check`` checks it (:func:`shapetrace.exercises.checker.check_job`), in its own sandboxed
child; a student's crash, hang, memory bomb or attack ends in their own cell. A file the grader will
not hand to the checker (a symlink, a FIFO or device, a folder, over :data:`MAX_FILE_BYTES`) is
``refused`` without being opened: a symlink could point at the teacher's own files.

What was assigned (``--exercises``) is what each student is graded on: one column each, a ``missing``
cell where nothing was handed in, and the score out of that. Every other file in a student's folder (and
one level of folders below it) is listed as not graded, with the exercise it most likely answers
(``SplitHeads.py``, ``split_heads.py.txt``, ``week1/split_heads.py``: did you mean split_heads.py?).
Names and verdicts are cleaned of control characters (:func:`.untrusted.clean`) before any table, CSV or
JSON, and a CSV cell a spreadsheet would run as a formula starts with an apostrophe.
"""

from __future__ import annotations

import csv
import difflib
import io
import os
import re
import stat
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from shapetrace.errors import CheckerRefused, UsageError
from shapetrace.exercises.untrusted import clean

MAX_FILE_BYTES = 256 << 10
#: Cell statuses, in the order a summary counts them.
STATUSES = ("pass", "fail", "timed out", "refused", "unverified", "missing")


@dataclass
class Cell:
    """One student's result for one exercise (plain data; ``to_dict`` is a row of ``--csv``/``--json``).

    Every string in it is already clean of control characters (:func:`.untrusted.clean`)."""

    student: str
    exercise: str
    status: str
    verdict: str = ""
    summary: str = ""
    file: str = ""
    explanation: list[str] = field(default_factory=list)

    @property
    def first_line(self) -> str:
        return self.summary.splitlines()[0] if self.summary else ""

    @property
    def detail(self) -> str:
        """The verdict's summary, never cut: one that ends in a colon goes on with the explanation lines
        it announces (``…asks for a view of the input (no data moved): x.contiguous() copied 2 KiB``)."""
        text = self.summary.strip()
        if text.endswith(":"):
            rest = [line.strip() for line in self.explanation if line.strip() and line.strip() != text]
            text = " ".join([text, *rest])
        return text

    def to_dict(self) -> dict:
        return dict(student=self.student, exercise=self.exercise, status=self.status, verdict=self.verdict,
                    summary=self.detail, file=self.file)


@dataclass
class Stray:
    """A file in a student's folder that is not graded, and why (``did you mean split_heads.py?``)."""

    file: str   # relative to the student's folder: ``SplitHeads.py``, ``week1/split_heads.py``
    why: str

    def to_dict(self) -> dict:
        return dict(file=self.file, why=self.why)


@dataclass
class Survey:
    """What a folder of submissions holds: the students (folder names, cleaned and unique), the files
    to grade ``(student, exercise, path)``, and per student the files found but not graded."""

    students: list[str]
    found: list[tuple[str, str, Path]]
    strays: dict[str, list[Stray]]


def file_name(exercise: str) -> str:
    """The name ``exercise start`` gives an exercise's file: ``split_heads.py``."""
    return exercise.replace("-", "_") + ".py"


def _exercise_of(name: str, ids: list[str]) -> str | None:
    """The exercise whose file ``name`` is exactly (``split_heads.py`` or the id, ``split-heads.py``)."""
    stem = name[:-3] if name.endswith(".py") else None
    if stem is None:
        return None
    for candidate in (stem, stem.replace("_", "-")):
        if candidate in ids:
            return candidate
    return None


def _words(name: str) -> str:
    """A file name as lower-case words joined by ``_``, every suffix and a copy's ``(1)`` dropped:
    ``SplitHeads.py`` and ``split-heads (1).py.txt`` both read ``split_heads``."""
    stem = name.rsplit("/", 1)[-1].split(".")[0]
    stem = re.sub(r"\s*\(\d+\)\s*$", "", stem)
    stem = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", stem)
    return re.sub(r"[^a-z0-9]+", "_", stem.lower()).strip("_")


def did_you_mean(name: str, ids: list[str]) -> str | None:
    """The exercise a misnamed file most likely answers: the same words (``SplitHeads.py``,
    ``split_heads.py.txt``), else a near spelling (``split_head.py``); None for anything else."""
    words, by_words = _words(name), {_words(file_name(e)): e for e in ids}
    if words in by_words:
        return by_words[words]
    close = difflib.get_close_matches(words, list(by_words), n=1, cutoff=0.8) if words else []
    return by_words[close[0]] if close else None


#: Files listed as not graded, per student (a folder of thousands of files is summed up after these).
MAX_STRAYS = 20


def _entries(folder: str) -> list[os.DirEntry]:
    try:
        return sorted((e for e in os.scandir(folder) if not e.name.startswith(".") and e.name != "__pycache__"),
                      key=lambda e: e.name)
    except OSError:
        return []


def _stray(shown: str, name: str, ids: list[str], assigned: list[str], nested: bool) -> Stray:
    exact = _exercise_of(name, ids)
    if exact is not None and not nested:
        return Stray(shown, f"not assigned ({exact} is not in --exercises)")
    guess = exact or did_you_mean(name, assigned) or did_you_mean(name, ids)
    if guess is None:
        return Stray(shown, "not an exercise file")
    unassigned = "" if guess in assigned else f" ({guess} is not in --exercises)"
    where = " (the grader reads the top of each student's folder)" if nested else ""
    return Stray(shown, f"did you mean {file_name(guess)}?{where}{unassigned}")


def _survey_student(folder: str, ids: list[str], assigned: list[str]) -> tuple[dict[str, Path], list[Stray]]:
    """One student's files to grade ``{exercise: path}``, and those found but not graded (one level of
    folders searched). Only the strays listed are read for the exercise they answer; the rest are counted
    (100,000 files in one folder took a minute of CPU when each was matched against every exercise)."""
    graded: dict[str, Path] = {}
    pending: list[tuple[str, str, bool, str]] = []  # (shown, name, nested, why: '' until read)
    for entry in _entries(folder):
        shown = clean(entry.name)
        exercise = _exercise_of(entry.name, ids)
        if exercise is not None and exercise in assigned and exercise not in graded:
            graded[exercise] = Path(entry.path)
        elif exercise is not None and exercise in graded:
            pending.append((shown, entry.name, False,
                            f"a second file for {exercise}: {clean(graded[exercise].name)} is graded"))
        elif entry.is_dir(follow_symlinks=False):
            pending += [(f"{shown}/{clean(inner.name)}", inner.name, True, "")
                        for inner in _entries(entry.path) if not inner.is_dir(follow_symlinks=False)]
        else:
            pending.append((shown, entry.name, False, ""))
    strays = [Stray(shown, why) if why else _stray(shown, name, ids, assigned, nested)
              for shown, name, nested, why in pending[:MAX_STRAYS]]
    if len(pending) > MAX_STRAYS:
        strays.append(Stray("…", f"and {len(pending) - MAX_STRAYS} more files"))
    return graded, strays


def _unique(name: str, taken: set[str]) -> str:
    shown, n = clean(name), 2
    out = shown
    while out in taken:
        out, n = f"{shown} ({n})", n + 1
    taken.add(out)
    return out


def survey(root: Path, ids: list[str], assigned: list[str] | None = None) -> Survey:
    """The students under ``root`` (one folder each), their files to grade for ``assigned`` (default:
    every exercise) and the files found but not graded; a UsageError for a folder with no students."""
    if not str(root) or not root.is_dir():
        raise UsageError(f"{clean(str(root)) or repr('')} is not a folder of submissions (one folder per student)")
    assigned = list(ids) if assigned is None else assigned
    students, found, strays, taken = [], [], {}, set()
    for entry in _entries(str(root)):
        if not entry.is_dir(follow_symlinks=False):
            continue
        student = _unique(entry.name, taken)
        students.append(student)
        graded, strays[student] = _survey_student(entry.path, ids, assigned)
        found += [(student, e, graded[e]) for e in ids if e in graded]
    if not students:
        raise UsageError(f"{clean(str(root))} holds no student folders (one folder per student, each with files "
                         "such as split_heads.py)")
    if not found and not any(strays.values()):
        raise UsageError(f"{clean(str(root))}: the student folders are empty")
    return Survey(students, found, strays)


def find_submissions(root: Path, ids: list[str]) -> tuple[list[str], list[tuple[str, str, Path]]]:
    """``(students, [(student, exercise, file)])`` under ``root``; files of no exercise are left out."""
    found = survey(root, ids)
    return found.students, found.found


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
    shown = clean(str(path))
    why = refusal(path)
    if why:
        return Cell(student, exercise, "refused", summary=f"refused: {why}", file=shown)
    from shapetrace.exercises.digests import TamperedError

    try:
        verdict = check(exercise, path)
    except (TamperedError, CheckerRefused):  # the checker's own files changed, or it runs nothing here: the
        raise                                # grading stops (no cell could be trusted, or checked)
    except Exception as exc:  # the checker could not run this file: the cell says so, the class goes on
        return Cell(student, exercise, "refused", summary=f"not checked: {clean(str(exc)).splitlines()[0][:200]}",
                    file=shown)
    explanation = verdict.get("explanation")
    return Cell(student, exercise, _status(verdict), verdict=str(verdict.get("verdict", "")),
                summary=str(verdict.get("summary", "")), file=shown,
                explanation=[str(x) for x in explanation] if isinstance(explanation, list) else [])


def default_workers() -> int:
    """Checks at once: one per two cores (each check is pinned to its own share, :mod:`.cpus`; its child
    runs one thread, a test's implementation process a second), at least one."""
    return max(1, (os.cpu_count() or 2) // 2)


@dataclass
class ClassGrade:
    """A graded class: every cell, the exercises graded (the columns: what was assigned, or, when nothing
    was, every exercise someone handed in), and the files found but not graded."""

    cells: list[Cell]
    exercises: list[str]
    assigned: bool
    students: list[str]
    strays: dict[str, list[Stray]]

    def row(self, student: str) -> list[Cell]:
        by = {(c.student, c.exercise): c for c in self.cells}
        return [by[student, e] for e in self.exercises]

    def passed(self, student: str) -> int:
        return sum(c.status == "pass" for c in self.row(student))

    def score(self, student: str) -> float:
        """Percent of the graded exercises passed (one decimal)."""
        return round(100 * self.passed(student) / len(self.exercises), 1) if self.exercises else 0.0

    def to_json(self) -> dict:
        students = [dict(student=s, passed=self.passed(s), out_of=len(self.exercises), score=self.score(s),
                         cells={c.exercise: c.status for c in self.row(s)},
                         not_graded=[x.to_dict() for x in self.strays.get(s, [])]) for s in self.students]
        return dict(assigned=self.exercises if self.assigned else None, exercises=self.exercises,
                    students=students, cells=[dict(c.to_dict(), explanation=c.explanation) for c in self.cells])


def parse_assigned(text: str, ids: list[str]) -> list[str]:
    """``--exercises split-heads,head_dim``: the ids, in the order given (``_`` or ``-``, a ``.py`` allowed);
    a UsageError naming an unknown one and the known ones."""
    wanted = [w.strip().removesuffix(".py").replace("_", "-") for w in text.split(",")]
    wanted = list(dict.fromkeys(w for w in wanted if w))
    if not wanted:
        raise UsageError("--exercises: give the ids of the exercises assigned, separated by commas "
                         "(split-heads,head-dim)")
    unknown = [w for w in wanted if w not in ids]
    if unknown:
        raise UsageError(f"--exercises: no exercise {clean(unknown[0])!r}; the exercises are {', '.join(ids)}")
    return wanted


def grade_class(root: Path, lessons: Path, time_limit: float, memory_mb: int, workers: int | None = None,
                on_done: Callable[[Cell, int, int], None] | None = None,
                exercises: list[str] | None = None) -> ClassGrade:
    """Grade every student's files for ``exercises`` (default: every exercise someone handed in).

    Raises :class:`~shapetrace.exercises.digests.TamperedError` (and checks nothing more) when the
    checker's own files change during the grading.

    ``on_done(cell, done, total)`` is called once per finished cell (a progress bar). A student with no
    file for a graded exercise gets a ``missing`` cell.
    """
    from shapetrace.exercises.checker import Job, check_job
    from shapetrace.exercises.content import load
    from shapetrace.exercises.cpus import Slots

    ids = [e.id for e in load(lessons).exercises]
    found = survey(root, ids, exercises)

    slots = Slots(workers or default_workers())  # each check on CPUs of its own: no classmate slows it

    def check(exercise: str, path: Path) -> dict:
        with slots.take() as cpus:
            # (a gradebook shows verdicts and summaries, never a traced table: the child renders none)
            job = Job(exercise, str(path.absolute()), cpus=cpus, tables=False)
            return check_job(job, lessons, time_limit=time_limit, memory_mb=memory_mb)

    from shapetrace.exercises.recovery import Watch, settle

    watch = Watch(check)  # a check that breaks the sandbox: named, and the cells it cost checked again
    cells: dict[tuple[str, str], Cell] = {}
    pool = ThreadPoolExecutor(max_workers=len(slots.sets))
    try:
        futures = [pool.submit(grade_one, s, e, p, watch) for s, e, p in found.found]
        for future in as_completed(futures):
            cell = future.result()
            cells[cell.student, cell.exercise] = cell
            if on_done is not None:
                on_done(cell, len(cells), len(futures))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # after a refusal, the files not started never start
    cells = settle(watch, cells, lambda s, e, p: grade_one(s, e, p, watch))
    graded = exercises if exercises is not None else [e for e in ids if any(k[1] == e for k in cells)]
    rows = [cells.get((s, e)) or Cell(s, e, "missing") for s in found.students for e in graded]
    return ClassGrade(rows, list(graded), exercises is not None, found.students, found.strays)


def grade(root: Path, lessons: Path, time_limit: float, memory_mb: int, workers: int | None = None,
          on_done: Callable[[Cell, int, int], None] | None = None, exercises: list[str] | None = None) -> list[Cell]:
    """Every cell of the class, students in name order and exercises in curriculum order (or as assigned)."""
    return grade_class(root, lessons, time_limit, memory_mb, workers, on_done, exercises).cells


#: A cell a spreadsheet would read as a formula (CSV injection): written with a leading apostrophe.
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _csv_field(value):
    return "'" + value if isinstance(value, str) and value.startswith(_FORMULA) else value


def _csv(rows: list[list]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerows([[_csv_field(v) for v in row] for row in rows])
    return buf.getvalue()


def csv_text(cells: list[Cell]) -> str:
    """The cells as CSV, the long form: one row per student and exercise, the verdict's summary whole."""
    fields = ["student", "exercise", "status", "verdict", "summary", "file"]
    return _csv([fields] + [[cell.to_dict()[f] for f in fields] for cell in cells])


def gradebook_text(result: ClassGrade) -> str:
    """The gradebook as CSV: one row per student, one column per graded exercise (its status; a fail
    with its verdict), then ``passed``, ``out_of`` and ``score`` (percent)."""
    def shown(cell: Cell) -> str:
        return f"fail ({cell.verdict})" if cell.status == "fail" and cell.verdict else cell.status

    rows = [["student", *result.exercises, "passed", "out_of", "score"]]
    for s in result.students:
        rows.append([s, *[shown(c) for c in result.row(s)], result.passed(s), len(result.exercises),
                     f"{result.score(s):g}"])
    return _csv(rows)
