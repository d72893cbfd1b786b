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

from shapetrace.engine.sizes import SizeOf

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # shapetrace/
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
#: Files inside the package whose lines are model code a user should see.
MODEL_FILES = {os.path.join(_PKG_DIR, "attention", name) for name in ("reference.py", "variants.py", "broken.py",
                                                                         "decode.py", "vision.py", "broken_shapes.py")}
_STDLIB_DIR = os.path.dirname(os.path.abspath(os.__file__))
_SITE_DIRS = tuple(os.path.abspath(p) + os.sep for p in sys.path if p.endswith(("site-packages", "dist-packages")))
#: Code objects where the user's stack ends (the script runner's exec frame).
STACK_ROOTS: set = set()


class Site(NamedTuple):
    """A call site as recorded: the user's code objects (innermost first), where the innermost one
    was (its bytecode offset, ``f_lasti``: reading ``f_lineno`` would decode the line table on every
    call; the line is found from the offset when the site is resolved), the cwd."""

    codes: tuple
    offset: int
    cwd: str


_new_site = tuple.__new__


#: id(code) -> kind: 0 user code, 1 plumbing, 2 a stack root; one answer per code object, for the
#: process. ``_KEPT`` holds every code object classified, so no id in ``_KIND`` is ever reused.
_KIND: dict[int, int] = {}
_KEPT: list = []
USER, INTERNAL, ROOT = 0, 1, 2
#: einops' own ``reduce``, which every einops call runs through: plumbing, and where its pattern is read.
EINOPS_REDUCE = 4


def _kind(code) -> int:
    kind = _KIND.get(id(code))
    return _classify(code) if kind is None else kind


def _classify(code) -> int:
    kind = ROOT if code in STACK_ROOTS else _internal_kind(code) if is_internal(code.co_filename) else USER
    _KEPT.append(code)
    _KIND[id(code)] = kind
    return kind


def _internal_kind(code) -> int:
    return EINOPS_REDUCE if code.co_name == "reduce" and f"{os.sep}einops{os.sep}" in code.co_filename \
        else INTERNAL


def plumbing(code) -> bool:
    """Is this code object torch's, einops', Python's or shapetrace's own (not the user's)?"""
    return _kind(code) != USER


#: For each module call running under a trace (innermost last): the user code objects above it and
#: the innermost one's line. A walk up the stack that reaches the tracer's module wrapper (a frame of
#: kind MODULE_CALL) takes the rest from here: the frames above a running module call cannot change
#: until it returns, so they are walked once per module call, not once per op, and no frame is held.
OUTER: list[tuple[tuple, int]] = []
MODULE_CALL = 3


def module_wrapper(code) -> None:
    """Mark ``code`` as the tracer's module wrapper, which pushes onto :data:`OUTER` while it runs."""
    _KEPT.append(code)
    _KIND[id(code)] = MODULE_CALL


def site(depth: int) -> Site | None:
    """The call site ``depth`` frames above the caller, skipping internal frames; None when the
    stack holds no user code."""
    codes, offset = user_stack(sys._getframe(depth + 1))
    if not codes:
        return None
    return _new_site(Site, (codes, offset, _CWD[-1] if _CWD else os.getcwd()))   # (Site(...) costs more)


def user_stack(frame) -> tuple[tuple, int]:
    """The user code objects from ``frame`` outwards (innermost first) and where the innermost one is
    (its ``f_lasti``); :func:`call_stack` without the einops frame."""
    codes, offset, _ = call_stack(frame)
    return codes, offset


