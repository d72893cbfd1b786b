"""Run a lesson's live example under the tracer (imports torch).

A lesson marks an example with a ```` ```python live ```` fence; the code runs
with ``torch``, ``F``, ``math``, ``rearrange`` and ``shapetrace`` in scope,
and its source is registered with ``linecache`` so the table shows each line.

The fence line holds named sizes (``B=2 T=5``) and three options (:func:`fence_options`):

* ``diagram=N``: draw the memory layout under op N of the trace;
* ``predict=NAME``: ask the reader for the shape of the variable ``NAME`` before the trace is
  shown; the answer is the shape torch gave it (in a ``backward`` example, read after the backward ran:
  ``NAME`` may be a dotted path to a grad, ``w_q.weight.grad``);
* ``expect=KIND``: the example is a bug on purpose; ``KIND`` is the diagnostic it must raise
  (``causal-mask-misaligned``) or ``raises`` when torch itself refuses it.

and one flag, ``backward``: the example runs with autograd on and its backward is traced too (its own
``.backward()``, or else the backward of the sum of its last result that requires grad:
:class:`~shapetrace.engine.backward.trace.BackwardTrace`), shown under its table.
"""

from __future__ import annotations

import linecache
import math
import re
import types
from dataclasses import dataclass
from typing import Any

from shapetrace.engine.dims import parse_dims

OPTIONS = ("diagram", "predict", "expect")
FLAGS = ("backward",)


@dataclass(frozen=True)
class FenceOptions:
    """What the fence line of a live example says: its named sizes and its options."""

    dims: str = ""
    diagram: int | None = None
    predict: str | None = None
    expect: str | None = None
    backward: bool = False


def fence_options(fence: str) -> FenceOptions:
    """The sizes and options of a fence line's tail.

    >>> fence_options("B=1 T=4 diagram=9 predict=scores")
    FenceOptions(dims='B=1 T=4', diagram=9, predict='scores', expect=None, backward=False)
    >>> fence_options("B=1 T=4 backward").backward
    True
    """
    dims, options = [], {}
    for word in fence.split():
        key, _, value = word.partition("=")
        if word in FLAGS:
            options[word] = True
        elif key in OPTIONS:
            options[key] = int(value) if key == "diagram" else value
        else:
            dims.append(word)
    return FenceOptions(" ".join(dims), **options)


@dataclass(frozen=True)
class LiveRun:
    """A traced example, and the shape torch gave the variable the reader was asked to predict."""

    trace: Any
    answer: tuple[int, ...] | None = None

LIVE = re.compile(r"^```python live([^\n]*)\n(.*?)^```\n?", re.S | re.M)


def split_live(markdown: str) -> list[tuple[str, str, str]]:
    """``[("text", md, ""), ("live", code, dims), ...]`` in document order.

    ``dims`` are the named sizes after ``live`` on the fence line
    (```` ```python live B=2 T=5 D=12 H=3 ````).
    """
    parts, pos = [], 0
    for m in LIVE.finditer(markdown):
        if m.start() > pos:
            parts.append(("text", markdown[pos:m.start()], ""))
        parts.append(("live", m.group(2), m.group(1).strip()))
        pos = m.end()
    if pos < len(markdown):
        parts.append(("text", markdown[pos:], ""))
    return parts


def split_screens(markdown: str) -> list[list[tuple[str, str, str]]]:
    """The lesson cut into screens for ``lesson N --present``: a new screen at each ``## `` heading.

    Each screen is a list of :func:`split_live` parts; a live example stays on the screen of
    the heading above it. An example with ``predict=`` is asked first: its screen ends with the
    code untraced (a ``question`` part), and the next screen shows it traced, the answer on top (an
    ``answer`` part: a screen taller than the terminal is cut at the bottom).

    >>> [len(s) for s in split_screens("# A\\nintro\\n## B\\ntext\\n```python live B=1\\nx = 1\\n```\\n")]
    [1, 2]
    """
    screens: list[list[tuple[str, str, str]]] = [[]]
    for kind, body, dims in split_live(markdown):
        if kind == "live" and fence_options(dims).predict:
            screens[-1].append(("question", body, dims))
            screens.append([("answer", body, dims)])
            continue
        if kind == "live":
            screens[-1].append((kind, body, dims))
            continue
        for n, chunk in enumerate(re.split(r"(?m)^(?=## )", body)):
            if n > 0 and screens[-1]:
                screens.append([])
            if chunk.strip():
                screens[-1].append(("text", chunk, ""))
    return [screen for screen in screens if screen]


def run_example(code: str, name: str, dims: str = ""):
    """Execute ``code`` under the tracer and return the trace (``dims``: a fence line's tail)."""
    return run_live(code, name, dims).trace


def run_live(code: str, name: str, fence: str = "") -> LiveRun:
    """Execute ``code`` under the tracer: its trace, and the shape of the ``predict=`` variable.

    The example's namespace has ``shapetrace.name`` (what a learner's own script imports), nothing more.
    """

    import einops
    import torch
    import torch.nn.functional as F

    from shapetrace.engine.backward.trace import BackwardTrace
    from shapetrace.engine.tracer import Trace, name_axes

    filename = "<" + name.replace("/", " ") + ">"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    namespace = {"torch": torch, "F": F, "math": math, "rearrange": einops.rearrange,
                 "shapetrace": types.SimpleNamespace(name=name_axes)}
    options = fence_options(fence)
    trace = (BackwardTrace if options.backward else Trace)(parse_dims(options.dims or None))
    with torch.enable_grad() if options.backward else torch.no_grad():
        try:
            with trace:
                exec(compile(code, filename, "exec"), namespace)
        except Exception as exc:  # a lesson may show an error on purpose
            trace.exception = exc
    value = dotted(namespace, options.predict) if options.predict else None
    return LiveRun(trace, tuple(value.shape) if isinstance(value, torch.Tensor) else None)


def dotted(namespace: dict, path: str) -> Any:
    """The value ``path`` names in ``namespace``: a variable, or attributes of one (``w_q.weight.grad``);
    None where nothing has that name. Attributes are read, nothing is evaluated.

    >>> import types
    >>> dotted({"w": types.SimpleNamespace(grad=3)}, "w.grad"), dotted({}, "x.grad")
    (3, None)
    """
    first, *rest = path.split(".")
    value = namespace.get(first)
    for attr in rest:
        value = getattr(value, attr, None)
    return value
