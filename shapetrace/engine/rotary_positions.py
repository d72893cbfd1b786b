"""Which position a decode step's rotation turns its one token by, and which it should (issue 33 item 3).

A rotary table of one position (a decode step's ``cos``/``sin`` of ``[1, d]``) shows no change along the
tokens, so its layout alone proves nothing about the positions (positions restarted at 0, or taken one
step off, turn the new token by another angle and raise nothing). Two facts, both exact, settle it:

* **the position it turns by**, from the values: another table of the same run that counts consecutive
  positions along its tokens (the prefill's) gives each frequency, ``w``, the angle of one step; the one
  position's angles are then ``p·w`` for one integer ``p`` on every feature, or no position is read
  (another set of frequencies: a scaled rotary; nothing is claimed);
* **the position it belongs at**, from where its token goes: a key joined after ``n`` cached entries along
  the tokens (``torch.cat([cache_k, k], dim=2)``) is position ``n``; a query that meets ``S`` keys in the
  attention product is the newest token, position ``S - 1``.

:func:`with_positions` adds both to each rotary of one position (:attr:`.rotary.Rotary.position`,
``expected``); :mod:`.value_checked` counts its table checked where they agree, and
:mod:`.rules.rotary` reports where they differ.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import torch

from shapetrace.engine.axes import root_axis
from shapetrace.engine.capture import OpRecord, PassRecord
from shapetrace.engine.op_args import Call
from shapetrace.engine.ops import Family
from shapetrace.engine.thawed import thaw_args

#: records followed forward from a rotated tensor to the join or the product that places its token
MAX_FOLLOW = 24
#: families of the ops a rotated tensor passes through on its way to a join or a product (one operand)
_PASSES = frozenset({Family.AXIS_ORDER, Family.RESHAPE, Family.CONTIGUOUS, Family.ELEMENTWISE, Family.NONE})
#: families of the ops that reorder a tensor's axes or copy it, every entry kept (a cache of keys transposed)
_MOVES = frozenset({Family.AXIS_ORDER, Family.CONTIGUOUS})


def with_positions(found: Sequence, records: Sequence, shapes: Sequence, outs: dict[int, int]) -> tuple:
    """``found`` (each :class:`~.rotary.Rotary` of a run) with the position of each rotation of one token
    read from its tables and the position its token belongs at. ``outs``: rotary index -> the node of its
    result."""
    frequencies = next((w for w in (_frequencies(r, shapes) for r in found) if w is not None), None)
    if frequencies is None:
        return tuple(found)
    history = _History(records, shapes, frozenset(outs.values()))
    out = list(found)
    for i, rotary in enumerate(found):
        if rotary.angles and not rotary.varies and i in outs:
            position = _position(rotary.angles, frequencies)
            placed = history.expected(outs[i], rotary.at) if position is not None else None
            if placed is not None:
                out[i] = replace(rotary, position=position, expected=placed[0], placed=placed[1:])
    return tuple(out)


def _frequencies(rotary, shapes) -> torch.Tensor | None:
    """Each feature's angle per position (``w``), from a table that counts consecutive positions along the
    one axis it changes along; None for any other table."""
    if not rotary.angles or len(rotary.varies) != 1 or rotary.rotated is None:
        return None
    rank = len(shapes[rotary.rotated].shape)
    rows = [_rows(t, rotary.varies[0] - (rank - t.dim())) for t in rotary.angles]
    if any(r is None for r in rows) or rows[0].shape != rows[1].shape or rows[0].shape[0] < 2:
        return None
    cos, sin = rows
    start = torch.atan2(sin[0], cos[0])                                      # (d,): the first position's angles
    w = torch.atan2(sin[1] * cos[0] - cos[1] * sin[0], cos[1] * cos[0] + sin[1] * sin[0])   # (d,): one step
    k = torch.arange(cos.shape[0], dtype=torch.float64)[:, None]             # (m, 1)
    return w if _close(torch.cos(start + k * w), cos) and _close(torch.sin(start + k * w), sin) else None


def _rows(table: torch.Tensor, axis: int) -> torch.Tensor | None:
    """The table's features at each entry of ``axis`` (at entry 0 of every other axis): ``(m, d)``."""
    if not 0 <= axis < table.dim() - 1:
        return None
    moved = table.double().movedim(axis, 0)
    return moved.reshape(moved.shape[0], -1, moved.shape[-1])[:, 0, :]