def call_stack(frame) -> tuple[tuple, int, object]:
    """:func:`user_stack`, and the frame of einops' ``reduce`` below the user's first frame (the einops
    call running this op), None outside einops. It runs on every recorded call: one loop, no call per
    frame, and it stops at the innermost module call (:data:`OUTER`)."""
    known = _KIND.get
    codes = []
    offset = -1
    einops = None
    while frame is not None:
        code = frame.f_code
        kind = known(id(code))
        if kind is None:
            kind = _classify(code)
        if kind == USER:
            if not codes:
                offset = frame.f_lasti
            codes.append(code)
        elif kind == MODULE_CALL and OUTER:
            above, at = OUTER[-1]
            if not codes:
                offset = at
            codes.extend(above)
            break
        elif kind == ROOT:
            break
        elif kind == EINOPS_REDUCE and einops is None and not codes:
            einops = frame
        frame = frame.f_back
    return tuple(codes), offset, einops


def line_at(code, offset: int) -> int:
    """The source line of bytecode ``offset`` in ``code`` (what ``f_lineno`` says of a frame whose
    ``f_lasti`` is ``offset``); the nearest line before it where the offset itself has none."""
    line = code.co_firstlineno
    for start, end, at in code.co_lines():
        if at is not None and start <= offset:
            line = at
        if start <= offset < end:
            break
    return line


def resolve(where: Site | None) -> tuple[str, str, str, tuple[str, ...]]:
    """``(source, code, function, stack)``: ``reference.py:41``, the line's text, the innermost
    function's qualified name and every user function's, innermost first."""
    if where is None or not where.codes:
        return "?", "", "", ()
    return _resolve(where)


_RESOLVED: dict[tuple, tuple] = {}


def _resolve(where: Site) -> tuple[str, str, str, tuple[str, ...]]:
    key = (tuple(map(id, where.codes)), where.offset, where.cwd)
    hit = _RESOLVED.get(key)   # the entry keeps its code objects alive, so no id in its key is reused
    if hit is None:
        first = where.codes[0]
        lineno = line_at(first, where.offset)
        text = linecache.getline(first.co_filename, lineno).strip()
        stack = tuple(getattr(c, "co_qualname", c.co_name) for c in where.codes)
        hit = _RESOLVED[key] = (where.codes, f"{_display_path(first.co_filename, where.cwd)}:{lineno}", text,
                                stack[0], stack)
    return hit[1:]


_CWD: list[str] = []


def remember_cwd() -> None:
    """The start of a trace: the working directory is read once (:data:`_CWD`), not once per call."""
    _CWD.append(os.getcwd())


def forget_cwd() -> None:
    """The end of a trace: the working directory it read is let go."""
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


def einops_call(frame) -> tuple[int, list[list[str]] | None, list[list[str]] | None, tuple]:
    """(call id, output groups, input groups, read lengths) of the einops call whose ``reduce`` frame is ``frame``
    (``'b h n d'`` -> ``[[b], [h], [n], [d]]``), as :func:`call_stack` found it. The read lengths are the
    pattern's length arguments that are sizes read from an axis (``repeat=key.shape[1]``), as ``(letter, size)``:
    einops caches its recipe by value, so the ops it calls may be handed a plain int where the code passed a read
    size, and the frame is where the read size is still seen."""
    pattern = frame.f_locals.get("pattern")
    lengths = frame.f_locals.get("axes_lengths")
    read = tuple((k, v) for k, v in lengths.items() if type(v) is SizeOf) if isinstance(lengths, dict) else ()
    if not isinstance(pattern, str):
        return id(frame), None, None, read
    return id(frame), einops_groups(pattern), einops_groups(pattern, side=0), read


def einops_groups(pattern: str, side: int = 2) -> list[list[str]] | None:
    """The groups of a pattern's output (``side`` 2) or input (``side`` 0): ``'(j h) w'`` -> ``[[j, h], [w]]``."""
    right = pattern.partition("->")[side]
    if "..." in right:
        return None
    groups, current = [], None
    for token in right.replace("(", " ( ").replace(")", " ) ").split():
        if token == "(":
            current = []
        elif token == ")":
            groups.append(current or [])
            current = None
        elif current is not None:
            current.append(token)
        else:
            groups.append([token])
    return groups
