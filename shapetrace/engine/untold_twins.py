"""A softmax along one of two axes of one token name that no product told apart: the scores of an einsum whose
operands' order and own layout disagree (Keras's ``einsum("aecd,abcd->acbe", key, query)`` and a port's
``einsum("bthd,bshd->bhst", q, k)`` are one computation with the two projections' roles exchanged) carry the
role ``query-or-key``, not ``query`` and ``key``, so their names cannot say whether the softmax runs over the
keys. The verdict's ``?``, never ``✓``: which axis the keys are is not proven.

Reads: the axis a softmax runs along (its name, size and role). Adds: one sentence for the verdict's "not proven".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.axis_compute import UNTOLD
from shapetrace.engine.ops import Family, family_of
from shapetrace.engine.reductions import axes_along

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import Event

def softmax_along_untold_twins(event: Event) -> str | None:
    """Why the names cannot check ``event``'s softmax, or None: it runs along a named axis of more than one
    entry that the scores' product left :data:`~.axis_compute.UNTOLD` (queries or keys, not said which)."""
    if family_of(event.op) is not Family.SOFTMAX or not event.inputs:
        return None
    t = event.inputs[0]
    along = axes_along(Family.SOFTMAX.value, event.params, len(t.shape))
    if not along or len(along) != 1 or len(t.axes) != len(t.shape):
        return None
    a = along[0]
    name = t.dims[a]
    if name is None or t.shape[a] <= 1 or str(getattr(t.axes[a].role, "value", t.axes[a].role)) != UNTOLD:
        return None
    return f"#{event.index} {event.op} normalises along one of two axes both named {name}, and no product " \
           "told which are the queries and which the keys"
