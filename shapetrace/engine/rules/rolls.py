"""Rolls not undone (part of ``diagnose.RULES``): tokens shifted round by ``torch.roll`` that meet the
same tokens unshifted (:mod:`shapetrace.engine.rolls` follows the shifts; this says where)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.kinds import Kind
from shapetrace.engine.rolls import piece_key, piece_of

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic


def rolls_not_undone(analysis: Analysis) -> list[Diagnostic]:
    """One error per roll still in effect where its tokens meet themselves unshifted, at the roll's row."""
    pieces: dict[int, dict[tuple, tuple[int, str]]] = {}
    for met in analysis.unrolled:
        if 0 <= met.roll < len(analysis.events):
            pieces.setdefault(met.roll, {}).setdefault(met.piece, (met.shift, met.op))
    out = []
    for roll, still in pieces.items():
        e = analysis.events[roll]
        flipped = [(e.inputs[0].dims[axis] or f"axis {axis}").replace("*", "·")
                   for axis in e.params.get("reversed") or ()
                   if piece_key(piece_of(e.inputs[0].axes, axis, e.index), True) in still]
        if flipped:
            out.append(_reversal_found(e, flipped, next(iter(still.values()))[1]))
            continue
        shifts = []
        for axis in e.params.get("rolled") or {}:
            key = piece_of(e.inputs[0].axes, axis, e.index)
            if key in still:
                size = e.inputs[0].shape[axis]
                shift = still[key][0] - size if still[key][0] > size // 2 else still[key][0]
                shifts.append(((e.inputs[0].dims[axis] or f"axis {axis}").replace("*", "·"), shift))
        if shifts:
            out.append(_found(e, shifts, next(iter(still.values()))[1]))
    return out


def _found(e, shifts: list[tuple[str, int]], op: str) -> Diagnostic:
    said = " and ".join(f"{label} by {shift:+d}" for label, shift in shifts)
    back = " and ".join(f"{label} by {-shift:+d}" for label, shift in shifts)
    return Kind.ROLL_NOT_UNDONE.found(e.index, (
        f"{e.op} #{e.index} shifts {said}, and nothing shifts them back before a later {op} lines the result "
        "up with the same tokens unshifted: each token meets another token's values. Torch sees equal shapes "
        "and says nothing."),
        f"Roll back ({back}) once the windows are put together again: torch.roll after window_reverse, as "
        "Swin's block does.")


def _reversal_found(e, flipped: list[str], op: str) -> Diagnostic:
    axes = " and ".join(flipped)
    return Kind.ROLL_NOT_UNDONE.found(e.index, (
        f"{e.op} #{e.index} reverses {axes}, and nothing reverses it back before a later {op} lines the result "
        f"up with the same tokens in their order: each entry meets the values of the one at the other end of "
        f"{axes}. Torch sees equal shapes and says nothing."),
        f"Flip back along the axis that was reversed once the reversed run is done (a backward recurrence's "
        f"states: flip them along the tokens, not along {axes} unless that is the axis its input was reversed "
        f"along).")
