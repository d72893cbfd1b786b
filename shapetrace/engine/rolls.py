"""Rolls not undone: tokens shifted round by ``torch.roll`` that meet the same tokens unshifted.

Swin's shifted windows roll the token grid by ``-s`` before the window attention and by ``+s`` after
it; a block that forgets the second roll adds, in its residual, token ``p`` of the input to what the
attention made for token ``p + s``. Every name is right (a roll keeps them), so no name rule sees it.

Where each tensor's elements came from is followed in call order from where they entered: a tensor
that entered the traced code (an input, a buffer; not a parameter, which holds no token) is its own
*origin*, in place. A roll adds its shift to the piece of the origin's axis it rolled (``T/6`` by -1,
named by the rolled axis's one atom), a roll back takes it off; every other op passes its operands'
shifts on. Where an op lines operands up by broadcasting (``shortcut + x``) and two of them came from
one origin with different shifts, and the shifted one went through an attention since (the windows
attended in the shifted frame), the rolls still in effect are reported: :class:`Unrolled`. A shift mixed
with its unshifted self at once (``x - torch.roll(x, 1, 1)``, a token shift) is meant, and not reported.
Nothing here reads sizes to decide. A roll of an axis made of several pieces, or of an unnamed one
(a roll back on windows put together wrongly: another finding's), ends the following of that origin:
no claim is made about it after that.

Reads: a capture's records (rows and calls without one), its node facts, and the events of the rows
(a roll's ``params["rolled"]``, its input's axes). Adds: the :class:`Unrolled` meetings, for
:mod:`.rules.rolls`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from shapetrace.engine.axes import MIXED_PREFIX, UNKNOWN
from shapetrace.engine.ops import is_recurrence
from shapetrace.engine.opspec import ATTENTION_FAMILIES, Family

#: ``{origin node: {(root, stride, size): (shift, roll event)}}``: how a tensor's elements are shifted (a
#: reversed piece: ``(root, stride, size, REVERSED)``, shift 1)
Shifts = dict[int, dict[tuple, tuple[int, int]]]
REVERSED = "reversed"


class Unrolled(NamedTuple):
    """Operands from one origin, lined up with different shifts: ``roll`` is the row of the roll still
    in effect in one of them, ``piece`` the piece it rolled, ``record`` the call that lined them up,
    ``shift`` how far that operand is still rolled along it."""

    roll: int
    piece: tuple
    record: int
    shift: int
    op: str


def unrolled_of(trace, event_of_record: Mapping[int, int]) -> tuple[Unrolled, ...]:
    """:func:`unrolled_meetings` of a trace's capture and events."""
    return unrolled_meetings(trace.capture.records, trace.capture.nodes, event_of_record, trace.events)


def unrolled_meetings(records: Sequence, nodes: Sequence, event_of_record: Mapping[int, int],
                      events: Sequence) -> tuple[Unrolled, ...]:
    """Every call that lines up operands of one origin shifted differently, in call order."""
    if not any(getattr(e, "params", None) and (e.params.get("rolled") or e.params.get("reversed")) for e in events):
        return ()   # (no roll nor flip took effect: nothing to follow)
    state: dict[int, Shifts] = {}
    attended: set[int] = set()   # nodes made through an attention (a softmax, a fused kernel) or from one
    found: list[Unrolled] = []
    for index, record in enumerate(records):
        if hasattr(record, "was"):   # shapetrace.name(t, ...): the same tensor under a new node
            if record.was is not None:
                state[record.node] = _shifts_of(state, nodes, record.was)
            continue
        ins = getattr(record, "ins", ())
        outs = getattr(record, "outs", ())
        operands = [_shifts_of(state, nodes, n) for n in ins]
        event = events[event_of_record[index]] if index in event_of_record else None
        lined_up = _lined_up(record, event)
        if len(ins) > 1 and lined_up is not None:
            through = [n in attended for n in ins]
            for clash in _clashes(operands, through, lined_up):
                found.append(Unrolled(*clash, index, _shift_of(clash, operands), record.spec.name))
        if _mixes_tokens(record.spec) or any(n in attended for n in ins):
            attended.update(outs)
        merged = _merged(operands)
        params = event.params if event is not None and event.params else {}
        if params.get("rolled") and event.inputs:
            merged = _rolled(merged, params["rolled"], event)
        if params.get("reversed") and event.inputs:
            merged = _reversed(merged, params["reversed"], event)
        for node in outs:
            if node not in ins:
                state[node] = merged
    return tuple(found)


def _shifts_of(state: dict[int, Shifts], nodes: Sequence, node: int) -> Shifts:
    if node in state:
        return state[node]
    facts = nodes[node] if 0 <= node < len(nodes) else None
    if facts is None or facts.parameter:
        return {}
    return {node: {}}   # it entered here, in place: its own origin