def _position(angles, w: torch.Tensor) -> int | None:
    """The one integer position whose angles ``p·w`` a table of one position holds on every feature."""
    cos, sin = _entries(angles)
    if cos.shape[-1] != w.shape[0] or not (_close(cos, cos[:1]) and _close(sin, sin[:1])):
        return None
    slow = [j for j in torch.argsort(w.abs()).tolist() if abs(w[j].item()) > 1e-6]
    if not slow:
        return None
    j = slow[0]
    position = round(math.atan2(sin[0, j].item(), cos[0, j].item()) / w[j].item())
    p = torch.tensor(float(position), dtype=torch.float64)
    return position if _close(torch.cos(p * w), cos[0]) and _close(torch.sin(p * w), sin[0]) else None


def one_position_per_token(angles) -> bool:
    """Whether the cos and sin tables turn each token by one position on every feature (angles ``p(t)·w_k``
    for one number ``p(t)`` per token: a 1-D rotary, whatever its positions). Read on the turn from each
    entry to the next (``(p(t+1) - p(t))·w_k``: proportional to ``w`` for a 1-D rotary, whatever the step),
    on the features whose every turn stays below half a radian, where none can have wrapped round. False for
    a rotary of two or three positions per token (Pixtral's and EVA's rows and columns, CogVideoX's time,
    height and width, in separate features): which grid position each token takes is then nowhere in what
    torch records (rows and columns swapped look as right). A turn that wrapped round to a small one reads as
    a second position (a ``?``, never a ``✓``). True where too few slow features move to tell."""
    if len(angles) != 2:
        return True
    cos, sin = _entries(angles)
    if cos.shape != sin.shape or cos.shape[0] < 2:
        return True
    turned = torch.atan2(sin, cos)                                            # (entries, d)
    steps = torch.remainder(turned[1:] - turned[:-1] + math.pi, 2 * math.pi) - math.pi   # (entries - 1, d)
    top = steps.abs().amax(0)
    slow = steps[:, (top < 0.5) & (top > 1e-6)].unique(dim=1)                 # (entries - 1, slow features)
    if slow.shape[1] < 2:
        return True
    values = torch.linalg.svdvals(slow)                                        # (one row of steps: rank 1)
    return len(values) < 2 or bool(values[1] <= 1e-3 * values[0])


def _entries(angles) -> tuple[torch.Tensor, ...]:
    """The cos and sin tables as ``(entries, d)``: every entry of every leading axis, in float64."""
    return tuple(t.double().reshape(-1, t.shape[-1]) for t in angles)


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape[-1] == b.shape[-1] and bool(((a - b).abs() <= 2e-3).all())


