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


#: Room kept in a name for the temporary file written beside it (``.NAME.xxxxxxxx.tmp``).
TEMP_ROOM = 14


def check_name_lengths(flag: str, path: str | Path, room: int = 0) -> None:
    """A UsageError when a name in ``path`` is longer than the file system holds (``room`` bytes kept
    for a temporary name), or the whole path is."""
    text = os.fspath(path)
    limit = _name_max(text)
    for part in Path(text).parts:
        size = len(part.encode("utf-8", "surrogateescape"))
        if size + room > limit:
            short = part if len(part) <= 40 else part[:20] + "…" + part[-12:]
            raise UsageError(f"{flag}: the name {short} is {size} bytes long; names here go up to "
                             f"{limit - room} bytes")
    if len(text.encode("utf-8", "surrogateescape")) > 4000:
        raise UsageError(f"{flag}: the path is {len(text):,} characters long; paths go up to 4,000")


def _name_max(path: str) -> int:
    folder = os.path.dirname(os.path.abspath(path)) or "/"
    while not os.path.isdir(folder) and folder != os.path.dirname(folder):
        folder = os.path.dirname(folder)
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        return 255


def check_export_path(path: str | Path, force: bool = False) -> Path:
    """Everything about an export path that can be checked before tracing: its format, its folder,
    and that it would not overwrite a file (or the target of a symbolic link) without ``force``."""
    check_name_lengths("--export", path, TEMP_ROOM)
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


def write_atomically(path: Path, text: str, force: bool = False, flag: str = "--export") -> None:
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
            raise UsageError(f"{flag} {path}: a file with that name exists; add --force to replace it") from None
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


