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

A split's operand may also be one piece of a submodule's output cut along its last axis (nanoGPT's
``c_attn(x).split(n_embd, dim=2)``): the submodule's wrapper then moves every piece's heads. Where a
split takes its batch size from elsewhere (nanoGPT's ``view(B, T, nh, hs)`` with ``B`` read from the
block's input, Llama's ``view(*input_shape, -1, head_dim)``), copies appended to the projection's
output would be folded into another axis; there the copies enter with the input instead (the
measuring batch grows by one entry per head, each a copy of entry 0), every producing submodule
replaces its copies' rows with entry 0's output moved head by head, and each consuming submodule
puts entry 0 back in those rows after reading them, so each attention's copies start afresh. The
measuring batch then gets a length no axis of the trace has (more rows of entry 0 where needed), so a
size read from the batch axis cannot line up with another axis; and everything the merge reads from
the input must come through the splits. A batch size that does not grow with the input is caught at
run time: the shapes the wrappers check, or the token contracts read on the measuring entries, differ,
and the full way is taken.

Then, in the measuring forward, each producing submodule's output gets copies of batch entry 0
appended, each with the features of some heads moved in a random direction: one copy per head, or, at
more than 4 heads, fewer copies that move each head with its own half of them (:func:`_head_sets`; in
grouped-query attention, where a moved key/value head changes its whole group, the query heads' copies,
then the key/value heads' in both k and v); the consuming
submodule keeps what reached it and hands its module the original entries only, so the rest of the
model runs at the measuring batch. Every copy is compared with entry 0 in one vectorised pass. This
way is used only where every contract held: any finding, any guard that fails, any doubt, and
:mod:`.dependencies` measures again the full way (:mod:`.heads`), so findings and their words come
from one place. Plain data out.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, replace
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
    """A split's operand as the submodule at ``path`` returns it: the submodule's traced output shape,
    its batch axis, the tensor it makes (``"q"``...), that split's head count, and the stride of its
    heads axis in the last axis (feature ``f`` of the operand goes to head ``(f // stride) % heads``: the
    split is a reshape); the operand's ``width`` features start at ``offset`` of the submodule's output
    (0 but for a piece of a fused projection); ``grown``: the split reads its batch size from elsewhere,
    so the copies enter with the input."""

    path: str
    shape: tuple
    batch: int
    tensor: str
    heads: int
    stride: int
    offset: int = 0
    width: int = 0
    grown: bool = False


@dataclass(frozen=True)
class Consumer:
    """The merge's result as the submodule at ``path`` receives it: its traced shape and batch axis."""

    path: str
    shape: tuple
    batch: int


@dataclass(frozen=True, eq=False)
class Hooks:
    """One attention's producers, its consumer, its query heads, and how to read the merge's result
    head by head (with the query split's map: the merge must undo it); ``moves[j][i]``: the heads of
    producer ``i`` that copy ``j`` moves (:func:`_moves`)."""

    producers: tuple[Producer, ...]
    consumer: Consumer
    heads: int
    order: torch.Tensor | None   # the merge's features sorted by head, where they are not already
    allowed: torch.Tensor        # (copies, heads): copy j moved the heads output head h reads
    avoid: frozenset = frozenset()   # every size the top call's tensors have (where copies enter with the input)
    moves: tuple = ()            # (copies, producers): the heads each copy moves in each split
    queries: torch.Tensor | None = None   # (copies, heads): copy j moved query head h

    @functools.cached_property
    def rules(self) -> tuple[tuple[tuple[bool, bool], ...], ...]:
        """``rules[j][h]``: (copy j moved query head h, copy j moved every head output head h reads), as
        plain values read once (the measuring run compares a few dozen: Python is quicker than ops)."""
        return tuple(tuple(zip(q, a)) for q, a in zip(self.queries.squeeze(1).tolist(), self.allowed.tolist()))

    @property
    def copies(self) -> int:
        return len(self.moves)

    @property
    def grown(self) -> bool:
        """Do the copies enter with the input (a split reads its batch size from elsewhere)?"""
        return any(p.grown for p in self.producers)

    def by_path(self) -> dict[str, tuple[Producer, ...]]:
        """The producers by submodule: a fused projection makes several splits' operands."""
        found: dict[str, tuple[Producer, ...]] = {}
        for p in self.producers:
            found[p.path] = (*found.get(p.path, ()), p)
        return found


def points(records, nodes, span: tuple[int, int], path_of, plans: tuple[HeadsPlan, ...],
           inputs: frozenset | None = None) -> tuple[Hooks, ...]:
    """Where each attention of ``plans`` can be measured at module boundaries; () where any cannot
    (``records``, ``nodes``: the capture's; ``span``: the top call's records; ``path_of(slot)``: a module
    slot's path under the top module, "" for the top module itself; ``inputs``: the top call's tensor
    arguments' nodes, without which no copies enter with the input)."""
    found, span = [], _Span.of(records, span)
    for plan in plans:
        hooks = _hooks(records, nodes, span, path_of, plan)
        if hooks is None or hooks.grown and not _merge_reads_splits_only(records, span, plan, inputs):
            return ()
        found.append(hooks)
    paths = [path for h in found for path in h.by_path()] + [h.consumer.path for h in found]
    if len(set(paths)) != len(paths):
        return ()   # (one wrapper per submodule)
    if any(h.grown for h in found):
        if len({h.copies for h in found}) != 1:
            return ()   # (copies that enter with the input: as many for every attention)
        found = [replace(h, avoid=_sizes(records, nodes, span)) for h in found]
    return tuple(found)


def _hooks(records, nodes, span, path_of, plan: HeadsPlan) -> Hooks | None:
    producers = tuple(_producer(records, nodes, span, path_of, s) for s in plan.splits)
    consumer = _consumer(records, nodes, span, path_of, plan)
    if consumer is None or any(p is None for p in producers):
        return None
    for group in {p.path: [q for q in producers if q.path == p.path] for p in producers}.values():
        if len({(q.shape, q.batch) for q in group}) != 1 or len({q.offset for q in group}) != len(group):
            return None   # (the pieces of one fused output: one shape, one batch axis, apart)
    query = next((p for p in producers if p.tensor in ("q", "")), None)
    if query is None or tuple(query.shape[:-1]) != tuple(consumer.shape[:-1]) or query.batch != consumer.batch:
        return None
    width = consumer.shape[-1]
    if query.heads != plan.heads or width > query.shape[-1]:
        return None
    order = None if width == query.stride * plan.heads else _order(query, width)   # (side by side already)
    if order is False:
        return None
    moves = _moves(producers, plan.heads)
    if moves is None:
        return None
    at = producers.index(query)
    queries = torch.tensor([[h in m[at] for h in range(plan.heads)] for m in moves]).unsqueeze(1)   # (copies, 1, heads)
    return Hooks(producers, consumer, plan.heads, order, _allowed(producers, plan.heads, moves), moves=moves,
                 queries=queries)


def _moves(producers: tuple[Producer, ...], heads: int) -> tuple | None:
    """``moves[j][i]``: the heads of producer ``i`` copy ``j`` moves. With as many heads in every split,
    copy ``j`` moves the same heads of each (:func:`_head_sets`). In grouped-query attention (fewer
    key/value heads) a copy moving a key/value head changes its whole group, so the query heads are moved
    by copies of their own, then the key/value heads in both k and v (each may change its group only: no
    copy moves a query head and a key/value head together); None where the splits are not one each of q,
    k and v with as many key/value heads."""
    if all(p.heads == heads for p in producers):
        return tuple((s,) * len(producers) for s in _head_sets(heads))
    tensors = [p.tensor for p in producers]
    if sorted(tensors) != ["k", "q", "v"] or len({p.heads for p in producers if p.tensor != "q"}) != 1:
        return None   # (a fused projection's pieces, a split missing: which copy moves what is not known)
    query, groups = tensors.index("q"), next(p.heads for p in producers if p.tensor != "q")
    return tuple(tuple(s if i == query else () for i in range(len(producers))) for s in _head_sets(heads)) + \
        tuple(tuple(() if i == query else s for i in range(len(producers))) for s in _head_sets(groups))


@functools.cache
def _head_sets(n: int) -> tuple[tuple[int, ...], ...]:
    """Which of ``n`` heads each copy moves: one head per copy, or, where fewer copies do it, ``m``
    copies with each head moved by its own half of them (``m`` the fewest with C(m, m/2) >= n: 5 copies
    for 8 heads, 6 for 16, 8 for 64). No head's copies include another's (Sperner), so any two heads are
    told apart by a copy that moves one and not the other, in both directions, and a change in output
    head h from a copy that did not move h still names a leak."""
    m = next(m for m in itertools.count(1) if math.comb(m, m // 2) >= n)
    if m >= n:
        return tuple((h,) for h in range(n))
    own = list(itertools.islice(itertools.combinations(range(m), m // 2), n))     # head h's copies
    sets = (tuple(h for h in range(n) if j in own[h]) for j in range(m))
    return tuple(s for s in sets if s)


def _sizes(records, nodes, span) -> frozenset:
    """Every axis size of every tensor the top call's records read or made."""
    return frozenset(size for r in range(*span) for node in (*getattr(records[r], "ins", ()),
                                                             *getattr(records[r], "outs", ()))
                     for size in nodes[node].shape)


def _merge_reads_splits_only(records, span, plan: HeadsPlan, inputs: frozenset | None) -> bool:
    """Does everything the merge reads that comes from the top call's input come through the splits?
    (Copies that enter with the input reach every tensor made from it: a key or value that is not
    split, a mask made from the input, would carry them unmoved, and the heads would not all be moved.)
    False where the inputs are not known."""
    if inputs is None:
        return False
    made, derived = {}, set(inputs)
    for r in range(*span):
        record = records[r]
        outs, ins = getattr(record, "outs", ()), getattr(record, "ins", ())
        for node in outs:
            if node not in ins or node not in made:   # (an in-place op's node: its first maker)
                made[node] = r
        if derived.intersection(ins):
            derived.update(outs)
    split_outs = {n for s in plan.splits for n in getattr(records[s.record], "outs", ())}
    merge = records[plan.merge_record]
    todo, seen = list(merge.ins[:1]), set()
    while todo:
        node = todo.pop()
        if node in seen or node in split_outs:
            continue
        seen.add(node)
        if node in derived and (node in inputs or node not in made):
            return False
        if node in made:
            todo.extend(getattr(records[made[node]], "ins", ()))
    return True


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
    read = _batch_read_from(record.frozen, len(after), split.batch_axis, operand, before[split.batch_axis])
    if read is None:
        return None
    made = _made_by(records, span, split.record, operand)
    if made is None or _readers(records, span, operand) != [split.record]:
        return None
    made, offset, shape = _piece_of(records, nodes, span, made, operand)
    path = path_of(records[made].module) if made >= 0 and records[made].module != record.module else ""
    if not path:
        return None
    stride = math.prod(after[split.heads_axis + 1:])
    return Producer(path, shape, split.batch_axis, split.tensor, split.heads, stride, offset, before[-1],
                    read == "grown")


def _piece_of(records, nodes, span, made: int, operand: int) -> tuple[int, int, tuple]:
    """``(record, offset, shape)``: the record whose output holds ``operand``'s features, where they start
    in it, and its shape. ``operand`` itself (offset 0), or one piece of a cut of another tensor along its
    last axis that the cut alone reads (``c_attn(x).split(n_embd, dim=2)``); record -1 where the cut
    is not proven."""
    record = records[made]
    if type(record) is not OpRecord or record.spec.family is not Family.SPLIT:
        return made, 0, tuple(nodes[operand].shape)
    whole = record.ins[0] if record.ins else None
    pieces = [tuple(nodes[n].shape) for n in record.outs]
    if whole is None or _readers(records, span, whole) != [made]:
        return -1, 0, ()
    shape = tuple(nodes[whole].shape)
    if any(p[:-1] != shape[:-1] for p in pieces) or sum(p[-1] for p in pieces) != shape[-1]:
        return -1, 0, ()   # (not a cut of the last axis into pieces side by side)
    source = _made_by(records, span, made, whole)
    if source is None:
        return -1, 0, ()
    position = list(record.outs).index(operand)
    return source, sum(p[-1] for p in pieces[:position]), shape


def _consumer(records, nodes, span, path_of, plan: HeadsPlan) -> Consumer | None:
    """The submodule whose first input is the merge's result (None: not proven)."""
    merge = records[plan.merge_record] if 0 <= plan.merge_record < len(records) else None
    if type(merge) is not OpRecord or not merge.outs or plan.merge_out_batch is None:
        return None
    result = merge.outs[0]
    readers = _readers(records, span, result)
    while len(readers) == 1 and _same_values(records[readers[0]]):   # (``.contiguous()`` of a contiguous tensor)
        result = records[readers[0]].outs[0]
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


def _same_values(record) -> bool:
    """Does ``record`` hand on its one operand itself (a no-op: torch returned the very tensor)?"""
    return type(record) is OpRecord and record.memory[1] and len(record.ins) == 1 and len(record.outs) == 1


def _batch_read_from(frozen, rank: int, batch: int, operand: int, traced: int) -> str | None:
    """Where the split's shape argument takes its batch size: ``"own"`` from its own operand (``B, T,
    D = x.shape``) or left to torch (-1), so copies appended to the operand travel as entries;
    ``"grown"`` the traced batch size read elsewhere (``B, T, C = x.size()`` of the block's input), so
    the copies must enter with the input; None for anything else."""
    args, kwargs = frozen
    shape = args[1:]
    if len(shape) == 1 and isinstance(shape[0], tuple):
        shape = tuple(shape[0])
    if kwargs or len(shape) != rank:
        return None
    size = shape[batch]
    if size == -1 or isinstance(size, SizeOf) and size.node == operand and size.axis == batch:
        return "own"
    return "grown" if isinstance(size, int) and size == traced else None


def _made_by(records, span, before: int, node: int) -> int | None:
    """The last record before ``before`` that made ``node``."""
    for r in range(before - 1, span[0] - 1, -1):
        if node in getattr(records[r], "outs", ()):   # (a declaration makes a node of its own: not followed)
            return r
    return None


def _readers(records, span, node: int) -> list[int]:
    """The records of the top call that read ``node``."""
    if isinstance(span, _Span):
        return list(span.readers.get(node, ()))
    return [r for r in range(*span) if node in getattr(records[r], "ins", ())]


class _Span(tuple):
    """The top call's records ``(start, end)``, with the records that read each node, read once."""

    readers: dict

    @classmethod
    def of(cls, records, span: tuple[int, int]) -> _Span:
        found = cls(span)
        found.readers = {}
        for r in range(*span):
            for node in dict.fromkeys(getattr(records[r], "ins", ())):
                found.readers.setdefault(node, []).append(r)
        return found


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

    def __init__(self, module, hooks: tuple[Hooks, ...], batch: int, out_batch: int | None = None):
        self.module, self.hooks, self.batch = module, hooks, batch   # (batch: the input's batch axis)
        self.out_batch = batch if out_batch is None else out_batch
        self.grows = any(h.grown for h in hooks)   # (copies entering with the input)
        self.grown = 0   # (the rows they add: one per head, and more where that many is a size the trace has)
        self.held = False
        self.read: dict[int, torch.Tensor] = {}
        self.entries = 0

    def forward(self, run, x: torch.Tensor):
        """``run(x)`` with the wrappers in place (and the copies of entry 0 on ``x``'s batch, where they
        enter with the input); raises :class:`NotMeasured` where a guard fails."""
        self.entries = x.shape[self.batch]
        if self.grows:   # (a measuring batch as long as another axis would let a size read from the batch pass)
            self.grown = next(n for n in range(self.hooks[0].copies, 1 << 20)
                              if self.entries + n not in self.hooks[0].avoid)
        installed = []
        try:
            for i, h in enumerate(self.hooks):
                for path, group in h.by_path().items():
                    installed.append(_wrap(self.module, path, self._producing(h, group)))
                installed.append(_wrap(self.module, h.consumer.path, self._consuming(i, h)))
            result = run(_with_entry_zero(x, self.batch, self.grown) if self.grown else x)
        finally:
            for sub in installed:
                del sub.__dict__["forward"]
        self.held = len(self.read) == len(self.hooks) and all(
            _apart(h, self.read[i], self.entries) for i, h in enumerate(self.hooks))
        if self.grown and _shaped_on(result, self.out_batch, self.entries + self.grown):
            return result.narrow(self.out_batch, 0, self.entries)                  # (entries, ...)
        return result

    def _producing(self, hooks: Hooks, group: tuple[Producer, ...]):
        calls, p = [], group[0]
        at = [hooks.producers.index(q) for q in group]
        moves = tuple(tuple(m[i] for i in at) for m in hooks.moves)                 # (copies, group)

        def moved(original, *args, **kwargs):
            rows = self.entries + self.grown   # (the rows the submodule's output has)
            if self.grown and args and _shaped_on(args[0], p.batch, rows):   # (the copies' rows are made below)
                args, rows = (args[0].narrow(p.batch, 0, self.entries), *args[1:]), self.entries
            out = original(*args, **kwargs)
            calls.append(1)
            if len(calls) > 1 or not _shaped(out, p.shape, p.batch, rows):
                raise NotMeasured("heads (a projection ran twice or returned another shape)")
            if not self.grown:
                return _with_copies(out, group, moves)                             # (entries + copies, ...)
            copied = _with_copies(out.narrow(p.batch, 0, self.entries), group, moves)
            extra = self.grown - hooks.copies
            return _with_entry_zero(copied, p.batch, extra) if extra else copied   # (entries + rows, ...)
        return moved

    def _consuming(self, i: int, hooks: Hooks):
        c = hooks.consumer

        def kept(original, x, *args, **kwargs):
            if i in self.read or not _shaped(x, c.shape, c.batch, self.entries + (self.grown or hooks.copies)):
                raise NotMeasured("heads (the merge's result did not carry the copies)")
            self.read[i] = x
            out = original(x.narrow(c.batch, 0, self.entries), *args, **kwargs)
            if not self.grown:
                return out
            if not _shaped_on(out, c.batch, self.entries):
                raise NotMeasured("heads (the output projection returned another batch)")
            return _with_entry_zero(out, c.batch, self.grown)   # (the rest of the model: entry 0 in the copies' rows)
        return kept


def _with_entry_zero(x: torch.Tensor, batch: int, copies: int) -> torch.Tensor:
    """``x`` with ``copies`` copies of its entry 0 appended on its batch axis."""
    shape = list(x.shape)
    shape[batch] = copies
    return torch.cat([x, x.narrow(batch, 0, 1).expand(shape)], batch)             # (entries + copies, ...)


def _shaped_on(t, batch: int, entries: int) -> bool:
    return isinstance(t, torch.Tensor) and t.dim() > batch and t.shape[batch] == entries


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


def _with_copies(out: torch.Tensor, group: tuple[Producer, ...], moves: tuple) -> torch.Tensor:
    """``out`` with one copy of its entry 0 per row of ``moves`` appended on the batch axis, copy ``j``
    with the features of head ``moves[j][i]`` of each split ``group[i]`` moved by a tenth of ``out``'s
    largest value (not more: a saturated softmax would hide it); ``group``: the splits whose operands
    are pieces of ``out`` (one, but for a fused projection)."""
    batch = group[0].batch
    first = _batch_first(out.narrow(batch, 0, 1), batch)                           # (1, ..., features)
    unit = _unit_moves(group, moves, tuple(first.shape[1:]), first.dtype, first.device)   # (copies, ...)
    scale = 0.1 * (1.0 + float(torch.linalg.vector_norm(out, float("inf"))))       # (the largest |value|)
    copies = torch.add(first, unit, alpha=scale)                                   # (copies, ..., features)
    return torch.cat([out, copies if batch == 0 else copies.movedim(0, batch)], batch)   # (entries + copies, ...)


def _batch_first(t: torch.Tensor, axis: int) -> torch.Tensor:
    return t if axis == 0 else t.movedim(axis, 0)


#: each copy's unit move, by shape, dtype, device and the splits' layouts (a few)
_MOVES: dict[tuple, torch.Tensor] = {}


def _unit_moves(group: tuple[Producer, ...], moves: tuple, shape: tuple, dtype, device) -> torch.Tensor:
    """Copy ``j``'s unit move: random on the features of the heads it moves, zero elsewhere."""
    key = (shape, dtype, device, moves, tuple((p.heads, p.stride, p.offset, p.width) for p in group))
    unit = _MOVES.get(key)
    if unit is None:
        copies = len(moves)
        mask = torch.zeros(copies, shape[-1], dtype=torch.bool)                     # (copies, features)
        for i, p in enumerate(group):
            moved = torch.tensor([[h in m[i] for h in range(p.heads)] for m in moves])   # (copies, heads)
            heads = _feature_heads(p, p.width or shape[-1])                         # (width,)
            mask[:, p.offset:p.offset + len(heads)] |= moved[:, heads]
        unit = _noise((copies, *shape), dtype, device) * \
            mask.to(dtype).reshape(copies, *[1] * (len(shape) - 1), -1).to(device)   # (copies, ..., features)
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
    """Did the heads stay apart, read from the merge's result (the measuring entries, then the copies)?
    Every output head ``h`` changed with a copy that moved query head ``h``; and a block of output head
    ``h`` (its features at one position) changed only with copies that moved, in every split they move,
    a head ``h`` reads (the same rules :func:`.heads.leaks` and :func:`.heads.regrouped` read one head at
    a time, here in one vectorised pass)."""
    axis, heads = hooks.consumer.batch, hooks.heads
    base = merged.narrow(axis, 0, 1)                                               # (1 on the batch axis)
    diff = _batch_first((merged.narrow(axis, entries, hooks.copies) - base).abs_(), axis)   # (copies, ..., features)
    if hooks.order is not None:   # (each head's features side by side)
        diff = diff.index_select(-1, hooks.order.to(diff.device))
    blocks = diff.reshape(hooks.copies, -1, heads, diff.shape[-1] // heads)        # (copies, rows, heads, d)
    largest = blocks.amax(dim=(1, 3)).tolist()                                     # (copies, heads)
    tolerance = _TOLERANCE.get(base.dtype, 1e-2) * (1 + float(torch.linalg.vector_norm(base, float("inf"))))
    if math.isnan(tolerance) or any(math.isnan(v) for row in largest for v in row):
        return False   # (a NaN: measured the full way, which says what it means)
    own, strays = [False] * heads, False
    for row, rules in zip(largest, hooks.rules):
        for h, (value, (query, allowed)) in enumerate(zip(row, rules)):
            changed = value > tolerance
            own[h] = own[h] or changed and query
            strays = strays or changed and not allowed
    return all(own) and not strays


def _allowed(producers: tuple[Producer, ...], query_heads: int, moves: tuple) -> torch.Tensor:
    """``allowed[j, h]``: copy ``j`` moved, in every split it moves, the head output head ``h`` reads."""
    return _allowed_for(query_heads, tuple(p.heads for p in producers), moves)


@functools.lru_cache(maxsize=16)
def _allowed_for(query_heads: int, split_heads: tuple[int, ...], moves: tuple) -> torch.Tensor:
    reads = [tuple(h * n // query_heads for n in split_heads) for h in range(query_heads)]   # the heads h reads
    return torch.tensor([[all(not m or r in m for m, r in zip(moved, read)) for read in reads]
                         for moved in moves])                                      # (copies, heads)
