"""Run a user's script as ``__main__`` under the tracer (what ``shapetrace trace`` does).

Like ``python -m cProfile script.py``: ``sys.argv`` is the script and its arguments,
the script's folder is first on ``sys.path``, and the code runs through :mod:`runpy`.
Returns plain data (a :class:`ScriptRun`); the CLI renders it. No Rich here.
"""

from __future__ import annotations

import _thread
import contextlib
import fnmatch
import io
import os
import re
import runpy
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from shapetrace.app.textinput import read_capped
from shapetrace.errors import RunError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.diagnostic import Diagnostic
    from shapetrace.engine.events import Event
    from shapetrace.engine.report import Report
    from shapetrace.engine.tracer import Trace


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


def check_files(events: Sequence[Event], patterns: Sequence[str], flag: str = "--include") -> None:
    """Raise a :class:`UsageError` for an ``--include`` or ``--exclude`` value that no recorded op was written
    in (a typo, a file the model never runs: ``--exclude`` would leave every op shown without a word), naming
    the files the ops were written in, as ``--only`` does for names."""
    files = dict.fromkeys(e.source.rsplit(":", 1)[0] for e in events if e.source and e.source != "?")
    for pattern in patterns:
        if not any(_path_matches(path, pattern) for path in files):
            shown = ", ".join(os.path.basename(f) for f in list(files)[:3]) or "none"
            raise UsageError(f"{flag} {pattern}: no recorded op was written in a file or folder of that name; "
                             f"the ops were written in: {shown}")


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


@dataclass(frozen=True)
class Limits:
    """When a traced script's recording stops by itself: after ``max_ops`` recorded ops or ``seconds``
    of running (None: no limit). ``progress(ops, seconds)`` is called about every 0.1 s once the script
    has run for ``progress_after`` seconds (the CLI prints a live count on stderr)."""

    max_ops: int | None = None
    seconds: float | None = None
    progress: Callable[[int, float], None] | None = None
    progress_after: float = 2.0
    #: Called (from the watcher thread) with why the recording stopped and how many ops it holds when the
    #: script keeps running ``give_up_after`` seconds after the stop (it catches BaseException): the CLI
    #: ends the process there, so time and memory stay bounded.
    on_stuck: Callable[[str, int], None] | None = None
    give_up_after: float = 3.0


@dataclass
class ScriptRun:
    """The outcome of one traced script: its trace (filtered), and how it ended."""

    script: str
    trace: Trace
    exception: BaseException | None = None
    failed: Event | None = None
    hidden: int = 0
    notes: list[str] = field(default_factory=list)
    stopped: str | None = None  #: why the recording stopped before the script's end (a limit), else None
    #: True when a real Ctrl-C (SIGINT) or a SIGTERM (``timeout 30 shapetrace trace ...``) reached the script;
    #: a KeyboardInterrupt the script raised itself is its own outcome, reported like any other exception
    ctrl_c: bool = False
    by: str = "Ctrl-C"   #: which of the two stopped it: "Ctrl-C" or "SIGTERM"
    #: what the table shows above itself: {"lines": [...], "how_to_name": "..."} (the command fills it)
    header: dict[str, Any] = field(default_factory=dict)

    def report(self) -> Report:
        """The plain report the renderers and ``--json`` read: the trace's findings, this run's header,
        this run's exception (None where a limit or Ctrl-C stopped the recording or the script exited with
        code 0) and what stopped it before its end (the verdict is then ``?`` at best)."""
        report = self.trace.report(header=self.header)
        report.exception = None if self.interrupted else self.exception
        if self.interrupted:
            report.stopped = self.by
        elif self.stopped:
            report.stopped = self.stopped.split(":")[0]   # the limit: "--max-ops 50"
        return report

    @property
    def ok(self) -> bool:
        return self.exception is None

    @property
    def interrupted(self) -> bool:
        """True when Ctrl-C or SIGTERM stopped the script: the trace holds the ops recorded before it."""
        return isinstance(self.exception, KeyboardInterrupt) and self.ctrl_c

    @property
    def interrupted_exit(self) -> int:
        """The exit code of a run a signal stopped, as a shell reports it: 128 + the signal's number."""
        return 143 if self.by == "SIGTERM" else 130


