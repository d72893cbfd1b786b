"""Run a user's script as ``__main__`` under the tracer (what ``shapetrace trace`` does).

Like ``python -m cProfile script.py``: ``sys.argv`` is the script and its arguments,
the script's folder is first on ``sys.path``, and the code runs through :mod:`runpy`.
Returns plain data (a :class:`ScriptRun`); the CLI renders it. No Rich here.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from shapetrace.app.textinput import read_capped
from shapetrace.errors import RunError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.tracer import Event, Trace


@dataclass
class Filters:
    """Which recorded ops to show: under a function (``only``), in files (``include``/``exclude``)."""

    only: Sequence[str] = ()
    include: Sequence[str] = ()
    exclude: Sequence[str] = ()

    def keep(self, event: Event) -> bool:
        if event.source == "?" or not event.source:
            return False
        path = event.source.rsplit(":", 1)[0]
        if self.only and not any(_in_stack(q, event.stack) or _in_module(q, event.module) for q in self.only):
            return False
        if self.include and not any(_path_matches(path, p) for p in self.include):
            return False
        return not any(_path_matches(path, p) for p in self.exclude)


def _in_stack(qualname: str, stack: Sequence[str]) -> bool:
    return any(s == qualname or s.endswith("." + qualname) for s in stack)


def _in_module(path: str, module: str) -> bool:
    """``h.3.attn`` keeps ops run in that module and in its children (``h.3.attn.c_attn``)."""
    return bool(module) and (module == path or module.startswith(path + "."))


def check_only(events: Sequence[Event], only: Sequence[str]) -> None:
    """Raise a :class:`UsageError` for an ``--only`` value no recorded op ran under (a typo, a layer that
    does not exist), naming the nearest module paths and functions."""
    for query in only:
        if not any(_in_stack(query, e.stack) or _in_module(query, e.module) for e in events):
            raise UsageError(f"--only {query}: no recorded op ran in a module or function of that name; "
                             + _nearest(query, events))


def _nearest(query: str, events: Sequence[Event]) -> str:
    """``nearest: layers.11.attn, layers.1.attn, layers.10.attn`` (module paths, with their parents, and
    the functions the ops ran under); the first module paths when nothing is close."""
    import difflib

    paths: dict[str, None] = {}
    for e in events:
        parts = e.module.split(".") if e.module else []
        paths.update((".".join(parts[:i]), None) for i in range(1, len(parts) + 1))
    functions = {s: None for e in events for s in e.stack if not s.startswith("<")}
    close = difflib.get_close_matches(query, [*paths, *functions], n=3, cutoff=0.6)
    if close:
        return "nearest: " + ", ".join(close)
    tops = [p for p in paths if "." not in p][:3] or list(functions)[:3]
    return ("some that exist: " + ", ".join(tops)) if tops else "no op ran inside a module or function"


def _path_matches(path: str, pattern: str) -> bool:
    """``attn.py`` matches ``models/attn.py``; a folder matches every file under it."""
    import fnmatch

    path, pattern = os.path.normpath(path), os.path.normpath(pattern)
    absolute = os.path.abspath(path)
    if fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(absolute, os.path.abspath(pattern)):
        return True
    for candidate in (path, absolute):
        if (os.sep + pattern.strip(os.sep) + os.sep) in (os.sep + candidate):
            return True
        if candidate == pattern or candidate.endswith(os.sep + pattern) \
                or candidate.startswith(pattern.rstrip(os.sep) + os.sep) \
                or candidate.startswith(os.path.abspath(pattern) + os.sep):
            return True
    return False


@dataclass
class ScriptRun:
    """The outcome of one traced script: its trace (filtered), and how it ended."""

    script: str
    trace: Trace
    exception: BaseException | None = None
    failed: Event | None = None
    hidden: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.exception is None

    @property
    def interrupted(self) -> bool:
        """True when Ctrl-C stopped the script: the trace holds the ops recorded before it."""
        return isinstance(self.exception, KeyboardInterrupt)


#: The largest script shapetrace reads (``/dev/zero`` must not fill memory).
MAX_SCRIPT_BYTES = 8 << 20


def check_script(path: str) -> str:
    """The script's source, or one clear error (missing file, folder, too large, not UTF-8, NUL bytes,
    syntax error). Python's own rules: a UTF-8 BOM is fine."""
    if not os.path.exists(path):
        raise UsageError(f"no such script: {path}")
    if os.path.isdir(path):
        raise UsageError(f"{path} is a folder; give a Python file (shapetrace trace path/to/script.py)")
    data = read_capped(path, MAX_SCRIPT_BYTES, "script")
    if b"\0" in data:
        line = data[: data.index(b"\0")].count(b"\n") + 1
        raise UsageError(f"{path}:{line}: a NUL byte: this is not a Python source file")
    try:
        source = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UsageError(f"{path}:{line}: not UTF-8 text (byte {data[exc.start]:#04x}); save it as UTF-8") from None
    try:
        compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise RunError(f"{path}:{exc.lineno or '?'}: syntax error: {exc.msg} (nothing was traced)") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise RunError(f"{path}: Python cannot compile it ({type(exc).__name__}: {exc}); nothing was traced") from None
    return source