class _History:
    """Where a rotated token goes: the join that appends it to a cache, or the product that reads it as the
    newest query. A cache counts as the whole history only where it was made by joins of rotated keys alone
    (no slice: a sliding window or a trimmed cache holds fewer entries than its newest position)."""

    def __init__(self, records: Sequence, shapes: Sequence, rotated: frozenset[int]):
        self.records, self.shapes, self.rotated = records, shapes, rotated
        self.maker: dict[int, int] = {}
        for index, record in enumerate(records):
            for node in getattr(record, "outs", ()):
                self.maker.setdefault(node, index)

    def expected(self, node: int, at: int | None) -> tuple | None:
        """``(the position the rotated token belongs at, the axis of the rotated tensor that places it,
        how[, the record of the join that appends it, the join's axis])``; None where no whole history places
        it through ops that keep its shape or only reorder its axes (a rotation applied in ``(B, T, H, d)``
        before the ``transpose(1, 2)`` that the cache's join and the product read: tiny-llm's Qwen2), each
        tensor's axes followed back to the rotated tensor's own."""
        frames = {node: tuple(range(len(self.shapes[node].shape)))}   # node -> the rotated tensor's axis of each
        last = len(self.shapes[node].shape) - 1
        for index in range((at or 0) + 1, min((at or 0) + 1 + MAX_FOLLOW, len(self.records))):
            record = self.records[index]
            if type(record) not in (OpRecord, PassRecord) or not any(n in frames for n in record.ins):
                continue
            family = record.spec.family
            if family is Family.JOIN and self._rebuilds_features(record, frames, last):
                frames.update((o, frames[next(n for n in record.ins if n in frames)]) for o in record.outs)
                continue
            if family is Family.JOIN:
                return self._appended(record, frames, index)
            if family in (Family.FUSED_ATTENTION, Family.PRODUCT) and len(record.ins) >= 2 and \
                    record.ins[0] in frames:
                keys, frame = tuple(self.shapes[record.ins[1]].shape), frames[record.ins[0]]
                return self._newest(record.ins[1], keys[-2] if family is Family.FUSED_ATTENTION else keys[-1],
                                    frame[len(frame) - 2])
            inside = [n for n in record.ins if n in frames]
            if len(inside) != 1:
                continue
            frame = frames[inside[0]]
            order = _order(record, self.shapes) if family is Family.AXIS_ORDER else None
            if order is not None:
                frames.update((o, tuple(frame[i] for i in order)) for o in record.outs)
            elif family in _PASSES and family is not Family.AXIS_ORDER and \
                    all(tuple(self.shapes[o].shape) == tuple(self.shapes[inside[0]].shape) for o in record.outs):
                frames.update((o, frame) for o in record.outs)
        return None

    def _appended(self, record, frames: dict[int, tuple[int, ...]], index: int) -> tuple | None:
        """The entries a join of a whole history puts before the first of ``frames``' nodes, along its axis
        (that axis of the rotated tensor, the join's record, ``index``, and the join's own axis)."""
        dim = self._dim(record)
        if dim is None or not all(self._whole(n) for n in record.ins if n not in frames):
            return None
        before = 0
        for n in record.ins:
            if n in frames:
                return before, frames[n][dim], f"it is joined after {before} cached entries", index, dim
            before += self.shapes[n].shape[dim]
        return None

    def _newest(self, keys: int, seen: int, axis: int) -> tuple[int, int, str] | None:
        """The last position of the ``seen`` keys a product reads, where they are a whole history joined
        and as many as it holds (read back through one-operand ops: ``repeat_kv``'s widening included; a
        window cut from the history reads fewer keys and is no case)."""
        for _ in range(MAX_FOLLOW):
            record = self.records[self.maker[keys]] if keys in self.maker else None
            if record is None:
                return None
            if record.spec.family is Family.JOIN:
                dim = self._dim(record)
                if dim is None or self.shapes[keys].shape[dim] != seen or not self._whole(keys):
                    return None
                return seen - 1, axis, f"it is the newest of the {seen} keys it attends to"
            if len(record.ins) != 1:
                return None
            keys = record.ins[0]
        return None

    def _rebuilds_features(self, record, frames: dict[int, tuple[int, ...]], last: int) -> bool:
        """Does a join put the two halves of one rotation back together along the features (``cat([x1 * cos -
        x2 * sin, x2 * cos + x1 * sin], -1)``: ColossalAI's, tiny-llm's), the rotated tensor's last axis? Its
        tokens are the rotation's own, so it places none."""
        dim, inside = self._dim(record), [n for n in record.ins if n in frames]
        return dim is not None and len(inside) == 1 and frames[inside[0]][dim] == last

    def _whole(self, node: int) -> bool:
        """Made of rotated keys joined, with nothing cut away (their axes reordered or copied on the way: a
        key rotated in ``(B, T, H, d)`` and cached after ``transpose(1, 2)``; a join along the features that
        rebuilds a rotation from its halves counts as the rotation)."""
        stack, seen = [node], 0
        while stack and seen < 4 * MAX_FOLLOW:
            n, seen = stack.pop(), seen + 1
            if n in self.rotated:
                continue
            record = self.records[self.maker[n]] if n in self.maker else None
            if record is not None and record.spec.family in _MOVES and len(record.ins) == 1:
                stack.append(record.ins[0])   # (the rotated keys' axes reordered: every entry kept)
                continue
            if record is None or record.spec.family is not Family.JOIN:
                return False
            rank = len(self.shapes[n].shape)
            if self._dim(record) == rank - 1 and any(i in self.rotated for i in record.ins):
                continue
            stack.extend(record.ins)
        return not stack

    def _dim(self, record) -> int | None:
        args, kwargs = thaw_args(record.frozen)
        dim = kwargs.get("dim", args[1] if len(args) > 1 else 0)
        rank = len(self.shapes[record.ins[0]].shape)
        return dim % rank if type(dim) is int and -rank <= dim < rank else None