#: The largest script shapetrace reads (``/dev/zero`` must not fill memory).
MAX_SCRIPT_BYTES = 8 << 20


def check_script(path: str) -> str:
    """The script's source, or one clear error (missing file, folder, too large, not UTF-8, NUL bytes,
    syntax error). Python's own rules: a UTF-8 BOM is fine."""
    if not path.strip() and not os.path.exists(path):   # ("no such script: " said nothing of what was wrong)
        raise UsageError(f"the script's name {path!r} is empty: give a Python file (shapetrace trace "
                         "path/to/script.py)")
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


def _exec(path: str) -> dict:
    return runpy.run_path(path, run_name="__main__")


class HardExit(BaseException):
    """The script called ``os._exit(code)`` in its own thread: the process would end on the spot, with
    no table. The call raises this instead, and the run reports it as the script's outcome."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code

    def __str__(self) -> str:
        return f"os._exit({self.code})"


@contextlib.contextmanager
def _script_endings() -> Iterator[list[bool]]:
    """While the script runs: a real Ctrl-C is told apart from a ``raise KeyboardInterrupt`` (the yielded
    flag becomes True), a SIGTERM stops it as Ctrl-C does (the flag, and the signal's name second), and
    ``os._exit`` in the script's own thread and process raises :class:`HardExit`.
    ``os._exit`` anywhere else (a forked child, another thread) still ends that process at once."""
    import signal
    import threading

    pid, main, real_exit = os.getpid(), threading.get_ident(), os._exit
    ctrl_c: list = [False, "Ctrl-C"]

    def on_sigint(signum, frame):
        ctrl_c[:] = [True, "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C"]
        signal.default_int_handler(signum, frame)

    def hard_exit(code):
        if os.getpid() == pid and threading.get_ident() == main:
            raise HardExit(code)
        real_exit(code)

    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, on_sigint) if in_main else None
    terminated = signal.signal(signal.SIGTERM, on_sigint) if in_main else None
    os._exit = hard_exit
    try:
        yield ctrl_c
    finally:
        os._exit = real_exit
        if in_main:
            signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)
            signal.signal(signal.SIGTERM, terminated if terminated is not None else signal.SIG_DFL)


def run_script(path: str, args: Sequence[str] = (), dims: dict[str, int] | None = None,
               device: str = "cpu", filters: Filters | None = None,
               stdout_to_stderr: bool = False, limits: Limits | None = None,
               backward: bool = False, loss: str | None = None) -> ScriptRun:
    """Trace ``path`` run as ``__main__``; exceptions in the script are kept, not raised.

    With ``limits``, a watcher thread stops the script (as Ctrl-C would) once it has recorded
    ``max_ops`` ops or run ``seconds``; the trace keeps the first ``max_ops`` ops. ``backward``: trace
    the script's own ``.backward()`` calls too (the first in full), or, when it runs none, the backward
    of ``loss`` (a scalar the script's top level names) or else of the last result's sum."""
    import torch

    from shapetrace.engine.sites import STACK_ROOTS

    check_script(path)
    STACK_ROOTS.add(_exec.__code__)
    trace = _new_trace(dims, backward)
    trace.check_dependencies()   # the outermost module is run again on perturbed copies after the run
    exception: BaseException | None = None
    problem: UsageError | None = None
    watcher = _Watcher(trace, limits) if limits is not None else None
    with script_environment(path, args, stdout_to_stderr) as threads, _script_endings() as ctrl_c:
        try:
            with trace, _default_device(device, torch), watcher or contextlib.nullcontext():
                namespace = _exec(path)
                if loss is not None:
                    try:
                        trace.loss = loss_of(namespace, loss)
                    except UsageError as exc:   # (said once the script is over, as a usage error)
                        problem = exc
        except (SystemExit, HardExit) as exc:
            if exc.code not in (None, 0):
                exception = exc
        except BaseException as exc:  # the script's own failure of any class, or Ctrl-C: shown with the table
            exception = exc
        finally:
            if watcher is not None:
                watcher.__exit__(None, None, None)
            _flush()
    if problem is not None:
        raise problem
    stopped = watcher.stopped if watcher is not None else None
    if stopped is not None and (exception is None or isinstance(exception, (RecordingStopped, KeyboardInterrupt))):
        exception = None  # the limit asked for stopped it: the ops so far are the answer
        if backward:
            trace.stopped(f"the recording stopped at {stopped.split(':')[0]}")
        if limits.max_ops is not None and len(trace.events) > limits.max_ops:
            trace = filtered(trace, trace.events[:limits.max_ops])
    else:
        stopped = None
    run = _finish(path, trace, exception, filters or Filters(), stopped)
    run.ctrl_c, run.by = ctrl_c
    if threads[0]:
        run.notes.append(f"the script started {threads[0]} thread{'s' if threads[0] != 1 else ''}: shapetrace "
                         "records the thread that runs the script, so ops run in other threads are not in the table")
    return run


def _new_trace(dims: dict[str, int] | None, backward: bool) -> Trace:
    if backward:
        from shapetrace.engine.backward.trace import BackwardTrace

        return BackwardTrace(dims)
    from shapetrace.engine.tracer import Trace

    return Trace(dims)


def backward_notes(run: ScriptRun, backward: bool, loss: str | None = None) -> list[str]:
    """What the table says of the script's backward passes: how many ran and which one it shows, or, without
    ``--backward``, that they ran and are not shown."""
    calls = sum(run.trace.capture.backward_via.values())
    via = " and ".join(_written(spec.callable) for spec in run.trace.capture.backward_via)
    passes = f"{calls} backward pass{'es' if calls != 1 else ''} ({via})"
    if not backward:
        return [f"the script ran {passes}, not shown: shapetrace trace --backward {run.script} traces them "
                "(the first in full)"] if calls else []
    report = run.trace.backward
    notes = []
    if loss is not None and calls:
        notes.append(f"--loss {loss} was not used: the script ran its own backward")
    if report is not None and report.runs > 1:
        others = report.runs - 1
        same = report.alike - 1
        how = f"{'all ' if others > 1 else ''}{others} other{'s' if others != 1 else ''} ran the same autograd " \
              "nodes" if same == others else f"{others - same} of the {others} others ran other autograd nodes"
        notes.append(f"the script ran {report.runs} backward passes; the backward table shows the first ({how})")
    return notes


def _written(path: str) -> str:
    """How code calls a function: ``.backward()`` for ``torch.Tensor.backward``, ``torch.autograd.grad()``."""
    return path.replace("torch.Tensor.", ".", 1) + "()"


def loss_of(namespace: dict, name: str):
    """``--loss NAME``: the scalar tensor the script's top level holds under ``name``, that requires grad.

    Raises:
        UsageError: when there is none.
    """
    import torch

    value = namespace.get(name)
    if not isinstance(value, torch.Tensor):
        found = "has no variable" if name not in namespace else f"holds a {type(value).__name__}, not a tensor,"
        raise UsageError(f"--loss {name}: the script's top level {found} named {name!r} (a loss computed inside a "
                         "function is not seen: name one the top level keeps, or call .backward() in the script)")
    if value.numel() != 1 or not value.requires_grad:
        why = f"has {value.numel()} elements" if value.numel() != 1 else "does not require grad"
        raise UsageError(f"--loss {name}: {name} {why}; the backward starts from a scalar that requires grad")
    return value


class RecordingStopped(BaseException):
    """Raised in the script's thread when a limit (``--max-ops``, ``--time-limit``) is reached: a
    BaseException, so a script's ``except Exception`` does not swallow it."""


class _Watcher:
    """A thread that watches a recording: it reports progress and stops the script at a limit by
    sending the main thread a signal of its own (SIGUSR1), whose handler raises :class:`RecordingStopped`.
    That works where SIGINT is ignored (a background job, nohup) and wakes a ``time.sleep``; the signal is
    sent again every half second, in case the script catches the first one."""

    TICK = 0.05
    RESEND = 0.5

    def __init__(self, trace: Trace, limits: Limits) -> None:
        import threading

        self.trace, self.limits = trace, limits
        self.stopped: str | None = None
        self._main = threading.get_ident()
        self._go, self._done = threading.Event(), threading.Event()
        self._previous, self._installed = None, False
        # started here, before the script's environment counts the threads it starts
        self._thread = threading.Thread(target=self._watch, name="shapetrace-watcher", daemon=True)
        self._thread.start()

    def __enter__(self) -> _Watcher:
        import signal
        import threading

        if hasattr(signal, "SIGUSR1") and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGUSR1, self._raise)
            self._installed = True
        self._go.set()
        return self

    def __exit__(self, *exc) -> None:
        import signal

        self._done.set()
        self._go.set()
        self._thread.join()
        if self._installed:
            signal.signal(signal.SIGUSR1, signal.SIG_DFL if self._previous is None else self._previous)
            self._installed = False

    def _raise(self, signum, frame) -> None:
        if not self._done.is_set():
            raise RecordingStopped(self.stopped)

    def _watch(self) -> None:
        self._go.wait()
        self._start = time.monotonic()
        limits, next_report = self.limits, self.limits.progress_after
        while not self._done.wait(self.TICK):
            ops, elapsed = len(self.trace), time.monotonic() - self._start  # records: nothing is made here
            if limits.progress is not None and elapsed >= next_report:
                limits.progress(ops, elapsed)
                next_report = elapsed + 0.1
            if limits.max_ops is not None and ops >= limits.max_ops:
                return self._stop(f"--max-ops {limits.max_ops:,}: the recording stopped after "
                                  f"{limits.max_ops:,} ops")
            if limits.seconds is not None and elapsed >= limits.seconds:
                return self._stop(f"--time-limit {limits.seconds:g}: the recording stopped after "
                                  f"{limits.seconds:g} s ({ops:,} ops)")

    def _stop(self, why: str) -> None:
        self.stopped = why
        since = time.monotonic()
        while not self._done.is_set():
            self._signal()
            self._done.wait(self.RESEND)
            if (self.limits.on_stuck is not None and not self._done.is_set()
                    and time.monotonic() - since >= self.limits.give_up_after):
                self.limits.on_stuck(why, len(self.trace))

    def _signal(self) -> None:
        import signal

        if not self._installed:  # not the main thread: Python's own interrupt flag (a KeyboardInterrupt)
            _thread.interrupt_main()
            return
        with contextlib.suppress(OSError, ValueError):
            signal.pthread_kill(self._main, signal.SIGUSR1)


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


def _finish(path: str, trace: Trace, exception: BaseException | None, filters: Filters,
            stopped: str | None = None) -> ScriptRun:
    if exception is None and filters.only:
        check_only(trace.events, filters.only)
    if exception is None:
        check_files(trace.events, filters.include, "--include")
        check_files(trace.events, filters.exclude, "--exclude")
    failed_at = next((e.index for e in trace.events if e.error), None) if exception else None
    kept = [e for e in trace.events if filters.keep(e) or e.index == failed_at]
    shown = filtered(trace, kept)
    failed = next((e for e in shown.events if e.error), None)
    run = ScriptRun(script=path, trace=shown, exception=exception, failed=failed,
                    hidden=len(trace.events) - len(kept), stopped=stopped)
    if not trace.events and exception is None and stopped is None:
        raise RunError(f"{path} ran to the end without a tensor op that shapetrace records (view, reshape, "
                       "transpose, matmul, linear, softmax...): nothing to show (is the model called?)")
    if not trace.events and exception is None:   # (a limit stopped it before its first op: no table to show)
        raise RunError(f"{path} made no tensor op that shapetrace records before {stopped.split(':')[0]} stopped "
                       "it: nothing to show (raise the limit, or is the model called?)")
    return run


def filtered(trace: Trace, events: Sequence[Event]) -> Trace:
    """A copy of ``trace`` holding only ``events``, renumbered from 0; ``trace`` itself when ``events`` are
    all of its events. The findings are the whole run's, worked out before any op is hidden (the rules read
    every op the kept ones came from, and the inference's own tables are numbered as the run was),
    renumbered with the ops (:func:`_renumbered`); each op's sources and joins point into the copy (None
    where the op they came from is hidden), so what reads them never reads another op than they meant."""
    if len(events) == len(trace.events) and all(a is b for a, b in zip(events, trace.events)):
        return trace  # nothing hidden: the same events, already numbered from 0
    findings = trace.diagnostics   # (on every op: before any is hidden)
    new = {e.index: i for i, e in enumerate(events)}
    out = type(trace).__new__(type(trace))   # (a BackwardTrace stays one: its backward and findings too)
    out.__dict__.update(trace.__dict__)
    out.events = [replace(e, index=i, sources=tuple(None if s is None or s[0] not in new else (new[s[0]], s[1])
                                                    for s in e.sources),
                          joined=tuple(frozenset(new[j] for j in group if j in new) for group in e.joined))
                  for i, e in enumerate(events)]
    out._diagnostics = [_renumbered(d, new) for d in findings]
    return out


def _renumbered(finding: Diagnostic, new: dict[int, int]) -> Diagnostic:
    """``finding`` as the ops a filter kept are numbered: its op and every ``#N`` it cites renumbered as the
    table shows them; an op the filter hid keeps its number, said to be hidden, and a finding on one is kept
    without an op of its own (the verdict stays the whole run's: a filter hides rows, never a bug)."""
    def cite(match: re.Match) -> str:
        n = int(match.group(1))
        return f"#{new[n]}" if n in new else f"#{n} (not shown)"

    span = finding.span
    return replace(finding, event=new.get(finding.event) if finding.event is not None else None,
                   message=_CITED.sub(cite, finding.message), fix=_CITED.sub(cite, finding.fix),
                   also=tuple(new[i] for i in finding.also if i in new),
                   span=None if span is None or span[0] not in new or span[1] not in new
                   else (new[span[0]], new[span[1]]))


#: an op cited in a finding's words: ``softmax #3``, ``#12-#14``
_CITED = re.compile(r"(?<![\w&])#(\d+)\b")


def sizes_not_found(events: Sequence[Event], sizes: dict[str, int]) -> dict[str, int]:
    """The named sizes (``--dims``) that no recorded tensor has as an axis length: names that cannot
    have named anything."""
    seen = {n for e in events for t in (*e.inputs, *e.outputs) for n in t.shape}
    return {k: v for k, v in sizes.items() if v not in seen}


def tokens_disagree(events: Sequence[Event], sizes: dict[str, int]) -> str | None:
    """``--dims T=6, but the input [2, 8, 64] has 8 tokens …``: where the first tensor that enters the
    traced code is [B, T', D] with B and D as given and T' not the T given (a question, never a name), and no
    tensor that entered is ``[B, T, ...]`` (RecBole's ids ``[2, 6]`` at T=6, made ``[2, 7, 32]`` by the model's own
    appended column: T is right)."""
    B, T, D = (sizes.get(k) for k in ("B", "T", "D"))
    first = next((t for e in events for t in e.inputs if len(t.shape) == 3), None)
    entered = (t for e in events for t, source in zip(e.inputs, e.sources or (None,) * len(e.inputs))
               if source is None)
    if None in (B, T, D) or first is None or any(tuple(t.shape[:2]) == (B, T) for t in entered):
        return None
    b, t, d = first.shape
    if (b, d) != (B, D) or t == T:
        return None
    return (f"--dims T={T}, but the input {list(first.shape)} has {t} tokens (B={B} and D={D} are where --dims "
            f"puts them): did you mean T={t}?")


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def unused_sizes_note(events: Sequence[Event], sizes: dict[str, int]) -> str | None:
    """When the input's token count is not the T given (:func:`tokens_disagree`), say so; when some axes
    were named but some ``--dims`` sizes match no axis at all: say which (they name nothing in the table),
    so a mistyped size is not taken for a checked one. None otherwise."""
    disagree = tokens_disagree(events, sizes) if sizes else None
    if disagree:
        return disagree
    missing = sizes_not_found(events, sizes) if sizes else {}
    shown = {w for e in events for t in (*e.inputs, *e.outputs) for d in t.dims if d for w in _WORD.findall(d)}
    if "d_k" in shown and "d_k" not in sizes:   # d_k = D / H named an axis (heads written as modules: no H axis)
        missing = {k: v for k, v in missing.items() if k not in ("D", "H")}
    if not missing or not any(d for e in events for t in (*e.inputs, *e.outputs) for d in t.dims):
        return None
    listed = ", ".join(f"{k}={v}" for k, v in missing.items())
    verb = "matches" if len(missing) == 1 else "match"
    return (f"--dims {listed} {verb} no axis of any recorded tensor: the script does not use "
            f"{'that size' if len(missing) == 1 else 'those sizes'}, so no axis in the table is named from it")


def how_to_name(events: Sequence[Event], sizes: dict[str, int]) -> str:
    """What the table says when no axis has a name: how to give names in a ``shapetrace trace`` run,
    or why the sizes given with ``--dims`` named nothing."""
    if not sizes:
        return ("Name them with --dims (e.g. --dims B=2,T=6,D=512,H=8) or with shapetrace.name(x, \"B T D\") "
                "in the script.")
    missing = sizes_not_found(events, sizes)
    seen = sorted({n for e in events for t in (*e.inputs, *e.outputs) for n in t.shape})
    given = " ".join(f"{k}={v}" for k, v in sizes.items())
    verb = "matches" if len(missing) == 1 else "match"
    absent = (" (" + ", ".join(f"{k}={v}" for k, v in missing.items()) + f" {verb} no axis)") if missing else ""
    sizes_seen = ", ".join(map(str, seen[:12])) + (", …" if len(seen) > 12 else "")
    return (f"The sizes given with --dims ({given}) named no input tensor{absent}; the script's tensors "
            f"have axes of sizes {sizes_seen}. Give the sizes the script uses, or name a tensor in the script "
            "with shapetrace.name(x, \"B T D\").")


def script_header(path: str, dims: dict[str, int], note: str | None = None,
                  head_width: int | None = None) -> list[str]:
    """The header lines: script, named sizes and what was derived from them (``head_width``: the heads'
    width the model's own head split proved, where it is not D / H: :attr:`.tracer.Trace.head_width`)."""
    from shapetrace.engine.namer import Namer

    sizes = " ".join(f"{k}={v}" for k, v in dims.items())
    lines = [f"shapetrace · {os.path.basename(path)}" + (f" · {sizes}" if sizes else "")]
    derived = {k: v for k, v in Namer(dict(dims)).dims.items() if k not in dims and k not in ("qkv", "kv")}
    if head_width is not None and "D" in dims and "H" in dims:
        lines.append(f"d_k = {head_width}: the width of each head as the model splits its projections, not "
                     f"D / H = {dims['D']} / {dims['H']} (give d_k with --dims to say so yourself)")
    elif "d_k" in derived and "D" in dims and "H" in dims:
        lines.append(f"d_k = D / H = {dims['D']} / {dims['H']} = {derived['d_k']}")
    elif not dims:
        lines.append("no --dims given: axes show sizes only (name them with --dims B=2,T=6,D=512,H=8 "
                     "or shapetrace.name(x, \"B T D\"))")
    if note:
        lines.append(note)
    return lines
