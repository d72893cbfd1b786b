"""A ``mean`` over the heads, or over the tokens, of the heads' attention outputs (issue 33 item 4, headsmean
round).

Graph attention's output layer averages its heads on purpose (Velickovic et al. 2018, eq. 6; pytorch-GAT's
``out_nodes_features.mean(dim=self.head_dim)``, torch_geometric's ``GATConv(concat=False)``: ``out.mean(dim=1)``,
DGL's ``h.mean(1)``); a transformer that should lay its heads side by side and averages them instead has the same
trace. What the op computes is the same in both: one average of the heads' outputs, each head's weight 1/H. So the
finding says what it computes and that it is right only where the model means to average its heads: a warning,
never an error, and never a check mark.

Only a ``mean`` along the heads alone, of what a product weighing values made per head (the heads' outputs: the
reduced tensor comes, through rows that make no new features, from a product whose result carries that heads axis)
is read this way.
A ``sum`` scales the average by H, which no averaged ensemble does, and a reduction of per-head values before they
are weighed (q, k or v: heads collapsed before attention) has no reading that keeps them apart: both stay
``reduction-over-wrong-axis`` errors (:mod:`.reductions`).

The same slip the other way, GAT's ``mean(dim=1)`` written ``mean(dim=0)`` on ``(N, NH, FOUT)``, averages the nodes
with the heads kept apart: a readout per head (a graph-level summary, or a pooling before the heads are merged,
which a mean commutes with) computes just that. No contract tells the two apart, so it is a note that keeps the
verdict at ``?``, never ``✓`` (:func:`pooled_per_head`)."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family, family_of
from shapetrace.engine.reductions import axes_along

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic
    from shapetrace.engine.events import Event

#: ops that weigh one operand by another: where the heads' outputs are made
WEIGHING = frozenset({Family.PRODUCT, Family.FUSED_ATTENTION})
#: ops that make new features from their operand's: a path back to the heads' outputs ends at one
STOPS = frozenset({Family.PROJECTION, Family.MODULE_ATTENTION, Family.OTHER})


def averaged_heads(analysis: Analysis, e: Event, along: tuple[int, ...], i: int) -> Diagnostic | None:
    """The warning for ``e``, a reduction along the heads axis ``i`` of per-head values, where it is a ``mean``
    along that axis alone of the heads' outputs; None where it is not (the caller's error stands)."""
    t = e.inputs[0]
    if e.spec.name != "mean" or tuple(along) != (i,) or not _after_weighing(analysis, e, t.dims[i]):
        return None
    return Kind.HEADS_AVERAGED.found(e.index, (
        f"{e.op} #{e.index} averages the {t.shape[i]} heads' outputs {fmt_named(t.dims, t.shape)} along axis {i} "
        f"({t.dims[i]}, the heads) into one, each head weighing 1/{t.shape[i]}: right only where the model means to "
        "average its heads (graph attention's output layer, GAT's concat=False); where the heads are to be laid "
        "side by side, this loses them."),
        "If the heads are meant to be concatenated, merge them instead: y.transpose(1, 2).reshape(B, T, H * d_k) "
        "(or .flatten(1) on [N, H, d_k]), then the output projection.")


def _after_weighing(analysis: Analysis, e: Event, heads: str) -> bool:
    """Does ``e``'s operand come, through rows that are no product, from a product whose result carries the
    heads axis ``heads``: the heads' outputs, not q, k or v before attention (a path through a projection, as from
    an earlier layer's outputs to this layer's q, stops there)?"""
    seen, queue = {e.index}, deque([e.index])
    while queue:
        at = analysis.events[queue.popleft()]
        for source in at.sources:
            if source is None or source[0] in seen:
                continue
            before = analysis.events[source[0]]
            if family_of(before.op) in WEIGHING and any(heads in (out.dims or ()) for out in before.outputs):
                return True
            if family_of(before.op) in WEIGHING | STOPS:
                continue   # (a projection in between: q, k or v of a later layer, not this layer's outputs)
            seen.add(source[0])
            queue.append(source[0])
    return False


def pooled_per_head(analysis: Analysis) -> list[Diagnostic]:
    """A ``mean`` along a named token axis alone of the heads' outputs (a heads axis and a head-features axis kept,
    both of more than one entry, made by a product weighing values): a note, the verdict ``?``."""
    out = []
    for e in analysis.events_of(Family.REDUCE):
        if e.spec.name != "mean" or not e.inputs or not e.outputs:
            continue
        t = e.inputs[0]
        along = axes_along(Family.REDUCE.value, e.params, len(t.shape)) or ()
        roles = [analysis.namer.plain_role(label) for label in t.dims]
        kept = {roles[k]: k for k in range(len(t.shape)) if k not in along and t.shape[k] > 1}
        if len(along) != 1 or roles[along[0]] != "tokens" or t.shape[along[0]] < 2 \
                or "heads" not in kept or "head_features" not in kept \
                or not _after_weighing(analysis, e, t.dims[kept["heads"]]):
            continue
        i, h = along[0], kept["heads"]
        out.append(Kind.POOLED_PER_HEAD.found(e.index, (
            f"{e.op} #{e.index} averages the heads' outputs {fmt_named(t.dims, t.shape)} over axis {i} ({t.dims[i]}, "
            f"the tokens) and keeps the {t.shape[h]} heads apart: a readout per head by design, or a slip for a mean "
            f"over the heads (axis {h}); nothing in the trace tells which."),
            f"If the heads were to be averaged, take the mean along axis {h} ({t.dims[h]})."))
    return out
