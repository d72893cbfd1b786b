"""``mask-wrong-batch-order`` for a kernel's own mask: SDPA's ``attn_mask`` whose batch entries lie on another
leading axis than the queries' batch (part of ``diagnose.RULES``).

``nn.MultiheadAttention`` takes a 3-d mask ``(N·H, L, S)`` read as entry ``b·H + h`` and views it to
``(N, H, L, S)`` before SDPA; a mask tiled ``mask.repeat(H, 1, 1)`` is ``(H·N, L, S)``, and that view puts its
copies on the batch axis and the batch on the heads axis. Names from where each element came from say so
(the mask's batch root sits on the heads' axis); sizes never do, so a mask named by sizes alone says nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.axes import coalesce
from shapetrace.engine.diagnostic import Diagnostic
from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis


def _batch_roots(namer, axis) -> list[bool]:
    """For each piece of ``axis`` (its atoms coalesced), whether its root's role is the batch."""
    return [namer.role(a.root) == "batch" for a in coalesce(axis.atoms)]


def fused_mask_batch_order(analysis: Analysis) -> list[Diagnostic]:
    """Each SDPA with a mask as long as its queries: a leading axis of the queries that is the batch alone,
    against a mask axis (not broadcast) without the batch, while another leading axis of the mask holds it."""
    out = []
    for e in analysis.events_of(Family.FUSED_ATTENTION):
        if not e.params.get("has_mask") or len(e.inputs) < 4:
            continue
        q, mask = e.inputs[0], e.inputs[3]
        lead = len(mask.shape) - 2
        if lead < 2 or len(q.shape) != len(mask.shape):
            continue
        holds_batch = [any(_batch_roots(analysis.namer, a)) for a in mask.axes[:lead]]
        for j in range(lead):
            if _batch_roots(analysis.namer, q.axes[j]) != [True] or mask.shape[j] == 1 or mask.stride[j] == 0 \
                    or holds_batch[j]:
                continue
            held = next((i for i in range(lead) if i != j and holds_batch[i]), None)
            if held is None:
                continue
            out.append(Kind.MASK_WRONG_BATCH_ORDER.found(e.index, (
                f"{e.op} #{e.index} lines up the mask {fmt_named(mask.dims, mask.shape)} with the queries "
                f"{fmt_named(q.dims, q.shape)}: the queries' axis {j} is the batch ({q.dims[j]}), but the mask "
                f"holds its batch entries on axis {held} ({mask.dims[held]}) and {mask.dims[j] or 'something else'} "
                f"on axis {j}, so sequence b's mask lands on another sequence's heads: a 3-d mask is read as entry "
                "b·H + h, tiled batch first (repeat_interleave(H, dim=0), not repeat(H, 1, 1))."),
                "Tile a 3-d mask batch first, as the kernel reads entry b·H + h: mask.repeat_interleave(H, dim=0), "
                "not mask.repeat(H, 1, 1)."))
            break
    return out
