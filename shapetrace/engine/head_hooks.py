"""The heads contract at module boundaries: the measuring forward without a TorchFunctionMode.

:mod:`.heads` moves the heads at each split and reads them at the merge through a mode that meets
every call of the forward again, and copies the whole batch once per head. Where the trace proves
three facts about an attention, plain module wrappers do the same work for less:

* each split is a reshape of its operand's last axis into heads (``view(B, T, H, d_k)``), so moving
  head ``h`` after the split is moving the features the split sends to head ``h`` before it;
* each split's operand is the output of a submodule of its own (``w_q``), read by the split alone,
  and the split reads its batch size from that operand (``B, T, D = x.shape``; or -1), so copies
  appended on the batch axis of the submodule's output travel through the split as entries;
* the merge's result is the first input of a submodule (``w_o``), read by it alone.

Then, in the measuring forward, each producing submodule's output gets one copy of batch entry 0 per
query head appended, copy ``j`` with the features of head ``j`` (its key/value group's head for keys
and values) moved in a random direction; the consuming submodule keeps what reached it and hands its
module the original entries only, so the rest of the model runs at the measuring batch. Every copy is
compared with entry 0 in one vectorised pass. This way is used only where every contract held: any
finding, any guard that fails, any doubt, and :mod:`.dependencies` measures again the full way
(:mod:`.heads`), so findings and their words come from one place. Plain data out.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import torch

from shapetrace.engine.capture import OpRecord
from shapetrace.engine.heads import HeadsPlan, NotMeasured
from shapetrace.engine.ops import Family
from shapetrace.engine.sizes import SizeOf

#: a change counts when it exceeds this times (1 + the largest value), as in :mod:`.heads`
_TOLERANCE = {torch.float64: 1e-9, torch.float32: 1e-4}


@dataclass(frozen=True, eq=False)
class Producer:
    """A split's operand as the submodule at ``path`` returns it: its traced shape, its batch axis, the
    tensor it makes (``"q"``...), that split's head count, and the stride of its heads axis in the last
    axis (feature ``f`` goes to head ``(f // stride) % heads``: the split is a reshape)."""

    path: str
    shape: tuple
    batch: int
    tensor: str
    heads: int
    stride: int


@dataclass(frozen=True)
class Consumer:
    """The merge's result as the submodule at ``path`` receives it: its traced shape and batch axis."""

    path: str
    shape: tuple
    batch: int


@dataclass(frozen=True, eq=False)
class Hooks:
    """One attention's producers, its consumer, its query heads, and how to read the merge's result
    head by head (with the query split's map: the merge must undo it)."""

    producers: tuple[Producer, ...]
    consumer: Consumer
    heads: int
    order: torch.Tensor | None   # the merge's features sorted by head, where they are not already
    allowed: torch.Tensor        # (copies, heads): copy j moved the heads output head h reads


def points(records, nodes, span: tuple[int, int], path_of, plans: tuple[HeadsPlan, ...]) -> tuple[Hooks, ...]:
    """Where each attention of ``plans`` can be measured at module boundaries; () where any cannot
    (``records``, ``nodes``: the capture's; ``span``: the top call's records; ``path_of(slot)``: a module
    slot's path under the top module, "" for the top module itself)."""
    found = []
    for plan in plans:
        hooks = _hooks(records, nodes, span, path_of, plan)
        if hooks is None:
            return ()
        found.append(hooks)
    paths = [p.path for h in found for p in h.producers] + [h.consumer.path for h in found]
    return tuple(found) if len(set(paths)) == len(paths) else ()   # (one wrapper per submodule)


def _hooks(records, nodes, span, path_of, plan: HeadsPlan) -> Hooks | None:
    producers = tuple(_producer(records, nodes, span, path_of, s) for s in plan.splits)
    consumer = _consumer(records, nodes, span, path_of, plan)
    if consumer is None or any(p is None for p in producers):
        return None
    query = next((p for p in producers if p.tensor in ("q", "")), None)
    if query is None or tuple(query.shape[:-1]) != tuple(consumer.shape[:-1]) or query.batch != consumer.batch:
        return None
    width = consumer.shape[-1]
    if query.heads != plan.heads or width > query.shape[-1]:
        return None
    order = None if width == query.stride * plan.heads else _order(query, width)   # (side by side already)
    if order is False:
        return None
    return Hooks(producers, consumer, plan.heads, order, _allowed(producers, plan.heads))


def _producer(records, nodes, span, path_of, split) -> Producer | None:
    """The submodule whose output ``split`` reshapes into heads (None: not proven)."""
    record = records[split.record] if 0 <= split.record < len(records) else None
    if type(record) is not OpRecord or record.spec.family is not Family.RESHAPE or not record.ins or not record.outs:
        return None
    operand, before, after = record.ins[0], nodes[record.ins[0]].shape, nodes[record.outs[0]].shape
    keep = len(before) - 1
    if not (keep >= 1 and split.batch_axis < keep <= split.heads_axis and tuple(after[:keep]) == tuple(before[:keep])
            and math.prod(after[keep:]) == before[-1]):
        return None
    if not _batch_read_from(record.frozen, len(after), split.batch_axis, operand):
        return None
    made = _made_by(records, span, split.record, operand)
    if made is None or _readers(records, span, operand) != [split.record]:
        return None
    path = path_of(records[made].module) if records[made].module != record.module else ""
    if not path:
        return None
    stride = math.prod(after[split.heads_axis + 1:])
    return Producer(path, tuple(before), split.batch_axis, split.tensor, split.heads, stride)


def _consumer(records, nodes, span, path_of, plan: HeadsPlan) -> Consumer | None:
    """The submodule whose first input is the merge's result (None: not proven)."""
    merge = records[plan.merge_record] if 0 <= plan.merge_record < len(records) else None
    if type(merge) is not OpRecord or not merge.outs or plan.merge_out_batch is None:
        return None
    result = merge.outs[0]
    readers = _readers(records, span, result)
    if len(readers) != 1:
        return None
    reader = records[readers[0]]
    slot = reader.module
    if slot == merge.module or any(getattr(records[r], "module", None) == slot
                                   for r in range(plan.merge_record + 1, readers[0])):
        return None   # (the submodule ran an op before it read the merge's result)
    path = path_of(slot) if slot >= 0 else ""
    return Consumer(path, tuple(nodes[result].shape), plan.merge_out_batch) if path else None


def _batch_read_from(frozen, rank: int, batch: int, operand: int) -> bool:
    """Does the split's shape argument take its batch size from its own operand (``B, T, D = x.shape``)
    or leave it to torch (-1)? A batch size read elsewhere would not grow with the copies."""
    args, kwargs = frozen
    shape = args[1:]
    if len(shape) == 1 and isinstance(shape[0], tuple):
        shape = tuple(shape[0])
    if kwargs or len(shape) != rank:
        return False
    size = shape[batch]
    if type(size) is int:
        return size == -1
    return isinstance(size, SizeOf) and size.node == operand and size.axis == batch


def _made_by(records, span, before: int, node: int) -> int | None:
    """The last record before ``before`` that made ``node``."""
    for r in range(before - 1, span[0] - 1, -1):
        if node in getattr(records[r], "outs", ()):   # (a declaration makes a node of its own: not followed)
            return r
    return None


def _readers(records, span, node: int) -> list[int]:
    """The records of the top call that read ``node``."""
    return [r for r in range(*span) if node in getattr(records[r], "ins", ())]


def _feature_heads(p: Producer, width: int) -> torch.Tensor:
    """The head each of the first ``width`` features of ``p``'s output goes to."""
    return torch.arange(width) // p.stride % p.heads                                # (width,)


def _order(query: Producer, width: int) -> torch.Tensor | bool:
    """The merge's features sorted by head (the split is no ``(..., H, d)`` reshape: ``(..., d, H)``, or
    a wider fused operand cut); False where the heads are not there equally often."""
    heads = _feature_heads(query, width)
    counts = torch.bincount(heads, minlength=query.heads)
    if not bool((counts == counts[0]).all()):
        return False
    return torch.sort(heads, stable=True).indices


class Run:
    """One measuring forward with every attention's copies made and read at module boundaries; after
    it, :attr:`held` says whether the heads stayed apart in every attention (False: measure again the
    full way)."""

    def __init__(self, module, hooks: tuple[Hooks, ...], batch: int):
        self.module, self.hooks, self.batch = module, hooks, batch   # (batch: the input's batch axis)
        self.held = False
        self.read: dict[int, torch.Tensor] = {}
        self.entries = 0

    def forward(self, run, x: torch.Tensor):
        """``run(x)`` with the wrappers in place; raises :class:`NotMeasured` where a guard fails."""
        self.entries = x.shape[self.batch]
        installed = []
        try:
            for i, h in enumerate(self.hooks):
                for p in h.producers:
                    installed.append(_wrap(self.module, p.path, self._producing(h, p)))
                installed.append(_wrap(self.module, h.consumer.path, self._consuming(i, h)))
            result = run(x)
        finally:
            for sub in installed:
                del sub.__dict__["forward"]
        self.held = len(self.read) == len(self.hooks) and all(
            _apart(h, self.read[i], self.entries) for i, h in enumerate(self.hooks))
        return result

    def _producing(self, hooks: Hooks, p: Producer):
        calls = []

        def moved(original, *args, **kwargs):
            out = original(*args, **kwargs)
            calls.append(1)
            if len(calls) > 1 or not _shaped(out, p.shape, p.batch, self.entries):
                raise NotMeasured("heads (a projection ran twice or returned another shape)")
            return _with_copies(out, p, hooks.heads)
        return moved

    def _consuming(self, i: int, hooks: Hooks):
        c, copies = hooks.consumer, hooks.heads

        def kept(original, x, *args, **kwargs):
            if i in self.read or not _shaped(x, c.shape, c.batch, self.entries + copies):
                raise NotMeasured("heads (the merge's result did not carry the copies)")
            self.read[i] = x
            return original(x.narrow(c.batch, 0, self.entries), *args, **kwargs)
        return kept


def _wrap(module, path: str, wrapper) -> Any:
    """Put ``wrapper(original, *args)`` in front of the submodule at ``path``'s forward (an instance
    attribute: module hooks would send every call down torch's slow path)."""
    sub = module.get_submodule(path)
    if "forward" in sub.__dict__:
        raise NotMeasured("heads (a submodule's forward is already replaced)")
    original = sub.forward
    sub.__dict__["forward"] = lambda *args, **kwargs: wrapper(original, *args, **kwargs)
    return sub


def _shaped(t, traced: tuple, batch: int, entries: int) -> bool:
    """Is ``t`` a floating-point tensor of the traced shape with ``entries`` on its batch axis?"""
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.dim() == len(traced) and \
        t.shape[batch] == entries and all(n == m for i, (n, m) in enumerate(zip(t.shape, traced)) if i != batch)


#: unit random moves, made once per shape, dtype and device (a few; masked per split)
_NOISE: dict[tuple, torch.Tensor] = {}


def _with_copies(out: torch.Tensor, p: Producer, query_heads: int) -> torch.Tensor:
    """``out`` with one copy of its entry 0 per query head appended on the batch axis, copy ``j`` with
    the features of this split's head ``j * heads // query_heads`` moved by a tenth of ``out``'s largest
    value (not more: a saturated softmax would hide it)."""
    first = _batch_first(out.narrow(p.batch, 0, 1), p.batch)                       # (1, ..., features)
    unit = _unit_moves(p, query_heads, tuple(first.shape[1:]), first.dtype, first.device)   # (copies, ..., features)
    scale = 0.1 * (1.0 + float(out.abs().amax()))                                  # (the largest |value|)
    copies = torch.add(first, unit, alpha=scale)                                   # (copies, ..., features)
    return torch.cat([out, copies if p.batch == 0 else copies.movedim(0, p.batch)], p.batch)   # (entries + copies, ...)


def _batch_first(t: torch.Tensor, axis: int) -> torch.Tensor:
    return t if axis == 0 else t.movedim(axis, 0)


#: each copy's unit move, by shape, dtype, device and the split's layout (a few)
_MOVES: dict[tuple, torch.Tensor] = {}


def _unit_moves(p: Producer, query_heads: int, shape: tuple, dtype, device) -> torch.Tensor:
    """Copy ``j``'s unit move: random on the features of the head it moves, zero elsewhere."""
    key = (shape, dtype, device, p.heads, p.stride, query_heads)
    unit = _MOVES.get(key)
    if unit is None:
        moved = torch.arange(query_heads) * p.heads // query_heads                  # (copies,) the head each moves
        mask = (_feature_heads(p, shape[-1])[None, :] == moved[:, None]).to(dtype)  # (copies, features)
        unit = _noise((query_heads, *shape), dtype, device) * \
            mask.reshape(query_heads, *[1] * (len(shape) - 1), -1).to(device)       # (copies, ..., features)
        if len(_MOVES) < 16:
            _MOVES[key] = unit
    return unit


def _noise(shape: tuple, dtype, device) -> torch.Tensor:
    key = (shape, dtype, device)
    noise = _NOISE.get(key)
    if noise is None:
        noise = torch.randn(shape, generator=torch.Generator().manual_seed(1), dtype=dtype).to(device)
        if len(_NOISE) < 16:
            _NOISE[key] = noise
    return noise


def _apart(hooks: Hooks, merged: torch.Tensor, entries: int) -> bool:
    """Did the heads stay apart, read from the merge's result (the measuring entries, then one copy per
    query head)? Every copy ``j`` changed output head ``j``; and a block of output head ``h`` (its
    features at one position) changed only with copies that moved, in every split, the head ``h``
    reads, and with copy ``h`` (the same rules :func:`.heads.leaks` and :func:`.heads.regrouped` read
    one head at a time, here in one vectorised pass)."""
    axis, heads = hooks.consumer.batch, hooks.heads
    base = _batch_first(merged.narrow(axis, 0, 1), axis)                           # (1, ..., features)
    copies = _batch_first(merged.narrow(axis, entries, heads), axis)               # (copies, ..., features)
    tolerance = _TOLERANCE.get(base.dtype, 1e-2) * (1 + float(base.abs().nan_to_num(0.0).amax()))
    diff = (copies - base).abs_().nan_to_num_(0.0)                                 # (copies, ..., features)
    if hooks.order is not None:   # (each head's features side by side)
        diff = diff.index_select(-1, hooks.order.to(diff.device))
    changed = diff.reshape(heads, -1, heads, diff.shape[-1] // heads).amax(-1) > tolerance   # (copies, rows, heads)
    own = changed.diagonal(dim1=0, dim2=2)                                         # (rows, heads): copy h, head h
    allowed = hooks.allowed.to(changed.device)                                     # (copies, heads)
    strays = changed & ~(own.unsqueeze(0) & allowed.unsqueeze(1))                  # (copies, rows, heads)
    return bool(own.any(0).all()) and not bool(strays.any())


def _allowed(producers: tuple[Producer, ...], query_heads: int) -> torch.Tensor:
    """``allowed[j, h]``: copy ``j`` moved, in every split, the head output head ``h`` reads."""
    return _allowed_for(query_heads, tuple(p.heads for p in producers))


@functools.lru_cache(maxsize=16)
def _allowed_for(query_heads: int, split_heads: tuple[int, ...]) -> torch.Tensor:
    groups = [tuple(j * n // query_heads for n in split_heads) for j in range(query_heads)]   # the heads copy j moves
    ids = torch.tensor([groups.index(g) for g in groups])                          # (copies,)
    return ids[:, None] == ids[None, :]                                            # (copies, heads)