@contextlib.contextmanager
def script_environment(path: str, args: Sequence[str], stdout_to_stderr: bool) -> Iterator[list[int]]:
    """``sys.argv``, ``sys.path[0]`` and (for ``--json``) stdout as a script run would see them.

    Yields a one-item list counting the threads the script starts: the tracer records the thread
    that runs the script, so ops in other threads are missing and the table must say so.
    """
    import threading

    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    redirect = contextlib.redirect_stdout(sys.stderr) if stdout_to_stderr else contextlib.nullcontext()
    started = [0]
    start = threading.Thread.start

    def counting_start(thread, *a, **kw):
        started[0] += 1
        return start(thread, *a, **kw)

    threading.Thread.start = counting_start
    saved_streams = _save_streams()
    try:
        with redirect:
            yield started
    finally:
        threading.Thread.start = start
        sys.argv[:], sys.path[:] = saved_argv, saved_path
        _restore_streams(*saved_streams)


def _save_streams() -> tuple:
    """A duplicate of file descriptors 1 and 2 and the stream objects, so a script that closes stdout
    (``sys.stdout.close()``, ``os.close(1)``) still leaves shapetrace a place to print the table."""
    fds = []
    for fd in (1, 2):
        try:
            fds.append(os.dup(fd))
        except OSError:
            fds.append(None)
    return fds, sys.stdout, sys.stderr


def _restore_streams(fds: list, stdout, stderr) -> None:
    import io

    for fd, saved in zip((1, 2), fds):
        if saved is None:
            continue
        try:
            os.fstat(fd)
        except OSError:
            os.dup2(saved, fd)  # the script closed the descriptor: put it back
        for name, original in (("stdout", stdout), ("stderr", stderr)):
            stream = getattr(sys, name)
            if (name == "stdout") == (fd == 1) and (stream is not original or original.closed):
                if original.closed:
                    original = io.TextIOWrapper(io.FileIO(os.dup(saved), "w"), encoding="utf-8",
                                                errors="replace", line_buffering=True)
                setattr(sys, name, original)
        os.close(saved)


def _exec(path: str) -> None:
    runpy.run_path(path, run_name="__main__")


def run_script(path: str, args: Sequence[str] = (), dims: dict[str, int] | None = None,
               device: str = "cpu", filters: Filters | None = None,
               stdout_to_stderr: bool = False) -> ScriptRun:
    """Trace ``path`` run as ``__main__``; exceptions in the script are kept, not raised."""
    import torch

    from shapetrace.engine import tracer as tr
    from shapetrace.engine.sites import STACK_ROOTS

    check_script(path)
    STACK_ROOTS.add(_exec.__code__)
    trace = tr.Trace(dims)
    exception: BaseException | None = None
    with script_environment(path, args, stdout_to_stderr) as threads:
        try:
            with trace, _default_device(device, torch):
                _exec(path)
        except SystemExit as exc:
            if exc.code not in (None, 0):
                exception = exc
        except BaseException as exc:  # the script's own failure of any class, or Ctrl-C: shown with the table
            exception = exc
        finally:
            _flush()
    run = _finish(path, trace, exception, filters or Filters())
    if threads[0]:
        run.notes.append(f"the script started {threads[0]} thread{'s' if threads[0] != 1 else ''}: shapetrace "
                         "records the thread that runs the script, so ops run in other threads are not in the table")
    return run


def _flush() -> None:
    with contextlib.suppress(OSError, ValueError):  # a script may close stdout
        sys.stdout.flush()


@contextlib.contextmanager
def _default_device(device: str, torch) -> Iterator[None]:
    if device not in ("meta", "cuda"):
        yield
        return
    torch.set_default_device(device)
    try:
        yield
    finally:
        torch.set_default_device(None)


def _finish(path: str, trace: Trace, exception: BaseException | None, filters: Filters) -> ScriptRun:
    if exception is None and filters.only:
        check_only(trace.events, filters.only)
    failed_at = next((e.index for e in trace.events if e.error), None) if exception else None
    kept = [e for e in trace.events if filters.keep(e) or e.index == failed_at]
    shown = filtered(trace, kept)
    failed = next((e for e in shown.events if e.error), None)
    run = ScriptRun(script=path, trace=shown, exception=exception, failed=failed,
                    hidden=len(trace.events) - len(kept))
    if not trace.events and exception is None:
        raise RunError(f"{path} ran to the end without a tensor op that shapetrace records (view, reshape, "
                       "transpose, matmul, linear, softmax...): nothing to show (is the model called?)")
    return run


def filtered(trace: Trace, events: Sequence[Event]) -> Trace:
    """A copy of ``trace`` holding only ``events``, renumbered from 0 (diagnostics follow); ``trace`` itself
    when ``events`` are all of its events."""
    from shapetrace.engine.tracer import Trace

    if len(events) == len(trace.events) and all(a is b for a, b in zip(events, trace.events)):
        return trace  # nothing hidden: the same events, already numbered from 0
    out = Trace.__new__(Trace)
    out.__dict__.update(trace.__dict__)
    out.events = [replace(e, index=i) for i, e in enumerate(events)]
    out._diagnostics = None
    return out


def script_header(path: str, dims: dict[str, int], note: str | None = None) -> list[str]:
    """The header lines: script, named sizes and what was derived from them."""
    from shapetrace.engine.axes import Namer

    sizes = " ".join(f"{k}={v}" for k, v in dims.items())
    lines = [f"shapetrace · {os.path.basename(path)}" + (f" · {sizes}" if sizes else "")]
    derived = {k: v for k, v in Namer(dict(dims)).dims.items() if k not in dims and k not in ("qkv", "kv")}
    if "d_k" in derived and "D" in dims and "H" in dims:
        lines.append(f"d_k = D / H = {dims['D']} / {dims['H']} = {derived['d_k']}")
    elif not dims:
        lines.append("no --dims given: axes show sizes only (name them with --dims B=2,T=6,D=512,H=8 "
                     "or shapetrace.name(x, \"B T D\"))")
    if note:
        lines.append(note)
    return lines
