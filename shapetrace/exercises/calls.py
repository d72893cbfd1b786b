"""Run one function under the tracer, an allocation counter, a capped stdout and a clock.

Imports torch. The child runs the learner's function with it; the parent runs only lesson code
(the reference and the known mistakes).
"""

from __future__ import annotations

import contextlib
import io
import signal
import sys
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

OUTPUT_LIMIT = 4000


class CheckTimeout(BaseException):
    """Raised by the alarm when the learner's code runs past the time limit."""


class CappedText(io.TextIOBase):
    """A stdout stand-in that keeps the first ``limit`` characters and counts the rest."""

    def __init__(self, limit: int = OUTPUT_LIMIT):
        self.limit, self.kept, self.total = limit, [], 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        room = self.limit - min(self.total, self.limit)
        if room > 0:
            self.kept.append(text[:room])
        self.total += len(text)
        return len(text)

    def text(self) -> str:
        return "".join(self.kept)


class AllocCounter(TorchFunctionMode):
    """Counts the bytes of every new storage a call creates (views and in-place ops add nothing)."""

    def __init__(self, inputs: list[torch.Tensor]):
        super().__init__()
        self.known = {_ptr(t) for t in inputs}
        self.keep: list[torch.Tensor] = []  # held so the allocator cannot reuse an address
        self.bytes = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        outs = result if isinstance(result, (tuple, list)) else [result]
        for t in outs:
            if isinstance(t, torch.Tensor):
                ptr = _ptr(t)
                if ptr and ptr not in self.known:
                    self.known.add(ptr)
                    self.bytes += t.untyped_storage().nbytes()
                    self.keep.append(t)
        return result


def _ptr(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except Exception:
        return 0


@dataclass
class Outcome:
    """What one call did: its value or exception, where, what it printed, traced and allocated."""

    value: Any = None
    exc: BaseException | None = None
    frame: tuple[int, str] | None = None  # (line, code) in the learner's file
    output: str = ""
    output_total: int = 0
    trace: Any = None
    alloc_bytes: int = 0

    @property
    def raised(self) -> bool:
        return self.exc is not None


class LoadFailure(Exception):
    """The learner's file could not be loaded or lacks the function."""

    def __init__(self, outcome: Outcome):
        super().__init__(message_of(outcome.exc)[0])
        self.outcome = outcome


def message_of(exc: BaseException | None) -> tuple[str, str]:
    """``(message, why not)``: the exception's ``str()``; where its ``__str__`` raises, ``''`` and why
    (``__str__ raised TypeError``): a learner's exception is reported like any other, never a crash of the
    process reading it."""
    if exc is None:
        return "", ""
    try:
        return str(exc), ""
    except BaseException as inner:  # noqa: B036  (learner code: any exception at all, SystemExit included)
        return "", f"__str__ raised {type(inner).__name__}"


def _on_alarm(signum, frame):
    raise CheckTimeout()


def start_clock(seconds: float) -> None:
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)


def stop_clock() -> None:
    signal.setitimer(signal.ITIMER_REAL, 0)


def learner_frame(exc: BaseException, path: str) -> tuple[int, str] | None:
    """The last line of ``path`` in the exception's traceback."""
    found = None
    for fs in traceback.extract_tb(exc.__traceback__):
        if Path(fs.filename).resolve() == Path(path).resolve():
            found = (fs.lineno or 0, (fs.line or "").strip())
    return found


def function_from_file(source: str, path: str, name: str) -> Callable:
    """Run ``source`` as the module of the file at ``path`` and return its function ``name`` (stdout captured)."""
    out = CappedText()
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = out
    module = types.ModuleType("learner_" + Path(path).stem.replace("-", "_"))
    module.__file__ = path
    try:
        exec(compile(source, path, "exec"), module.__dict__)
    except CheckTimeout:
        raise
    except (Exception, SystemExit) as exc:
        frame = learner_frame(exc, path)
        if isinstance(exc, SyntaxError) and exc.lineno:
            frame = (exc.lineno, (exc.text or "").strip())
        raise LoadFailure(Outcome(exc=exc, frame=frame, output=out.text(), output_total=out.total)) from None
    finally:
        sys.stdout, sys.stderr = saved
    fn = getattr(module, name, None)
    if not callable(fn):
        exc = AttributeError(f"{Path(path).name} defines no function {name}(): keep the name "
                             "and the arguments of the starter")
        raise LoadFailure(Outcome(exc=exc, output=out.text(), output_total=out.total))
    return fn


def load_function(path: str, name: str) -> Callable:
    """The function ``name`` of the file at ``path`` (the parent loads only lesson files this way)."""
    return function_from_file(Path(path).read_text(encoding="utf-8"), str(path), name)


def function_from_code(source: str, name: str) -> Callable:
    """A function defined in a code string (the known mistakes in exercise.toml)."""
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<mistake {name}>", "exec"), namespace)
    return namespace[name]


def axis_names(names: str) -> list[str | None]:
    """The names of a tensor input's axes; a number (``"1 1 D"``: a class token) is a size, not a name."""
    return [None if word.isdigit() else word for word in names.split()]


def call(fn: Callable, args: list[Any], names: list[str | None], dims: dict[str, int],
         path: str | None = None, traced: bool = True, watch: TorchFunctionMode | None = None) -> Outcome:
    """Call ``fn(*args)`` and record everything the checker needs; ``watch``, a mode entered last (on top of
    the stack, so it sees each of the function's calls first), watches them too."""
    from shapetrace.engine.tracer import Trace

    out = CappedText()
    trace = Trace(dims) if traced else None
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    counter = AllocCounter(tensors)
    result = Outcome(trace=trace)
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = out
    try:
        with torch.no_grad():
            if trace is not None:
                with trace:
                    for a, n in zip(args, names):
                        if n and isinstance(a, torch.Tensor):
                            trace.set_names(a, axis_names(n))
                    with counter, watch or contextlib.nullcontext():
                        result.value = fn(*args)
            else:
                with counter, watch or contextlib.nullcontext():
                    result.value = fn(*args)
    except CheckTimeout:
        raise
    except (Exception, SystemExit) as exc:  # the learner's exception is data here
        result.exc = exc
        result.frame = learner_frame(exc, path) if path else None
    finally:
        sys.stdout, sys.stderr = saved
    result.output, result.output_total = out.text(), out.total
    result.alloc_bytes = counter.bytes
    return result
