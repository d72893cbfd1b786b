"""The one spelling of sizes and shapes in every sentence, table and message (plain strings)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from shapetrace.engine.axes import top_level_terms

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import TensorInfo


def fmt_bytes(n: int) -> str:
    """``24,576`` -> ``24 KiB``; exact below 1 KiB."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:,.0f} {unit}" if value == int(value) or value >= 100 else f"{value:,.1f} {unit}"
    return f"{n:,} B"


def fmt_shape(t: TensorInfo, long_names: dict[str, str] | None = None) -> str:
    """``[B=2, H=8, T=6, d_k=64]`` (an unnamed axis shows its size only)."""
    return fmt_named(t.dims, t.shape, long_names)


#: how a shape spells an axis that holds only a tiling's copies (its label is their count)
COPIES_SHOWN = "copies"


def fmt_named(dims: Iterable[str | None], shape: Iterable[int], long_names: dict[str, str] | None = None) -> str:
    """``[B=2, H·d_k=512, 6]`` from names and sizes: the one spelling of a named shape.

    Sizes never get thousands separators: ``[B=8, T=32768, D=8192]`` is three axes, and it reads
    the way Python writes the shape.

    >>> fmt_named(("B", "H*d_k", None), (2, 512, 6))
    '[B=2, H·d_k=512, 6]'
    >>> fmt_named(("B", "T", "D"), (8, 32768, 8192))
    '[B=8, T=32768, D=8192]'

    An axis that holds only the copies a tiling made (``x.repeat(2, 1, 1)`` viewed back apart: its label is
    the count, as in ``2·B``) says so, rather than ``2=2``:

    >>> fmt_named(("2", "B*N", "H"), (2, 6, 4))
    '[copies=2, B·N=6, H=4]'
    """
    parts = []
    for name, size in zip(dims, shape):
        if name:
            shown = long_names.get(name, name) if long_names else name
            shown = COPIES_SHOWN if shown == str(size) else shown   # (a tiling's count of its copies alone)
            parts.append(f"{spelled(shown)}={size}")
        else:
            parts.append(str(size))
    return "[" + ", ".join(parts) + "]"


def fmt_names(dims: Iterable[str | None], shape: Iterable[int]) -> str:
    """``[B, H·d_k, 6]``: the names alone (a size where an axis has none), for sentences.

    >>> fmt_names(("B", "H*d_k", None), (2, 512, 6))
    '[B, H·d_k, 6]'
    """
    return "[" + ", ".join(spelled(n) if n else str(s) for n, s in zip(dims, shape)) + "]"


def spelled(label: str) -> str:
    """A label as a reader reads it: products with ``·``, and in a mix (``!``: pieces of several axes, joined by
    ``*``) each piece that is a join in parentheses, so ``!H*1+T`` reads ``!H·(1+T)``, not ``H·1 + T``.

    >>> spelled("H*d_k"), spelled("!H*1+T")
    ('H·d_k', '!H·(1+T)')
    """
    if not label.startswith("!"):
        return label.replace("*", "·")
    pieces = top_level_terms(label[1:], "*")
    return "!" + "·".join((f"({p})" if len(top_level_terms(p)) > 1 else p).replace("*", "·") for p in pieces)
