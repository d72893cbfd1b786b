"""Findings on library code, said at the user's call (:mod:`..library` says which ops ran inside it).

Torch's ``multi_head_attention_forward`` fed ``[B, T, D]`` without ``batch_first=True`` shows a warning at
its own ``view`` and an error at its own ``bmm``: one bug, made by the user's call, that no edit of those
lines fixes. So the findings inside one library call fold into one (the most severe, then the one that
explains most), its message says which call of the user's reached the op, its fix is the one at that call
(for an installed package, not known to be right, then the rule's own fix, for the package), and the other
ops where it shows are listed under it. Notes are left as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from shapetrace.engine.diagnostic import SEVERITY_ORDER
from shapetrace.engine.kinds import Kind
from shapetrace.engine.rules.causes import seen_at

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic


def at_the_users_call(analysis: Analysis, found: Sequence[Diagnostic]) -> list[Diagnostic]:
    """``found`` with the loud findings inside each library call folded into one, worded at the user's call."""
    if not analysis.inside:
        return list(found)
    groups: dict[tuple, list[Diagnostic]] = {}
    for d in found:
        inside = analysis.inside.get(d.event) if d.event is not None and d.severity != "note" else None
        if inside is not None:
            groups.setdefault(inside.call, []).append(d)
    worded = {id(members[0]): _worded(analysis, members) for members in groups.values()}
    folded = {id(d) for members in groups.values() for d in members}
    return [worded.get(id(d), d) for d in found if id(d) in worded or id(d) not in folded]


def _worded(analysis: Analysis, members: Sequence[Diagnostic]) -> Diagnostic:
    """The one finding of a library call: its best member, said at the user's call, with the rest listed."""
    best = min(members, key=lambda d: (SEVERITY_ORDER[d.severity], -Kind(d.kind).rank, d.event))
    inside = analysis.inside[best.event]
    e = analysis.events[best.event]
    others = sorted({i for d in members for i in (d.event, *d.also)} - {best.event})
    op = f"{e.op} #{e.index}"
    said = f"it {best.message.removeprefix(op + ' ')}" if best.message.startswith(op + " ") else best.message
    message = f"{op} runs inside {inside.what}, called by your code at {inside.caller}: {said}"
    unlisted = [i for i in others if i not in best.also]   # (best's message lists its own)
    if unlisted:
        message = f"{message} {seen_at(unlisted, {i: analysis.events[i].op for i in unlisted})}"
    return replace(best, message=message, fix=inside.fix_of(best.fix), also=tuple(others))
