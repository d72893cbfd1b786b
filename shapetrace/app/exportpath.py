"""Where an ``--export`` goes: its format, its folder, and a write that never clobbers by accident.

No Rich and no torch, so every check runs before anything is traced (a missing folder is a usage
error in milliseconds, not after the whole trace has been printed).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from shapetrace.errors import UsageError

#: The formats an export can take: the static ones for slides and notes, and the interactive page.
FORMATS = (".svg", ".html", ".md", ".txt")


def export_format(path: str | Path) -> str:
    """The format of an export path from its suffix; a UsageError for anything else."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        shown = suffix or "no suffix"
        raise UsageError(f"--export {path}: unknown format ({shown}); use a path ending in "
                         f"{', '.join(FORMATS[:-1])} or {FORMATS[-1]}")
    return suffix


def check_export_path(path: str | Path, force: bool = False) -> Path:
    """Everything about an export path that can be checked before tracing: its format, its folder,
    and that it would not overwrite a file (or the target of a symbolic link) without ``force``."""
    path = Path(path)
    export_format(path)
    folder = path.parent
    if not folder.is_dir():
        raise UsageError(f"--export {path}: the folder {folder} does not exist")
    if path.is_dir() and not path.is_symlink():
        raise UsageError(f"--export {path}: that is a folder; give a file name")
    if os.path.lexists(path) and not force:
        what = "a symbolic link" if path.is_symlink() else "a file"
        raise UsageError(f"--export {path}: {what} with that name exists; add --force to replace it")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"--export {path}: cannot write in the folder {folder}")
    return path


def write_atomically(path: Path, text: str, force: bool = False) -> None:
    """Write to a temporary file in the same folder, then move it into place in one step.

    Without ``force`` the move refuses an existing name (``os.link`` fails on any existing entry,
    a symbolic link included); with it, ``os.replace`` swaps the entry itself, so a symbolic link is
    replaced by the file and whatever it pointed at is never written.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(tmp, 0o644)
        if force:
            os.replace(tmp, path)
            return
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise UsageError(f"--export {path}: a file with that name exists; add --force to replace it") from None
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


