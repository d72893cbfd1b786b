"""What the diagnostics could check: an axis is checked only where it has a name. The all-clear
("every axis keeps its meaning") is said only when every axis of every op was named; otherwise the
report says which ops had unnamed axes (sizes only: nothing proven there, nothing claimed)."""

from __future__ import annotations

from collections.abc import Sequence

from shapetrace.engine.events import Event


def unchecked_ops(events: Sequence[Event]) -> list[int]:
    """The indices of ops that made a tensor with an unnamed axis (of size > 1). (What an op reads
    unnamed, a weight, a bias, was made unnamed by an earlier op or entered without a name.)"""
    return [e.index for e in events
            if any(name is None and size > 1 for info in e.outputs for name, size in zip(info.dims, info.shape))]


#: the all-clear, said only when every axis of every op was named
FULL_ALL_CLEAR = "✓ no errors or warnings: every axis keeps its meaning from input to output"


def all_clear_text(events: Sequence[Event], limit: int = 4) -> str:
    """The line said when no rule found anything: the full all-clear only when everything was named."""
    missing = unchecked_ops(events)
    if not missing:
        return FULL_ALL_CLEAR
    op_of = {e.index: e.op for e in events}
    shown = ", ".join(f"#{i} {op_of[i]}" for i in missing[:limit])
    more = f" and {len(missing) - limit} more" if len(missing) > limit else ""
    verb = "has" if len(missing) == 1 else "have"
    return (f"✓ no errors or warnings among the named axes; {len(missing)} of {len(events)} ops {verb} unnamed "
            f"axes, which were not checked ({shown}{more})")