def _order(record, shapes: Sequence) -> tuple[int, ...] | None:
    """The axes of an axis-order op's one input, in the order its output holds them (``transpose(1, 2)`` of four
    axes: ``(0, 2, 1, 3)``), read as :mod:`.infer.backward` reads them: the op's own name rule run on markers
    (an unnamed root per input axis); None where the rule moves no whole axis to each place."""
    if record.spec.names is None or len(record.ins) != 1 or len(record.outs) != 1:
        return None
    shape = tuple(shapes[record.ins[0]].shape)
    markers = tuple(root_axis(f"#0.{i}", n) for i, n in enumerate(shape))
    args, kwargs = thaw_args(record.frozen)
    call = Call(record.spec.name, args, kwargs, [None], [markers], [tuple(shapes[record.outs[0]].shape)], None,
                getattr(record, "params", None) or {})
    try:
        out = record.spec.names(call)
    except (IndexError, KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError):
        return None
    axes = out[0] if isinstance(out, list) else out
    roots = [a.atoms[0].root if a is not None and len(a.atoms) == 1 else "" for a in axes or ()]
    order = tuple(int(r[3:]) for r in roots if r.startswith("#0.") and r[3:].isdigit())
    return order if sorted(order) == list(range(len(shape))) and len(order) == len(roots) else None


def turns_in_every_entry(tables, shape: tuple[int, ...], batch: Sequence[int], tokens: Sequence[int]) -> bool:
    """Whether tables of angles that change along batch axes as well as along the tokens (positions given per
    batch entry: a left-padded row's offset by its padding) turn along the tokens in every batch entry. False for
    positions counted along the batch (``mask.cumsum(0)``): an entry whose tokens all share one angle.

    >>> import torch
    >>> rows = torch.tensor([[0, 1, 2, 3], [0, 0, 0, 1]])[:, None, :, None] * torch.ones(2)   # (B, 1, T, d)
    >>> turns_in_every_entry([rows], (2, 3, 4, 2), [0], [2])
    True
    >>> turns_in_every_entry([torch.tensor([[0, 0, 0, 0], [0, 0, 1, 1]])[:, None, :, None] * torch.ones(2)],
    ...                      (2, 3, 4, 2), [0], [2])
    False
    """
    for table in tables:
        lead = len(shape) - table.dim()
        for b in batch:
            tb = b - lead
            if lead < 0 or tb < 0 or table.shape[tb] == 1:
                continue
            along = [t - lead - (t > b) for t in tokens if t - lead >= 0]
            for i in range(table.shape[tb]):
                entry = table.select(tb, i)
                if not any(entry.shape[a] > 1 and not bool((entry == entry.narrow(a, 0, 1)).all()) for a in along):
                    return False
    return True
