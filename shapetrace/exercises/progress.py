"""The learner's progress and workspace (plain JSON; no torch, no Rich).

Progress lives in ``$SHAPETRACE_STATE_DIR`` or the platform's user state
directory, in ``progress.json``. Every write goes to a temporary file that
then replaces the old one (``os.replace``), so a killed process leaves either
the old file or the new one, never half of one. A file that cannot be read
is moved aside with a warning; it never stops the learner.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from shapetrace.errors import UsageError

VERSION = 1
DEFAULT_WORKSPACE = "shapetrace-exercises"


def state_dir() -> Path:
    env = os.environ.get("SHAPETRACE_STATE_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_state_dir("shapetrace", appauthor=False))


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


class Progress:
    """Passed exercises (with the hash of the passing file), attempts, hint levels, quiz scores."""

    def __init__(self, path: Path, data: dict[str, Any] | None = None, warnings: list[str] | None = None):
        self.path = path
        self.data = data or {"version": VERSION, "exercises": {}, "quiz": []}
        self.warnings = warnings or []

    @classmethod
    def load(cls, directory: Path | None = None) -> Progress:
        path = Path(directory or state_dir()) / "progress.json"
        if not path.exists():
            return cls(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            _validate(data)
            return cls(path, data)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            return cls(path, warnings=[_set_aside(path, exc)])

    def save(self) -> None:
        atomic_write(self.path, json.dumps(self.data, indent=2, sort_keys=True))

    # -- exercises ---------------------------------------------------------------
    def entry(self, exercise_id: str) -> dict[str, Any]:
        return self.data["exercises"].setdefault(exercise_id, {})

    def record_check(self, exercise_id: str, verdict: str, file: Path) -> None:
        e = self.entry(exercise_id)
        e["attempts"] = int(e.get("attempts", 0)) + 1
        e["last_verdict"] = verdict
        if verdict == "pass":
            e["passed_hash"] = file_hash(file)
            e["passed_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            e["ever_passed"] = True

    def ever_passed(self, exercise_id: str) -> bool:
        return bool(self.data["exercises"].get(exercise_id, {}).get("ever_passed"))

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


def _validate(data: Any) -> None:
    if not isinstance(data, dict) or not isinstance(data.get("exercises"), dict):
        raise ValueError("not a shapetrace progress file")
    if not all(isinstance(v, dict) for v in data["exercises"].values()):
        raise ValueError("malformed exercise entries")
    data.setdefault("quiz", [])
    data.setdefault("version", VERSION)


def _set_aside(path: Path, exc: BaseException) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    try:
        os.replace(path, aside)
        where = f"moved it to {aside}"
    except OSError as move_exc:
        where = f"could not move it aside ({move_exc.strerror}); it is left as it is"
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).splitlines()[0][:120]
    return f"progress file {path} could not be read ({reason}); {where} and started fresh"


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
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    shutil.copyfile(starter, tmp)
    os.replace(tmp, target)
    return target
