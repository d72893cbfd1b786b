"""Answers typed or piped in, read with a bound: ``/dev/zero`` must not fill memory (no Rich, no torch).

>>> import io
>>> read_line(io.StringIO("2x6\\nrest"))
'2x6\\n'
>>> read_line(io.StringIO("9" * 5000))
Traceback (most recent call last):
...
shapetrace.errors.UsageError: an answer line is longer than 4096 characters
"""

from __future__ import annotations

import os
import stat
from typing import TextIO

from shapetrace.errors import UsageError

#: The longest answer line and the largest answers file shapetrace reads.
MAX_LINE = 4096
MAX_FILE = 1 << 20


def read_line(stream: TextIO) -> str:
    """One line from ``stream`` (``""`` at the end), at most MAX_LINE characters; a UsageError beyond."""
    try:
        line = stream.readline(MAX_LINE + 1)
    except UnicodeDecodeError:
        raise UsageError("the answers are not UTF-8 text") from None
    except OSError as exc:
        raise UsageError(f"cannot read the answers ({exc.strerror or exc})") from None
    if len(line) > MAX_LINE:
        raise UsageError(f"an answer line is longer than {MAX_LINE} characters")
    return line


def read_answers(path: str | os.PathLike, flag: str) -> list[str]:
    """The lines of an answers file, read with a bound, or one clear UsageError (missing, a folder,
    too large, not UTF-8)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise UsageError(f"{flag} {path}: no such file")
    if os.path.isdir(path):
        raise UsageError(f"{flag} {path} is a folder; give a file with one answer per line")
    data = read_capped(path, MAX_FILE, flag, "not an answers file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UsageError(f"{flag} {path}:{line}: not UTF-8 text; save it as UTF-8") from None
    lines = text.splitlines()
    if any(len(line) > MAX_LINE for line in lines):
        raise UsageError(f"{flag} {path}: a line is longer than {MAX_LINE} characters")
    return lines


#: What a path is when it is not a regular file (``stat.S_IFMT``), for the one-line refusal.
_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def check_regular(path: str, what: str) -> None:
    """A UsageError unless ``path`` is a regular file: a FIFO would block the read forever and a
    device never ends (``/dev/zero``)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # missing or unreadable: open() says so in its own words
    if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
        return
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    raise UsageError(f"{what} {path} is {kind}, not a regular file: give a file")


def read_capped(path: str, limit: int, what: str, not_what: str = "not a file shapetrace reads") -> bytes:
    """At most ``limit`` bytes of a regular file, or one clear UsageError (FIFOs and devices refused)."""
    check_regular(path, what)
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except IsADirectoryError:
        raise UsageError(f"{what} {path} is a folder; give a file") from None
    except OSError as exc:
        raise UsageError(f"{what} {path}: cannot read it ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise UsageError(f"{what} {path} is larger than {limit >> 20} MiB: {not_what}")
    return data
