"""Picks along the wrong axis: indices that count one axis used to pick along another (issue 33 item 3).

Reads ``analysis.misindexed`` (:mod:`shapetrace.engine.indices`: what each index tensor counts, from the
``argsort``, ``argmax`` or ``arange`` that made it, followed through the ops that only move its values):

* ``index-wrong-axis`` (error): a ``gather`` / ``index_select`` / ``take_along_dim`` picks along an axis
  of another role than the one its indices count, while another axis of its input has that role (MAE's
  unshuffle written with ``dim=2``: the features are moved by patch positions); or along a range of the axis
  they count that starts elsewhere (``topk`` over ``scores[:, p:]`` picking from ``x[:, :-w]`` without ``+ p``:
  Linking-ai/SCOPE issue #6).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.axes import base_names
from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic


def told_by_size(analysis: Analysis, *labels: str | None) -> bool:
    """Were these names found from sizes alone, among sizes that coincide (``B = T = 4`` with no input
    named, and a seed chose between them)? Then which axis is which was a guess, and no finding rests on it."""
    clashing = {name for pair in analysis.size_choices for name in pair}
    return any(set(base_names(label)) & clashing for label in labels if label)


def index_axes(analysis: Analysis) -> list[Diagnostic]:
    """One finding per pick along another axis than the one its indices count."""
    out = []
    for pick in analysis.misindexed:
        if told_by_size(analysis, pick.picked, pick.count.label, pick.held_label):
            continue
        e = analysis.events[pick.event]
        x = e.inputs[0]
        picked = f"{pick.picked}, {analysis.namer.plain_role(pick.picked)}" if pick.picked and \
            analysis.namer.plain_role(pick.picked) else (pick.picked or "unnamed")
        role = analysis.namer.plain_role(pick.count.label)
        if pick.held < 0:
            out.append(_counted_from_elsewhere(e, pick))
            continue
        out.append(Kind.INDEX_WRONG_AXIS.found(e.index, (
            f"{e.op} #{e.index} picks along axis {pick.dim} ({picked}) of {fmt_named(x.dims, x.shape)} with indices "
            f"that count {pick.count.label} ({role}): {pick.count.op} made them along {pick.count.label}. Its "
            f"{role} axis is axis {pick.held} ({pick.held_label}), so the pick reorders other values by "
            f"positions of {pick.count.label}."),
            f"Pick along the axis the indices count: dim={pick.held} (e.g. torch.gather(x, dim={pick.held}, "
            "index=...))."))
    return out


def _counted_from_elsewhere(e, pick) -> Diagnostic:
    x = e.inputs[0]
    return Kind.INDEX_WRONG_AXIS.found(e.index, (
        f"{e.op} #{e.index} picks along axis {pick.dim} ({pick.picked}) of {fmt_named(x.dims, x.shape)} with indices "
        f"that count {pick.count.label}: {pick.count.op} made them along {pick.count.label}, positions counted from "
        f"that range's start, and {pick.picked} starts elsewhere on the same axis, so each index picks another token "
        "than the one chosen."),
        f"Add the start of the range the indices were made over (index + start), or pick from {pick.count.label} "
        "itself.")
