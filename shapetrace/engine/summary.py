"""Counts over a list of events for footers and comparisons (plain data)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import Event


def stats(events: Sequence[Event]) -> dict[str, Any]:
    """Ops, views, copies and their bytes, computed buffers, and the largest tensor."""
    views = [e for e in events if e.view and not e.error]
    copies = [e for e in events if e.copy_bytes]
    computed = [e for e in events if e.alloc_bytes and not e.copy_bytes]
    largest = None
    for e in events:
        for t in e.outputs:
            if largest is None or t.nbytes > largest[1].nbytes:
                largest = (e.index, t)
    return {
        "ops": len(events), "views": len(views), "copies": len(copies),
        "copy_bytes": sum(e.copy_bytes for e in copies), "new_buffers": len(computed),
        "alloc_bytes": sum(e.alloc_bytes for e in computed), "largest": largest,
    }
