"""What the terminal around shapetrace may be: any locale, any ``$COLUMNS``.

:func:`prepare_streams` runs once, before any output: standard output and error that cannot encode
shapetrace's symbols (``PYTHONIOENCODING=ascii``, a Latin-1 locale) write ASCII stand-ins instead
(``✓`` -> ``ok``, ``→`` -> ``->``, ``T·H`` -> ``T*H``) rather than end the command with a
``UnicodeEncodeError``; ``$COLUMNS`` and ``$LINES`` are held to the sizes ``--width`` accepts, since
Rich reads them as the terminal's size. A reader that goes away early (``shapetrace run | head -1``)
ends the command quietly with exit 0, as when the output fitted in the pipe before it closed: what is
left is written to the null device (see :func:`reader_gone`).
"""

from __future__ import annotations

import codecs
import errno
import os
import sys
import unicodedata

from shapetrace.app.classroom import MAX_WIDTH, MIN_WIDTH

#: The error handler's name, given to ``stream.reconfigure(errors=...)``.
HANDLER = "shapetrace-ascii"
#: The most rows a screen is drawn for (``$LINES`` above it is taken as this).
MAX_LINES = 1000

#: Stand-ins for the symbols shapetrace prints; a middle dot is handled apart (see :func:`_stand_in`).
ASCII = {
    "✓": "ok", "✗": "x", "→": "->", "←": "<-", "↓": "v", "↑": "^", "⏎": "Enter", "▶": ">", "▸": ">",
    "◀": "<", "─": "-", "━": "-", "│": "|", "┃": "|", "⋮": ":", "…": "...", "×": "x", "≠": "!=", "≤": "<=",
    "≥": ">=", "≈": "~", "▏": "|", "█": "#", "▓": "#", "▒": ":", "░": ".", "•": "*", "—": "--", "–": "-",
    "‘": "'", "’": "'", "“": '"', "”": '"', "·": "*", "⁻": "^-", "¹": "1", "²": "^2", "³": "^3",
    "√": "sqrt", "∞": "inf", "ℹ": "i", "⚠": "!", "\u00a0": " ",
}


def _stand_in(text: str, i: int) -> str:
    """ASCII for ``text[i]``: a spaced middle dot is a separator (``-``), an unspaced one a product
    (``*``); a letter with an accent loses the accent; anything else becomes ``?``."""
    ch = text[i]
    if ch == "·":
        spaced = (i == 0 or text[i - 1] in " \n") and (i + 1 == len(text) or text[i + 1] in " \n")
        return "-" if spaced else "*"
    if ch in ASCII:
        return ASCII[ch]
    plain = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode()
    return plain or "?"


def _ascii_errors(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    return "".join(_stand_in(exc.object, i) for i in range(exc.start, exc.end)), exc.end


codecs.register_error(HANDLER, _ascii_errors)


def can_encode(stream, sample: str = "✓✗→·─▶") -> bool:
    """Whether ``stream``'s encoding can write shapetrace's symbols."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        sample.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def ascii_fallback(stream) -> None:
    """Make ``stream`` write ASCII stand-ins for what its encoding cannot hold (no-op when it can)."""
    if stream is None or can_encode(stream):
        return
    try:
        stream.reconfigure(errors=HANDLER)
    except (AttributeError, ValueError, OSError):
        pass


def capped_size(value: str | None, low: int, high: int) -> str | None:
    """``$COLUMNS``/``$LINES`` held to ``low..high`` (a number); anything else is left for Rich to ignore."""
    if value is None or not value.strip().isdigit() or not value.strip().isascii():
        return value
    return str(min(max(int(value), low), high))


def reader_gone() -> None:
    """The reader of standard output or error closed its end: send the rest of both to the null device,
    so that nothing later (Rich's next print, the interpreter's last flush) meets the closed pipe again.
    (Python's own advice on SIGPIPE: https://docs.python.org/3/library/signal.html#note-on-sigpipe.)"""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (AttributeError, OSError, ValueError):   # (not a stream on a file descriptor)
            pass
    os.close(devnull)


#: What the system answers a write that can never succeed: the disk or the quota is full (``>/dev/full``),
#: the file is too large, the device failed.
REFUSED = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def output_refused(exc: BaseException) -> str | None:
    """The one-line error for a write to standard output that the system refused (``shapetrace run >
    /dev/full``), else None. Such an error names no file (every file shapetrace writes by name says which
    when it fails), and its output is lost whatever happens next: the rest goes to the null device, so
    the interpreter's last flush does not fail again."""
    if not isinstance(exc, OSError) or exc.filename is not None or exc.errno not in REFUSED:
        return None
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):
        pass
    os.close(devnull)
    return f"cannot write the output: {exc.strerror or os.strerror(exc.errno)}"


def _console_reader_gone(console) -> None:
    """Rich's hook for a broken pipe (its own ends the process with exit 1, as a failed run)."""
    console.quiet = True
    reader_gone()
    raise SystemExit(0)


def prepare_streams() -> None:
    """ASCII stand-ins on streams that need them; ``$COLUMNS`` and ``$LINES`` capped; a reader that
    closes the pipe early ends the command with exit 0. A closed standard output or error
    (``shapetrace lessons >&-``: Python sees None) writes nowhere."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115 - lives as long as sys
    for stream in (sys.stdout, sys.stderr):
        ascii_fallback(stream)
    from rich.console import Console

    Console.on_broken_pipe = _console_reader_gone   # (typer's help console too)
    for name, low, high in (("COLUMNS", MIN_WIDTH, MAX_WIDTH), ("LINES", 5, MAX_LINES)):
        value = capped_size(os.environ.get(name), low, high)
        if value is not None:
            os.environ[name] = value
