"""The learner's progress and workspace (plain JSON; no torch, no Rich).

Progress lives in ``$SHAPETRACE_STATE_DIR`` or the platform's user state
directory, in ``progress.json``. Every write goes to a temporary file that
then replaces the old one (``os.replace``), so a killed process leaves either
the old file or the new one, never half of one. Every read-modify-write holds
a file lock (:meth:`Progress.update`), so concurrent commands never lose an
update. The file is validated on load: a bad entry is reset with a warning and
the rest kept; a file that cannot be read at all is moved aside (never over an
earlier copy). A state folder that cannot be used gives a warning; it never
stops the learner or hides a verdict.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from shapetrace.errors import UsageError

VERSION = 1
DEFAULT_WORKSPACE = "shapetrace-exercises"


def state_dir() -> Path:
    """``$SHAPETRACE_STATE_DIR``, else the user state folder under the home folder; a UsageError saying
    how to name one when there is no home folder to put it under (``HOME`` unset or relative, and no
    entry for the user in the password database: a container, a cron job)."""
    env = os.environ.get("SHAPETRACE_STATE_DIR")
    if env:
        return Path(env)
    import platformdirs

    try:
        return Path(platformdirs.user_state_dir("shapetrace", appauthor=False))
    except RuntimeError:   # (platformdirs: "could not determine the home directory")
        raise UsageError("no folder for your progress: HOME is not set to a folder (an absolute path); set "
                         "HOME, or SHAPETRACE_STATE_DIR=DIR, or give --state-dir DIR") from None


def file_hash(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


LOCK_TIMEOUT = 30.0
#: The largest progress file read: one holds a few hundred bytes per exercise and per quiz taken, so
#: a larger one is not shapetrace's (and would be read whole into memory).
MAX_BYTES = 16 << 20
#: How a warning ends that says why progress cannot be kept, and one that says why a save failed.
NOT_KEPT, NOT_SAVED = "; progress is not kept this time", "; this result is not recorded"


class Progress:
    """Passed exercises (with the hash of the passing file), attempts, hint levels, quiz scores."""

    def __init__(self, path: Path, data: dict[str, Any] | None = None, warnings: list[str] | None = None):
        self.path = path
        self.data = data or {"version": VERSION, "exercises": {}, "quiz": []}
        self.warnings = warnings or []
        self.saved = False   #: whether :meth:`update` saved it

    @classmethod
    def load(cls, directory: Path | None = None) -> Progress:
        path = Path(directory or state_dir()) / "progress.json"
        try:
            if not path.exists():
                return cls(path)
            if not path.is_file():
                return cls(path, warnings=[f"progress file {path} is not a file{NOT_KEPT}"])
            size = path.stat().st_size
            if size > MAX_BYTES:   # (read whole, 176 MB of it took 1.2 GB of memory)
                return cls(path, warnings=[f"progress file {path} is {size:,} bytes, more than a progress file "
                                           f"holds ({MAX_BYTES >> 20} MiB): it is left as it is (move it away to "
                                           f"start afresh){NOT_KEPT}"])
            raw = path.read_bytes()
        except OSError as exc:
            return cls(path, warnings=[f"progress file {path} could not be read ({exc.strerror}){NOT_KEPT}"])
        try:
            data = json.loads(raw.decode("utf-8"))
            if not isinstance(data, dict) or not isinstance(data.get("exercises"), dict):
                raise ValueError("not a shapetrace progress file")
        except RecursionError:  # e.g. 100,000 nested brackets: not a progress file either
            return cls(path, warnings=[_set_aside(path, ValueError("nested too deeply to be a progress file"))])
        except ValueError as exc:
            return cls(path, warnings=[_set_aside(path, exc)])
        warnings = _repair(data, path)
        return cls(path, data, warnings)

    @classmethod
    @contextlib.contextmanager
    def update(cls, directory: Path | None = None) -> Iterator[Progress]:
        """Load, let the caller change, and save, all under the file lock; problems become warnings."""
        path = Path(directory or state_dir()) / "progress.json"
        with _locked(path) as lock_warning:
            progress = cls.load(directory)
            if lock_warning:
                progress.warnings.append(lock_warning)
            yield progress
            progress.saved = progress.try_save()

    def save(self) -> None:
        atomic_write(self.path, json.dumps(self.data, indent=2, sort_keys=True))

    def try_save(self) -> bool:
        """Save, or add a warning saying why progress could not be kept (the learner carries on)."""
        if any(w.endswith(NOT_KEPT) for w in self.warnings):
            return False
        try:
            self.save()
            return True
        except OSError as exc:
            self.warnings.append(f"progress could not be saved in {self.path.parent} "
                                 f"({exc.strerror or exc}){NOT_SAVED}")
            return False

    # -- exercises ---------------------------------------------------------------
    def entry(self, exercise_id: str) -> dict[str, Any]:
        return self.data["exercises"].setdefault(exercise_id, {})

    def record_check(self, exercise_id: str, verdict: str, file: Path) -> None:
        e = self.entry(exercise_id)
        e["attempts"] = int(e.get("attempts", 0)) + 1
        e["last_verdict"] = verdict
        if verdict == "gave-up":
            e["gave_up"] = True
        if verdict == "pass":
            e["passed_hash"] = file_hash(file)
            e["passed_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            e["ever_passed"] = True

    def ever_passed(self, exercise_id: str) -> bool:
        return self.data["exercises"].get(exercise_id, {}).get("ever_passed") is True

    def status(self, exercise_id: str, file: Path | None) -> str:
        """``passed`` (this exact file passed), ``edited`` (passed, then changed), ``started`` or ``""``."""
        e = self.data["exercises"].get(exercise_id, {})
        exists = file is not None and file.is_file()
        if e.get("passed_hash"):
            if exists and file_hash(file) == e["passed_hash"]:
                return "passed"
            return "edited" if exists else "passed"
        return "started" if exists else ""

    def next_hint(self, exercise_id: str, total: int) -> int:
        """Advance and return the hint level (1-based, capped at ``total``)."""
        e = self.entry(exercise_id)
        e["hints"] = min(total, int(e.get("hints", 0)) + 1)
        return e["hints"]

    def reset(self, exercise_id: str | None = None) -> None:
        if exercise_id is None:
            self.data["exercises"] = {}
        else:
            self.data["exercises"].pop(exercise_id, None)

    # -- quiz ----------------------------------------------------------------------
    def record_quiz(self, score: int, total: int, topic: str | None) -> None:
        self.data.setdefault("quiz", []).append(
            {"score": score, "total": total, "topic": topic,
             "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[str]:
    """Hold ``progress.json.lock``; yields a warning instead when the folder cannot hold a lock."""
    from filelock import FileLock, Timeout

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(path) + ".lock", timeout=LOCK_TIMEOUT)
        lock.acquire()
    except Timeout:
        yield f"progress is locked by another shapetrace command (waited {LOCK_TIMEOUT:g} s); going on without"
        return
    except OSError as exc:
        yield f"progress folder {path.parent} cannot be used ({exc.strerror or exc}){NOT_KEPT}"
        return
    try:
        yield ""
    finally:
        lock.release()


#: Each field an exercise entry may hold, and the check its value must pass.
_FIELDS = {
    "attempts": lambda v: type(v) is int and v >= 0,
    "hints": lambda v: type(v) is int and v >= 0,
    "last_verdict": lambda v: isinstance(v, str),
    "passed_hash": lambda v: isinstance(v, str) and len(v) == 64 and all(c in "0123456789abcdef" for c in v),
    "passed_at": lambda v: isinstance(v, str),
    "ever_passed": lambda v: v is True or v is False,
    "gave_up": lambda v: v is True or v is False,
}


def _repair(data: dict, path: Path) -> list[str]:
    """Reset what is malformed, keep the rest; one warning per reset."""
    warnings = []
    for ex_id, entry in list(data["exercises"].items()):
        if not isinstance(entry, dict):
            data["exercises"][ex_id] = {}
            warnings.append(f"progress of {ex_id} in {path} was not a record ({type(entry).__name__}); reset it")
            continue
        for key, ok in _FIELDS.items():
            if key in entry and not ok(entry[key]):
                warnings.append(f"progress of {ex_id} in {path}: {key} = {entry[key]!r} is not valid; reset it")
                del entry[key]
    if not isinstance(data.get("quiz", []), list) or not all(isinstance(q, dict) for q in data.get("quiz", [])):
        warnings.append(f"quiz scores in {path} were malformed; reset them")
        data["quiz"] = []
    data.setdefault("quiz", [])
    data.setdefault("version", VERSION)
    return warnings


def _free_aside(path: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    return aside


def _set_aside(path: Path, exc: BaseException) -> str:
    aside = _free_aside(path)
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).splitlines()[0][:120]
    try:
        fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # never over an earlier copy
        with os.fdopen(fd, "wb") as fh:
            fh.write(path.read_bytes())
        os.unlink(path)
    except OSError as move_exc:
        return (f"progress file {path} could not be read ({reason}) nor moved aside ({move_exc.strerror}); "
                f"it is left as it is{NOT_KEPT}")
    return f"progress file {path} could not be read ({reason}); moved it to {aside} and started fresh"


# -- workspace -----------------------------------------------------------------------

def workspace_dir(workspace: str | Path | None) -> Path:
    return Path(workspace) if workspace else Path.cwd() / DEFAULT_WORKSPACE


def learner_file(workspace: str | Path | None, exercise_id: str) -> Path:
    return workspace_dir(workspace) / f"{exercise_id.replace('-', '_')}.py"


def start_file(starter: Path, workspace: str | Path | None, exercise_id: str, force: bool = False) -> Path:
    """Copy the starter into the workspace; an existing file is kept unless ``force``."""
    target = learner_file(workspace, exercise_id)
    if target.exists() and not force:
        raise UsageError(f"{target} already exists and may hold your work; edit it, or pass --force "
                         "to replace it with a fresh copy of the starter")
    if target.is_dir():   # (--force copied the starter beside it, then failed on "Is a directory")
        raise UsageError(f"{target} is a folder; --force replaces your file, never a folder: move the folder "
                         "away, then start again")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:   # (a fresh name: a file of the learner's called split_heads.py.tmp was overwritten)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:   # named by the file the learner asked for, not by the temporary one
        raise OSError(exc.errno, exc.strerror, str(target)) from None
    os.close(fd)
    try:
        shutil.copyfile(starter, tmp)
        umask = os.umask(0o022)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)   # (as a file the copy created: mkstemp's are 0600)
        os.replace(tmp, target)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    return target
