"""A grade that outlives a check which damages the sandbox (no torch).

Every check of a grade is forked from one fork server (:mod:`.forks`). Each check has namespaces and
mounts of its own, and the seccomp filter refuses what could change a file's mode, owner, timestamps or
extended attributes, so no known check can damage the server; if one ever does, it costs every later
check of the grade ("not checked"). So after each cell the grade asks the server to set up a check
(:func:`.sandbox.server_problem`: the same namespaces and fresh mounts, no learner code); a server that
cannot is stopped and a new one starts for the next check. At the end:

* the files checked since the server was last found sound are checked again, one at a time, on a fresh
  server asked again after each: the one after which it breaks is named, and its cell is refused;
* every cell that was not checked is checked again, once.

:func:`unchecked` says which cells are still not checked: the grade's exit code is not 0 while any is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

#: The start of a cell's summary when the checker could not check its file.
NOT_CHECKED = "not checked:"


class Watch:
    """Wraps a grade's ``check(exercise, path)``: asks the server after each check whether it still
    sets a check up, and keeps the files that ran while it broke."""

    def __init__(self, check: Callable[[str, Path], dict], problem: Callable[[], str] | None = None):
        from shapetrace.exercises.sandbox import server_problem

        self.check, self.problem = check, problem or server_problem
        self.lock = threading.Lock()
        self.running: set[str] = set()
        self.since_sound: list[str] = []  # files that ran since the server was last found sound
        self.suspects: list[list[str]] = []  # one list per time the server was found broken
        self.why: dict[str, str] = {}

    def __call__(self, exercise: str, path: Path) -> dict:
        with self.lock:
            self.running.add(str(path))
        try:
            return self.check(exercise, path)
        finally:
            self._after(str(path))

    def _after(self, path: str) -> None:
        with self.lock:
            self.running.discard(path)
            self.since_sound.append(path)
            problem = self.problem()
            if problem:
                suspects = list(dict.fromkeys(self.since_sound + sorted(self.running)))
                self.suspects.append(suspects)
                for file in suspects:
                    self.why.setdefault(file, problem)
            self.since_sound = []  # each file that finished before a sound answer is cleared

    def culprits(self, exercise_of: dict[str, str]) -> dict[str, str]:
        """``{file: why}``: for each time the server broke, the file after whose check (alone, on a fresh
        server) it breaks again; where none does alone, every suspect is named."""
        found: dict[str, str] = {}
        for suspects in self.suspects:
            if len(suspects) == 1:
                found[suspects[0]] = self.why[suspects[0]]
                continue
            alone = []
            for file in suspects:
                try:
                    self.check(exercise_of[file], Path(file))
                except Exception:
                    pass
                problem = self.problem()
                if problem:
                    alone.append(file)
                    self.why[file] = problem
            for file in alone or suspects:
                found[file] = self.why[file]
        return found


def unchecked(cells) -> list:
    """The cells whose file the checker could not check."""
    return [c for c in cells if c.status == "refused" and c.summary.startswith(NOT_CHECKED)]


def settle(watch: Watch, cells: dict, again: Callable[[str, str, Path], object]) -> dict:
    """After a grade whose server broke: name the files that broke it (their cells refused), and check
    once more every cell that was not checked. ``cells``: ``{(student, exercise): Cell}``; ``again``
    grades one cell. Returns the cells, mended."""
    if not watch.suspects:
        return cells
    exercise_of = {c.file: c.exercise for c in cells.values()}
    culprits = watch.culprits(exercise_of)
    for key, cell in list(cells.items()):
        if cell.file in culprits:
            cells[key] = type(cell)(cell.student, cell.exercise, "refused", summary=(
                f"refused: this file damaged the checker's sandbox ({culprits[cell.file][:160]}); the sandbox "
                "was replaced and the files it cost were checked again"), file=cell.file)
    for key, cell in list(cells.items()):
        if cell.file not in culprits and cell in unchecked([cell]):
            cells[key] = again(cell.student, cell.exercise, Path(cell.file))
    return cells
