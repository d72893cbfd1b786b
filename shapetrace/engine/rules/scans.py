"""What a scan computes along an axis, read against that axis's role (issue 33 item 4).

A running sum or product (``cumsum``, ``cumprod``) carries each entry into every later one along its
axis: along the tokens that is a prefix (positions from a padding mask, as Bloom builds its ALiBi
positions with ``attention_mask.cumsum(-1)``); along the heads or the batch it carries one head's or one
sequence's values into the next, which attention never does; along one head's features (``d_k``, the outputs of a
learnt projection, whose order any permutation of its rows changes and the model does not notice) a prefix
follows an order that means nothing (gated linear attention's key gates ``logsigmoid(gk).cumsum(-1)`` where the
decay accumulates over the tokens, ``cumsum(-2)``). The axis comes from the op's recorded
``dim`` and its role from the names, so equal sizes decide nothing: an unnamed axis is not judged.

One running sum along the batch moves no data: of *counts*, a mask of integers or booleans summed over
the tokens (each entry's length). Their prefix sums are where each entry starts in the tokens of the
whole batch laid end to end (``cu_seqlens = F.pad(torch.cumsum(attention_mask.sum(dim=-1), dim=0), (1,
0))``, the unpadding of flash-attention's varlen path): offsets along ``B*T``, not one sequence's values
carried into the next.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family, family_of
from shapetrace.engine.reductions import axes_along

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic

#: the roles no scan in attention code runs along
WRONG_ROLES = {"heads": "heads", "batch": "batch entries", "head_features": "features of a head"}


def scan_axis(analysis: Analysis) -> list[Diagnostic]:
    """A scan along a named heads, batch or head-features axis."""
    out = []
    for e in analysis.events_of(Family.SCAN):
        along = axes_along(Family.SCAN.value, e.params, len(e.inputs[0].shape)) if e.inputs else None
        if not along:
            continue
        t, dim = e.inputs[0], along[0]
        label = t.dims[dim]
        role = analysis.namer.role(label) if label else None
        if role in WRONG_ROLES and t.shape[dim] > 1 and not (role == "batch" and _token_counts(analysis, e)):
            what = WRONG_ROLES[role]
            out.append(Kind.SCAN_OVER_WRONG_AXIS.found(e.index, (
                f"{e.op} #{e.index} runs along axis {dim} ({label}, the {what}) of {fmt_named(t.dims, t.shape)}: "
                f"each of its {t.shape[dim]} {what} accumulates the ones before it, so the {what} are no longer "
                "apart."),
                "Run it along the axis meant (the tokens: dim=-1 of a [B, T] mask, or the token axis of the scores)."))
    return out


_COUNTED = ("torch.int", "torch.uint", "torch.bool", "int", "uint", "bool")


def _token_counts(analysis: Analysis, e) -> bool:
    """Is the scan's input a count per batch entry: a reduction over the tokens of integers or booleans?"""
    source = e.sources[0] if e.sources else None
    if source is None or source[0] >= len(analysis.events):
        return False
    made_by = analysis.events[source[0]]
    if family_of(made_by.op) is not Family.REDUCE or not made_by.inputs:
        return False
    summed = made_by.inputs[0]
    if not str(summed.dtype).startswith(_COUNTED):
        return False
    along = axes_along(Family.REDUCE.value, made_by.params, len(summed.shape)) or ()
    roles = {analysis.namer.role(summed.dims[a]) if summed.dims[a] else None for a in along}
    return roles == {"tokens"}
