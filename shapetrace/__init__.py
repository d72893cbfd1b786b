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
'  "version": 1,'

``t.show()`` prints the same table as ``shapetrace run``; in Jupyter, ``t`` on
the last line of a cell displays it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

__all__ = ["trace", "name", "parse_dims", "Trace", "Event", "TensorInfo", "Diagnostic", "ShapetraceError"]
__version__ = "0.1.0"

from .errors import ShapetraceError

if TYPE_CHECKING:  # pragma: no cover
    from .diagnose import Diagnostic
    from .tracer import Event, TensorInfo, Trace


def parse_dims(dims: str | Mapping[str, int] | None) -> dict[str, int]:
    """Named sizes from ``"B=2 T=6 D=512 H=8"``, ``"B=2,T=6"`` or a mapping.

    >>> parse_dims("B=2,T=6 D=512")
    {'B': 2, 'T': 6, 'D': 512}
    """
    from .errors import UsageError

    if dims is None:
        return {}
    if isinstance(dims, Mapping):
        return {str(k): int(v) for k, v in dims.items()}
    out: dict[str, int] = {}
    for item in dims.replace(",", " ").split():
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier() or not value.isdigit() or int(value) < 1:
            raise UsageError(f"cannot read {item!r} in dims {dims!r}: write NAME=SIZE pairs such as "
                             f"'B=2,T=6,D=512,H=8' (sizes are whole numbers of at least 1)")
        out[key] = int(value)
    return out


def trace(dims: str | Mapping[str, int] | None = None, names: Sequence[str] | None = None) -> "Trace":
    """Record every reshaping and attention op run inside a ``with`` block.

    Args:
        dims: named sizes (``"B=2 T=6 D=512 H=8"``); the first tensor whose shape is a
            prefix of them (``[B, T, D]``) gets those names, and names flow from there.
        names: the order in which ``dims`` seed a tensor (default: the order given).

    Returns:
        a :class:`Trace`, filled in as the block runs.

    >>> import torch, shapetrace
    >>> with shapetrace.trace(dims="B=1 T=4 D=8 H=2") as t:
    ...     q = torch.ones(1, 4, 8).view(1, 4, 2, 4).transpose(1, 2)
    >>> t.events[-1].output.dims
    ('B', 'H', 'T', 'd_k')
    """
    from .tracer import Trace

    return Trace(parse_dims(dims), seed_order=names)


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
    import sys

    tracer = sys.modules.get("shapetrace.tracer")
    active = tracer.active_trace() if tracer is not None else None
    if active is not None:
        parts = names.split() if isinstance(names, str) else list(names)
        active.set_names(tensor, [None if p in (None, "_", "?") else p for p in parts])
    return tensor


def __getattr__(attr: str) -> Any:
    if attr in ("Trace", "Event", "TensorInfo"):
        from . import tracer

        return getattr(tracer, attr)
    if attr == "Diagnostic":
        from .diagnose import Diagnostic

        return Diagnostic
    raise AttributeError(f"module 'shapetrace' has no attribute {attr!r}")
