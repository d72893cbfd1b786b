"""Where the user wrote a call: the first frame outside torch, einops, Python's library and shapetrace.

The tracer asks :func:`site` on every call, so it only collects what can change later: the code
objects of the user's frames (innermost first) and the line number. Everything a person reads
(``reference.py:41``, the line's text, the function's qualified name) is derived by :func:`resolve`
when an event is first read, once per distinct site.
"""

from __future__ import annotations

import functools
import linecache
import os
import sys
from typing import NamedTuple

import torch

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # shapetrace/
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
#: Files inside the package whose lines are model code a user should see.
MODEL_FILES = {os.path.join(_PKG_DIR, "attention", name) for name in ("reference.py", "variants.py", "broken.py")}
_STDLIB_DIR = os.path.dirname(os.path.abspath(os.__file__))
_SITE_DIRS = tuple(os.path.abspath(p) + os.sep for p in sys.path if p.endswith(("site-packages", "dist-packages")))
#: Code objects where the user's stack ends (the script runner's exec frame).
STACK_ROOTS: set = set()


class Site(NamedTuple):
    """A call site as recorded: the user's code objects (innermost first), the line, the cwd."""

    codes: tuple
    lineno: int
    cwd: str


#: id(code) -> (code, kind): 0 user code, 1 plumbing, 2 a stack root. The code object is kept, so
#: its id is never reused while the entry lives; one answer per code object, for the process.
_KIND: dict[int, tuple] = {}
USER, INTERNAL, ROOT = 0, 1, 2


def _kind(code) -> int:
    entry = _KIND.get(id(code))
    if entry is None:
        kind = ROOT if code in STACK_ROOTS else INTERNAL if is_internal(code.co_filename) else USER
        entry = _KIND[id(code)] = (code, kind)
    return entry[1]


def plumbing(code) -> bool:
    """Is this code object torch's, einops', Python's or shapetrace's own (not the user's)?"""
    return _kind(code) != USER


def site(depth: int) -> Site | None:
    """The call site ``depth`` frames above the caller, skipping internal frames; None when the
    stack holds no user code."""
    frame = sys._getframe(depth + 1)
    while frame is not None and _kind(frame.f_code) != USER:
        frame = None if _kind(frame.f_code) == ROOT else frame.f_back
    if frame is None:
        return None
    lineno = frame.f_lineno
    codes = []
    while frame is not None and (kind := _kind(frame.f_code)) != ROOT:
        if kind == USER:
            codes.append(frame.f_code)
        frame = frame.f_back
    return Site(tuple(codes), lineno, _cwd())


def resolve(where: Site | None) -> tuple[str, str, str, tuple[str, ...]]:
    """``(source, code, function, stack)``: ``reference.py:41``, the line's text, the innermost
    function's qualified name and every user function's, innermost first."""
    if where is None or not where.codes:
        return "?", "", "", ()
    return _resolve(where)


_RESOLVED: dict[tuple, tuple] = {}


def _resolve(where: Site) -> tuple[str, str, str, tuple[str, ...]]:
    key = (tuple(map(id, where.codes)), where.lineno, where.cwd)
    hit = _RESOLVED.get(key)   # the entry keeps its code objects alive, so no id in its key is reused
    if hit is None:
        first = where.codes[0]
        text = linecache.getline(first.co_filename, where.lineno).strip()
        stack = tuple(getattr(c, "co_qualname", c.co_name) for c in where.codes)
        hit = _RESOLVED[key] = (where.codes, f"{_display_path(first.co_filename, where.cwd)}:{where.lineno}", text,
                                stack[0], stack)
    return hit[1:]


_CWD: list[str] = []


def _cwd() -> str:
    """The working directory, read once per trace (:func:`remember_cwd`), not once per call."""
    return _CWD[-1] if _CWD else os.getcwd()


def remember_cwd() -> None:
    _CWD.append(os.getcwd())


def forget_cwd() -> None:
    if _CWD:
        _CWD.pop()


def is_internal(filename: str) -> bool:
    path = os.path.abspath(filename) if not filename.startswith("<") else filename
    return (path.startswith(_TORCH_DIR + os.sep) or f"{os.sep}einops{os.sep}" in path
            or (path.startswith(_PKG_DIR + os.sep) and path not in MODEL_FILES
                and f"{os.sep}lessons{os.sep}" not in path)
            or path.startswith("<frozen") or _is_stdlib(path))


def _is_stdlib(path: str) -> bool:
    """Python's own library (runpy, functools...) is plumbing; site-packages is user code."""
    return path.startswith(_STDLIB_DIR + os.sep) and not path.startswith(_SITE_DIRS) \
        and f"{os.sep}site-packages{os.sep}" not in path


@functools.lru_cache(maxsize=1024)
def _display_path(filename: str, cwd: str) -> str:
    path = os.path.abspath(filename) if not filename.startswith("<") else filename
    if path.startswith(_PKG_DIR + os.sep):
        return "shapetrace/" + os.path.relpath(path, _PKG_DIR).replace(os.sep, "/")
    if path.startswith(cwd + os.sep):
        return os.path.relpath(path, cwd)
    return path