def _merged(operands: list[Shifts]) -> Shifts:
    """The operands' shifts passed on; an origin the operands hold shifted differently (a ``cat`` of a sequence
    and its mirror along the batch) is no longer followed: which entry of the result is which is not known."""
    out: Shifts = {}
    mixed: set[int] = set()
    for shifts in operands:
        for origin, pieces in shifts.items():
            if out.setdefault(origin, pieces) != pieces:
                mixed.add(origin)
    return {origin: pieces for origin, pieces in out.items() if origin not in mixed}


def _rolled(shifts: Shifts, rolled: Mapping[int, int], event) -> Shifts:
    axes = event.inputs[0].axes
    out: Shifts = {}
    for origin, pieces in shifts.items():
        moved = dict(pieces)
        if any(piece_of(axes, axis, event.index)[0] == "row" or piece_key(piece_of(axes, axis, event.index), True)
               in pieces for axis in rolled):
            continue   # a roll of an axis made of several pieces (or reversed): its tokens are not followed
        for axis, shift in rolled.items():
            key = piece_of(axes, axis, event.index)
            size = event.inputs[0].shape[axis]
            total = (moved.get(key, (0, event.index))[0] + shift) % size
            if total:
                moved[key] = (total, moved.get(key, (0, event.index))[1])
            else:
                moved.pop(key, None)
        out[origin] = moved
    return out


def piece_of(axes, axis: int, index: int) -> tuple:
    """The rolled axis as one piece of a root (``("T", 6, 4)``); an axis of several pieces, a mixed one or
    an unnamed one is ``("row", ...)``: not a piece of the tokens that can be followed."""
    atoms = axes[axis].atoms if 0 <= axis < len(axes) else ()
    if len(atoms) == 1 and atoms[0].root != UNKNOWN and not atoms[0].root.startswith(MIXED_PREFIX):
        a = atoms[0]
        return a.root, a.stride, a.size
    return "row", index, axis


def _mixes_tokens(spec) -> bool:
    """An attention (a softmax, a fused kernel) or a recurrence (``nn.GRU``/``nn.LSTM``/``nn.RNN``): an op
    whose outputs mix the tokens of the frame they were given."""
    return spec.family in ATTENTION_FAMILIES or is_recurrence(spec)


def _lined_up(record, event) -> frozenset | None:
    """The pieces a call does not line up (None where it lines up nothing): an op that broadcasts lines up
    every axis; a ``cat`` along one axis lines up the others (its joined axis's piece is left out)."""
    if record.spec.broadcasts:
        return frozenset()
    if record.spec.family is not Family.JOIN or record.spec.stacks or event is None or not event.inputs:
        return None
    dim = (event.params or {}).get("dim", 0)
    if not isinstance(dim, int):
        return None
    return frozenset(piece_key(piece_of(i.axes, dim % len(i.axes), event.index), flip) for i in event.inputs
                     if i.axes for flip in (False, True))


def piece_key(piece: tuple, reversal: bool) -> tuple:
    """A piece's key in :data:`Shifts`: the piece itself (rolled), or it marked :data:`REVERSED` (flipped)."""
    return (*piece, REVERSED) if reversal else piece


def _reversed(shifts: Shifts, flipped: Sequence[int], event) -> Shifts:
    """A flip along a piece toggles its reversal (flipped twice: in order again); a piece both rolled and
    reversed, or an axis of several pieces, ends the following of that origin (no claim after it)."""
    axes = event.inputs[0].axes
    out: Shifts = {}
    for origin, pieces in shifts.items():
        keys = [piece_of(axes, axis, event.index) for axis in flipped]
        if any(key[0] == "row" or key in pieces for key in keys):
            continue
        moved = dict(pieces)
        for key in keys:
            if moved.pop(piece_key(key, True), None) is None:
                moved[piece_key(key, True)] = (1, event.index)
        out[origin] = moved
    return out


def _clashes(operands: list[Shifts], through: list[bool], apart: frozenset = frozenset()) -> list[tuple[int, tuple]]:
    """``(roll event, rolled piece)`` of each shift that one operand has and another from its origin has not
    (the first pair of operands that differ), where the shifted one went through an attention: tokens
    shifted on purpose and mixed with their neighbours at once (``x - torch.roll(x, 1, 1)``, a token
    shift) are not this. ``apart``: pieces the call does not line up (a ``cat``'s joined axis)."""
    for i, a in enumerate(operands):
        for k, b in enumerate(operands[i + 1:], start=i + 1):
            for origin in a.keys() & b.keys():
                extra = [(key, roll, through[i]) for key, (_, roll) in a[origin].items() - b[origin].items()
                         if key not in apart]
                extra += [(key, roll, through[k]) for key, (_, roll) in b[origin].items() - a[origin].items()
                          if key not in apart]
                if extra and all(attended for _, _, attended in extra):
                    return sorted((roll, key) for key, roll, _ in extra)
    return []


def _shift_of(clash, operands) -> int:
    roll, key = clash
    for shifts in operands:
        for pieces in shifts.values():
            if key in pieces and pieces[key][1] == roll:
                return pieces[key][0]
    return 0
