"""What moved between three runs of one model, read token by token: the dependency contracts' measurement
(:mod:`.dependencies`, :mod:`.padding`).

``probe`` is a :class:`.dependencies.Probe`: its output's batch and token axes (``out_batch``, ``out_tokens``)
and the traced output (``output``, whose dtype sets the tolerance).
"""

from __future__ import annotations

import math

import torch

#: a change counts when it exceeds this times (1 + the largest output)
TOLERANCE = {torch.float64: 1e-9, torch.float32: 1e-4}


def changes_of(alone, both, probe) -> tuple[list[list[bool]], list[list[bool]]]:
    """``(mixed, moved)``: ``mixed[b][t]``, does output token (b, t) differ between ``alone`` and
    ``folded`` (``both``'s first entry); ``moved[b][t]``, between ``folded`` and ``bumped`` (its second)
    (t: 0 where the output has no token axis). Read in one pass over the three (at small sizes each op's
    fixed cost is what the check costs), in four ops where no value is NaN."""
    quick = _token_changes(alone, both, probe)
    return quick if quick is not None else _all_changes(alone, both, probe)


def _all_changes(alone, both, probe) -> tuple[list[list[bool]], list[list[bool]]]:
    """:func:`_changes` read on every value (NaN included)."""
    folded, bumped = both.chunk(2, probe.out_batch)
    outs = tokens_last(torch.stack((alone, folded, bumped)), probe)              # (3, B, T, rest)
    tolerance = change_tolerance(probe, outs[:2])
    diff = (outs[1:] - outs[:-1]).abs()                                           # (2, B, T, rest)
    changed = (diff > tolerance).any(-1)                                           # (2, B, T)
    if bool(diff.isnan().any()):   # a token turned NaN changed too (one that was NaN already says nothing)
        changed |= diff.isnan().any(-1) & ~outs[:-1].isnan().any(-1)
    mixed, moved = changed.tolist()
    return mixed, moved


def change_tolerance(probe, values: torch.Tensor) -> float:
    """How far an output may move and count as unchanged: :data:`TOLERANCE` times (1 + its largest value)."""
    return TOLERANCE.get(probe.output.dtype, 1e-2) * (1 + float(values.abs().nan_to_num(0.0).amax()))


def _token_changes(alone, both, probe) -> tuple[list[list[bool]], list[list[bool]]] | None:
    """:func:`_changes` read on each token's largest change, the tolerance from ``alone``'s largest value
    (never above the full reading's); None where a value is NaN or the output has no token axis (read
    the full way: a token that turned NaN changed, one that was NaN already says nothing)."""
    batch, tokens = probe.out_batch, probe.out_tokens
    if tokens is None:
        return None
    rest = tuple(i for i in range(both.dim()) if i not in (batch, tokens))
    steps = both.diff(dim=batch, prepend=alone).abs_()                              # folded - alone, bumped - folded
    largest = steps.amax(dim=rest) if rest else steps                              # (2, T) or (T, 2)
    rows = (largest if batch < tokens else largest.T).tolist()                     # [[mixed by token], [moved ...]]
    tolerance = TOLERANCE.get(probe.output.dtype, 1e-2) * \
        (1 + float(torch.linalg.vector_norm(alone, float("inf"))))
    if math.isnan(tolerance) or any(math.isnan(v) for row in rows for v in row):
        return None
    mixed, moved = ([v > tolerance for v in row] for row in rows)
    return [mixed], [moved]


def tokens_last(outs: torch.Tensor, probe) -> torch.Tensor:
    """``outs`` (outputs stacked on a first axis) as (outputs, B, T, everything else): each one's batch
    axis first, its token axis (if any) second."""
    batch = probe.out_batch + 1
    if probe.out_tokens is None:
        return outs.movedim(batch, 1).reshape(outs.shape[0], outs.shape[batch], 1, -1)
    tokens = probe.out_tokens + 1
    if (batch, tokens) != (1, 2):
        outs = outs.movedim((batch, tokens), (1, 2))                               # (outputs, B, T, ...)
    return outs.reshape(*outs.shape[:3], -1)
