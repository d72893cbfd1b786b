"""One finding per bug, at its source: the findings that share a root cause fold into one.

A wrong layout is made once (a ``view`` that mixes tokens, a ``repeat`` that tiles the kv heads) and then
shows at every op that reads it: a projection over mixed tokens, two matmuls over tiled heads. Each rule
says what its finding *blames* (``Diagnostic.blame``: which axes of which operands); this module traces
each blamed axis back through the ops that made its operand (``Event.sources``) to the op whose result
first holds that arrangement of elements (its atoms) while none of its inputs did: the op that made the
layout. Then, in order:

1. **Explained**: a finding is dropped when one that explains more (``Kind.rank``: a cause over an effect
   over a symptom) was seen at the same op and blames a layout made by the same op (``gqa-head-order``
   explains the ``batch-mismatch`` of the same matmul; which operand was wrong, only it can tell).
2. **One root cause, one finding**: findings whose blamed layouts all come from one line of code (or,
   where the blamed axis came in with the input, findings of one kind in one function blaming the same
   axis: a transpose that put the tokens among the batch axes shows at both products) are one bug. The one
   that explains most is kept, reported at the op that made the layout, and the other places the bug
   shows are listed under it ("Also seen at #12 matmul, #14 matmul.").

Notes are never folded: they say something else than the bug.

A finding measured on the values (:mod:`..dependencies`, :mod:`..heads`) is a second witness of a bug a
rule may have found already: :func:`with_witnesses` folds it into the first error a rule found among the
events it speaks of, as that error's evidence ("On the values: ..."), and keeps it as a finding of its own
where no rule's error is there.

>>> from shapetrace.engine.diagnostic import Diagnostic
>>> seen_at([12, 14], {12: "matmul", 14: "matmul"})
'Also seen at #12 matmul, #14 matmul.'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from shapetrace.engine.axes import MIXED_PREFIX
from shapetrace.engine.diagnostic import SEVERITY_ORDER
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family, family_of

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.axes import Atom, Axis
    from shapetrace.engine.diagnostic import Diagnostic
    from shapetrace.engine.events import Event, TensorInfo

#: an op left unknown (the blamed axis came in with an input)
ENTERED = None


def one_per_bug(analysis: Analysis, found: Sequence[Diagnostic]) -> list[Diagnostic]:
    """The findings with every group that shares a root cause folded into one (notes untouched)."""
    loud = [d for d in found if d.severity != "note" and d.event is not None and d.blame]
    if not loud:
        return list(found)
    made = {id(d): layouts_made_at(analysis, d) for d in loud}
    kept = [d for d in loud if not _explained(d, loud, made)]
    folded = _folded(analysis, kept, made)   # {id of a group's first finding: the group's one finding}
    folding = {id(d) for d in loud}
    return [folded.get(id(d), d) for d in found if id(d) in folded or id(d) not in folding]


def layouts_made_at(analysis: Analysis, d: Diagnostic) -> frozenset[int | None]:
    """The ops that made the layouts ``d`` blames (``ENTERED`` for an axis that came in with an input)."""
    e = analysis.events[d.event]
    return frozenset(made_at(analysis, e, operand, axis) for operand, axis in d.blame)


def made_at(analysis: Analysis, e: Event, operand: int, axis: int) -> int | None:
    """The op whose result first holds the arrangement of axis ``axis`` of operand ``operand`` of ``e``
    (``-1``: its first result) while none of its inputs did, found by walking back the ops that made
    each operand; ``ENTERED`` when the arrangement came in with an input."""
    info = _operand(e, operand)
    if info is None or axis >= len(info.axes):
        return ENTERED
    atoms = suspect_atoms(info.axes[axis])
    if not atoms:
        return ENTERED
    if operand == -1:
        if not any(holds(t, atoms) for t in e.inputs):
            return e.index
        operand = next(i for i, t in enumerate(e.inputs) if holds(t, atoms))
    return _walk_back(analysis, e, operand, atoms)


def _walk_back(analysis: Analysis, e: Event, operand: int, atoms: tuple[Atom, ...]) -> int | None:
    for _ in range(len(analysis.events)):
        source = e.sources[operand] if operand < len(e.sources) else None
        if source is None or source[0] >= len(analysis.events):
            return ENTERED
        maker = analysis.events[source[0]]
        made = maker.outputs[source[1]] if source[1] < len(maker.outputs) else None
        if made is None or made.axes != e.inputs[operand].axes:
            return ENTERED   # (a table renumbered after a filter: never name an op that did not make it)
        e = maker
        inside = [i for i, t in enumerate(e.inputs) if holds(t, atoms)]
        if not inside:
            part = _main_part(e, atoms)
            if part is None:
                return e.index
            operand, atoms = part
            continue
        operand = inside[0]
    return ENTERED


def _main_part(e: Event, atoms: tuple[Atom, ...]) -> tuple[int, tuple[Atom, ...]] | None:
    """A join (``cat``) makes its joined axis from its parts' axes: the layout along it is the one of
    its largest part (a class token joined to patches keeps the patches' layout), so the walk goes on
    there, ``(input, that axis's atoms)``; None for any other op, which made the layout itself."""
    if family_of(e.op) is not Family.JOIN or not e.outputs:
        return None
    axis = next((j for j, a in enumerate(e.outputs[0].axes) if holds(_alone(a), atoms)), None)
    parts = [(t.shape[axis], i) for i, t in enumerate(e.inputs)
             if axis is not None and len(t.axes) == len(e.outputs[0].axes) > axis]
    if not parts:
        return None
    _, i = max(parts)
    found = suspect_atoms(e.inputs[i].axes[axis])
    return (i, found) if found else None


class _alone:
    """One axis seen as a tensor of its own (what :func:`holds` reads)."""

    def __init__(self, axis: Axis):
        self.axes = (axis,)


def _operand(e: Event, operand: int) -> TensorInfo | None:
    if operand == -1:
        return e.outputs[0] if e.outputs else None
    return e.inputs[operand] if operand < len(e.inputs) else None


def suspect_atoms(axis: Axis) -> tuple[Atom, ...]:
    """What makes an axis what it is: its mixed pieces where it has any (a merge of a mixed axis with a
    plain one keeps the mix it was given), else its pieces of more than one entry, in order."""
    mixed = tuple(a for a in axis.atoms if a.root.startswith(MIXED_PREFIX) and a.size > 1)
    return mixed[:1] if mixed else tuple(a for a in axis.atoms if a.size > 1)


def holds(info: TensorInfo, atoms: tuple[Atom, ...]) -> bool:
    """Does one axis of ``info`` hold ``atoms`` next to each other, in this order? A mixed piece is held by any
    piece of the same mix (gpt-neox's ``[!T·B·H, ...]`` viewed on into ``!T·B·H/4`` and ``!T·B·H/2``: one mix,
    made where its root was)."""
    n = len(atoms)
    if n == 1 and atoms[0].root.startswith(MIXED_PREFIX):
        return any(a.root == atoms[0].root for axis in info.axes for a in axis.atoms)
    for axis in info.axes:
        pieces = tuple(a for a in axis.atoms if a.size > 1)
        if any(pieces[i:i + n] == atoms for i in range(len(pieces) - n + 1)):
            return True
    return False


def _seen(d: Diagnostic) -> set[int]:
    return {d.event, *d.also}


def _explained(d: Diagnostic, loud: Sequence[Diagnostic], made: dict[int, frozenset]) -> bool:
    """Does another finding that explains more, seen at the same op, blame a layout made by the same op?"""
    rank = Kind(d.kind).rank
    return any(Kind(x.kind).rank > rank and d.event in _seen(x) and (made[id(x)] & made[id(d)]) - {ENTERED}
               for x in loud if x is not d)


def _root(analysis: Analysis, d: Diagnostic, made: dict[int, frozenset]) -> tuple:
    """The key of ``d``'s root cause: the line of code that made every layout it blames (q, k and v are
    split on one line: one bug), else its kind and the axes it blames (a layout that came in with the
    input, or one that several ops made)."""
    ops = made[id(d)]
    if len(ops) == 1 and ENTERED not in ops:
        op = analysis.events[next(iter(ops))]
        return ("made at", op.source or op.index)
    e = analysis.events[d.event]
    return ("kind", d.kind, e.function, tuple(_blamed_atoms(e, d)))


def _blamed_atoms(e: Event, d: Diagnostic):
    """The atoms of each axis ``d`` blames (what it blames, wherever that axis sits in its operand)."""
    for operand, axis in d.blame:
        info = _operand(e, operand)
        yield info.axes[axis].atoms if info is not None and axis < len(info.axes) else ()


def _folded(analysis: Analysis, kept: Sequence[Diagnostic], made: dict[int, frozenset]) -> dict[int, Diagnostic]:
    """One finding per root cause, at the op that made the layout, naming the other places it shows, keyed
    by the id of the group's first finding (so it keeps that one's place)."""
    groups: dict[tuple, list[Diagnostic]] = {}
    for d in kept:
        groups.setdefault(_root(analysis, d, made), []).append(d)
    out = {}
    for key, members in groups.items():
        source = min(next(iter(made[id(d)])) for d in members) if key[0] == "made at" else None
        best = min(members, key=lambda x: (SEVERITY_ORDER[x.severity], -Kind(x.kind).rank,
                                           x.event != source, x.event))
        out[id(members[0])] = _at_source(analysis, best, source, members)
    return out


def _at_source(analysis: Analysis, best: Diagnostic, source: int | None,
               members: Sequence[Diagnostic]) -> Diagnostic:
    """``best``, moved to the op that made the layout, with the other places the bug shows under it."""
    where = best.event if source is None else source
    line = analysis.events[where].source
    others = sorted(i for i in {i for d in members for i in _seen(d)} - {where}
                    if not line or analysis.events[i].source != line)   # (k and v made on q's line: the same)
    message = best.message
    listed = [i for i in others if i != best.event and not re.search(rf"#{i}\b", message)]   # (not named in it)
    if where != best.event and where not in best.also:   # a message about the op that shows the bug
        made = analysis.events[where]
        message = f"The layout is made by {made.op} #{made.index}: {message}"
    if listed:
        message = f"{message} {seen_at(listed, {i: analysis.events[i].op for i in listed})}"
    return replace(best, event=where, message=message, also=tuple(others))


def seen_at(events: Sequence[int], ops: dict[int, str], limit: int = 6) -> str:
    """``Also seen at #12 matmul, #14 matmul.`` (the first ``limit`` of them, then how many more)."""
    shown = ", ".join(f"#{i} {ops[i]}" for i in events[:limit])
    more = f" and {len(events) - limit} more" if len(events) > limit else ""
    return f"Also seen at {shown}{more}."


#: how a finding measured on the values begins (its first sentence, less this, is the evidence)
MEASURED = "measured on the values: "


def with_witnesses(found: Sequence[Diagnostic], measured: Sequence[Diagnostic]) -> list[Diagnostic]:
    """``found`` (the rules' findings) with each finding ``measured`` on the values folded into the
    first error found among the events it speaks of (``Diagnostic.span``; None: anywhere in the run),
    its first sentence appended as evidence; a witness with no such error stays a finding of its own.

    >>> from shapetrace.engine.diagnostic import Diagnostic
    >>> rule = Diagnostic("error", "mixed-axis", 13, "view #13 mixes heads with tokens.")
    >>> value = Diagnostic("error", "heads-mix", None, "measured on the values: head 0 leaks. More.", span=(2, 13))
    >>> [d.message for d in with_witnesses([rule], [value])]
    ['view #13 mixes heads with tokens. On the values: head 0 leaks.']
    """
    out = list(found)
    for witness in measured:
        # a finding that says the values' contract breaks by design explains the witness first (DeepViT's heads
        # mixed by a learned matrix: the heads talking is its evidence, not that of another error in the span)
        host = next((i for i, d in enumerate(out) if d.kind in _BY_DESIGN.get(witness.kind, ())
                     and d.event is not None and _within(d, witness.span)), None)
        if host is None:
            host = next((i for i, d in enumerate(out) if d.severity == "error" and d.event is not None
                         and _within(d, witness.span)), None)
        if host is None:
            out.append(witness)
        else:
            out[host] = replace(out[host], message=f"{out[host].message} On the values: {_evidence(witness)}")
    return out


#: a witness kind -> the kinds of findings that say its contract breaks by design (it folds into them)
_BY_DESIGN = {Kind.HEADS_TALK: (Kind.HEADS_MIXED_BY_MATRIX,)}


def _within(d: Diagnostic, span: tuple[int, int] | None) -> bool:
    """Is ``d`` found, or also seen, among the events of ``span`` (None: anywhere)?"""
    return span is None or any(span[0] <= i <= span[1] for i in (d.event, *d.also))


def _evidence(witness: Diagnostic) -> str:
    """The witness's first sentence, without "measured on the values: "."""
    text = witness.message.removeprefix(MEASURED)
    end = text.find(". ")
    return text if end < 0 else text[:end + 1]
