"""shapetrace: see every reshaping step of multi-head attention.

The public API is light to import: torch is loaded on first use of
:func:`trace`, and Rich only when something is rendered.

>>> import torch, shapetrace
>>> x = torch.zeros(2, 6, 512)
>>> with shapetrace.trace(dims="B=2 T=6 D=512 H=8") as t:
...     y = x.view(2, 6, 8, 64).transpose(1, 2)
>>> [e.op for e in t.events]
['view', 'transpose']
>>> t.events[1].output.dims
('B', 'H', 'T', 'd_k')
>>> t.events[1].output.stride
(3072, 64, 512, 1)
>>> t.diagnostics                 # structured findings, as in --json
[]
>>> t.to_json().splitlines()[1]
'  "version": 2,'

``t.show()`` prints the same table as ``shapetrace run``; in Jupyter, ``t`` on
the last line of a cell displays it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

__all__ = ["trace", "name", "parse_dims", "Trace", "Event", "TensorInfo", "Diagnostic", "ShapetraceError"]
__version__ = "0.1.0"

import sys

from shapetrace.engine.dims import parse_dims
from shapetrace.errors import ShapetraceError

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.diagnostic import Diagnostic
    from shapetrace.engine.events import Event, TensorInfo
    from shapetrace.engine.tracer import Trace


def trace(dims: str | Mapping[str, int] | None = None, names: Sequence[str] | None = None,
          backward: bool = False, dependencies: bool = False) -> Trace:
    """Record every reshaping and attention op run inside a ``with`` block.

    Args:
        dims: named sizes (``"B=2 T=6 D=512 H=8"``); the first tensor whose shape is a
            prefix of them (``[B, T, D]``) gets those names, and names flow from there.
        names: the order in which ``dims`` seed a tensor (default: the order given).
        backward: also trace the backward pass: the block's own ``.backward()``, or else, when it ends,
            the backward of the sum of the last traced result that requires grad (``t.backward``).
        dependencies: also measure the dependency contracts on the values, as ``shapetrace trace`` does:
            after the block, the outermost module it called runs again on perturbed copies (batch entries
            stay apart, each token depends on itself, a causal mask holds, heads stay apart). Off, the
            verdict says they were not measured.

    Returns:
        a :class:`Trace`, filled in as the block runs.

    >>> import torch, shapetrace
    >>> with shapetrace.trace(dims="B=1 T=4 D=8 H=2") as t:
    ...     q = torch.ones(1, 4, 8).view(1, 4, 2, 4).transpose(1, 2)
    >>> t.events[-1].output.dims
    ('B', 'H', 'T', 'd_k')
    """
    traced = _trace_class(backward)(parse_dims(dims), seed_order=names)
    if dependencies:
        traced.check_dependencies()
    return traced


#: what the verdict of a Python trace says where the dependency contracts were not asked for
NOT_ASKED = "the dependency contracts (not asked for: shapetrace.trace(..., dependencies=True) measures them)"


@functools.cache
def _trace_class(backward: bool = False) -> type:
    """The public :class:`Trace`: the engine's recorder plus display (``show()``, Jupyter, Rich).

    Composed here, in the public API, so that the engine never imports the rendering layer:
    ``shapetrace.engine`` returns plain data, and this subclass adds the three ways of showing it.
    Built on first use, so ``import shapetrace`` imports neither torch nor Rich. ``backward``: over
    the engine's trace that traces the backward too.
    """
    if backward:
        from shapetrace.engine.backward.trace import BackwardTrace as EngineTrace
    else:
        from shapetrace.engine.tracer import Trace as EngineTrace

    class Trace(EngineTrace):
        __doc__ = EngineTrace.__doc__

        @property
        def unmeasured(self) -> list[str]:
            """The dependency contracts not measured, each with why: all of them where nobody asked
            (``trace(dependencies=True)`` or :meth:`check_dependencies` before the block ends)."""
            asked = self.capture.keep_top_call or not self._finished
            return super().unmeasured if asked else [NOT_ASKED]

        def show(self, console: Any = None) -> None:
            """Print the table (and diagnostics) to ``console`` or a new Rich console.

            >>> import io, torch, shapetrace
            >>> from rich.console import Console
            >>> with shapetrace.trace(dims="B=2 T=6 D=512 H=8") as t:
            ...     q = torch.zeros(2, 6, 512).view(2, 6, 8, 64)
            >>> console = Console(file=io.StringIO(), width=80, color_system=None)
            >>> t.show(console)
            >>> print(console.file.getvalue().splitlines()[2])
            0  view  [B=2, T=6, H=8, d_k=64]  (3072, 512, 64, 1)  view    ✓
            """
            from shapetrace.render.table import print_trace

            print_trace(self.report(), console)

        def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
            """Jupyter/IPython display: the table as HTML and text."""
            from shapetrace.render.notebook import mimebundle

            return mimebundle(self.report())

        def __rich__(self) -> Any:
            from shapetrace.render.table import TraceView

            return TraceView(self.report())

    Trace.__module__ = __name__
    return Trace


def name(tensor: Any, names: str | Sequence[str | None]) -> Any:
    """Name the axes of ``tensor`` for the active trace; does nothing outside tracing.

    Args:
        tensor: any tensor; it is returned unchanged.
        names: one name per axis, ``"B T D"`` or a list; ``_`` or ``None`` for an unnamed axis.

    Returns:
        ``tensor`` itself, so ``x = shapetrace.name(torch.randn(2, 8, 64), "B T D")`` works.

    >>> import torch, shapetrace
    >>> x = torch.zeros(3, 5)
    >>> shapetrace.name(x, "T D") is x
    True
    >>> with shapetrace.trace(dims="B=2 T=8 D=64 H=8") as t:   # T = H: sizes alone are ambiguous
    ...     x = shapetrace.name(torch.zeros(2, 8, 64), "B T D")
    ...     q = x.view(2, 8, 8, 8).transpose(1, 2)
    >>> t.events[-1].output.dims
    ('B', 'H', 'T', 'd_k')
    """

    tracer = sys.modules.get("shapetrace.engine.tracer")   # not loaded: no trace can be active
    return tracer.name_axes(tensor, names) if tracer is not None else tensor


def __getattr__(attr: str) -> Any:
    if attr == "Trace":
        return _trace_class()
    if attr in ("Event", "TensorInfo"):
        from shapetrace.engine import events

        return getattr(events, attr)
    if attr == "Diagnostic":
        from shapetrace.engine.diagnostic import Diagnostic

        return Diagnostic
    raise AttributeError(f"module 'shapetrace' has no attribute {attr!r}")
