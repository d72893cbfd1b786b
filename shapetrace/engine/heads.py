"""Heads stay apart between the split and the merge: a witness from the values (issue 33, item 5).

Multi-head attention splits the queries, keys and values into heads, lets each head attend on its
own, and merges the heads back. Which heads of the merged output depend on which heads of q, k and v
is measured on the values, in the same forward as the token contracts (:mod:`.dependencies`):

* :func:`plan_heads` finds, from the trace, for every attention the top call ran, the *splits* (calls
  whose result has a heads axis and a batch, and whose operands have none) and the *merge* (the first call
  after them whose operand has a heads axis and whose result has none), each by its call site and count;
  where no axis is named heads, :mod:`.head_structure` finds them from the structure (a feature axis split
  in two, the scores' product batching over one of them), and the key/value splits of grouped-query
  attention whose heads have no name, through ``repeat_kv`` (or ``enable_gqa``) to the product;
* every attention's copies travel in the same measuring run (each merge hands back the original batch);
* during the measuring run, :class:`HeadsMode` (a TorchFunctionMode) follows the same calls: at
  each split it appends one copy of the whole batch per query head, head ``j`` of copy ``j``'s first
  entry moved in a random direction (in grouped-query attention one copy per head of each of q, k and
  v, each moving that head alone: query head ``h`` may read only key/value head ``h // n_rep``, as
  ``repeat_interleave`` and Llama's ``repeat_kv`` lay them out; with one key/value head, multi-query
  attention, every query head reads it and the query heads must still stay apart); at the merge it
  merges each copy with the call's own arguments, keeps the copies' results and hands the model the
  original batch alone, so the rest of the model runs at the traced batch;
* which head each element of the merged output belongs to is read by running the query split on
  the element's coordinates (the merge must undo the split); an element of head ``h`` may change only
  with the copies that moved head ``h`` (or its key/value group).

A violation names the heads that leaked (``head 0 of the output depends on heads 0 and 1 of the values``);
a second run moves q, k and v apart, to say which of them leaked. Plain data out.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from shapetrace.engine.capture import _SPECS, OpRecord, _spec_of
from shapetrace.engine.diagnostic import Diagnostic
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family
from shapetrace.engine.sites import user_stack

#: the contract's name, as the verdict lists it when it held
HEADS = "heads stay apart"
#: the tensors' words, by the projection a split's operand came from
_WORDS = {"q": "queries", "k": "keys", "v": "values"}


class NotMeasured(Exception):
    """The heads could not be measured on this run (the message says why, for the verdict)."""


@dataclass(frozen=True)
class Call:
    """One recorded call, as the measuring run meets it again: the op's spec, its innermost user
    code object and bytecode offset, and how many calls of that op there ran before it."""

    spec: Any
    code: Any
    offset: int
    occurrence: int


@dataclass(frozen=True)
class Split:
    """A call that splits a tensor into heads: its result's heads and batch axes, its head count and
    which tensor it makes (``"q"``, ``"k"``, ``"v"``, or ``""`` when not known: a fused projection)."""

    call: Call
    heads_axis: int
    batch_axis: int
    heads: int
    tensor: str
    label: str
    index: int = 0   # its event's index
    record: int = -1   # its capture record


@dataclass(frozen=True)
class HeadsPlan:
    """Where to move heads and where to read them in one attention: the splits, the merge (its
    operand's batch axis) and the query heads."""

    splits: tuple[Split, ...]
    merge: Call
    merge_batch: int
    heads: int
    merge_label: str
    merge_out_batch: int | None = None
    merge_index: int = 0   # its event's index
    merge_record: int = -1   # its capture record
    merge_heads: int | None = None   # the heads axis of the merge's operand, where one axis is named heads

    @property
    def span(self) -> tuple[int, int]:
        """The events from the first split to the merge (where a rule's error is this bug's)."""
        return min(s.index for s in self.splits), self.merge_index


def held(plans: tuple[HeadsPlan, ...]) -> str:
    """The contract's name when it held in every attention of ``plans``."""
    return HEADS if len(plans) == 1 else f"{HEADS} in each of {len(plans)} attentions"


def plan_heads(records, span: tuple[int, int], events, event_of_record: dict, role_of) -> tuple[HeadsPlan, ...]:
    """The splits and the merge of every attention the top call ran, in order (raises
    :class:`NotMeasured` where one of them cannot be measured).

    ``records``: the capture's records; ``span``: those of the top call; ``events``: the trace's events,
    ``event_of_record`` linking them; ``role_of(label)``: a name's role."""
    start, end = span
    rows = [(r, events[event_of_record[r]]) for r in range(start, end) if r in event_of_record]
    if any(type(records[r]) is OpRecord and records[r].spec.opens for r, _ in rows):
        raise NotMeasured("heads (inside a fused attention call)")
    calls, role_of = _Calls(records, start, end), functools.cache(role_of)   # (asked once per label)
    heads_axes = functools.cache(lambda dims: _heads_axes(dims, role_of))   # (read once per labelling)
    attentions, splits = [], []
    for r, e in rows:
        ins = any(heads_axes(t.dims) for t in e.inputs)
        outs = [heads_axes(t.dims) for t in e.outputs]
        shared = len(outs) == 1 and len(outs[0]) == 1 and _batch_axis(e.outputs[0].dims, role_of) is None and (
            1 in e.outputs[0].shape[:outs[0][0]] or e.spec.looks_up)   # (a per-head table: T5's bias [T, T, H])
        if not ins and len(outs) == 1 and len(outs[0]) == 1 and not _copies_heads(e) and not shared:
            splits.append((r, e, outs[0][0]))
        elif splits and not any(outs) and _folds(e) and (ins or _unnamed_heads(e, splits)) and not _keys_alone(e):
            attentions.append((splits, r, e))   # the merge closes this attention; a later split opens the next
            splits = []
    if not attentions:   # no axis named heads: the splits and merges found from the structure
        return _from_structure(calls, rows)
    structure = _Structure(rows)
    return tuple(replace(_plan(calls, structure.key_value_splits(
        calls, tuple(_split(calls, r, e, axis, role_of) for r, e, axis in splits), merge_r),
                       merge_r, merge_e, _batch_axis(merge_e.inputs[0].dims, role_of) if merge_e.inputs else None,
                       _batch_axis(merge_e.outputs[0].dims, role_of) if merge_e.outputs else None),
                         merge_heads=next(iter(heads_axes(merge_e.inputs[0].dims)), None) if merge_e.inputs and
                         len(heads_axes(merge_e.inputs[0].dims)) == 1 else None)
                 for splits, merge_r, merge_e in attentions)


class _Structure:
    """The attentions :mod:`.head_structure` finds, read once where a named attention needs them."""

    def __init__(self, rows):
        self.rows, self._found = rows, None

    def key_value_splits(self, calls, named: tuple[Split, ...], merge_r: int) -> tuple[Split, ...]:
        """``named`` with grouped-query attention's key/value splits added where their heads axis has no
        name (``H_kv`` not declared: ``view(*input_shape, -1, d)`` of a narrower projection): the structure
        finds them, their heads carried through ``repeat_kv`` (or ``enable_gqa``) to the product beside
        the query heads."""
        tensors = {s.tensor for s in named}
        missing = {"k", "v"} - tensors
        if not missing or "" in tensors:
            return named
        if self._found is None:
            from shapetrace.engine.head_structure import attentions
            self._found = attentions(self.rows)
        same = next((f for f in self._found if f.merge[0] == merge_r), None)
        if same is None:
            return named
        taken = {s.record for s in named}
        added = tuple(Split(calls(r), axis, batch, e.outputs[0].shape[axis], _tensor(e),
                            f"#{e.index} {e.op}", e.index, r)
                      for r, e, axis, batch in same.splits if r not in taken and _tensor(e) in missing)
        return tuple(sorted(named + added, key=lambda s: s.index))


def _from_structure(calls, rows) -> tuple[HeadsPlan, ...]:
    """The plans of the attentions :mod:`.head_structure` finds without names (raises
    :class:`NotMeasured` where there is none)."""
    from shapetrace.engine.head_structure import attentions

    found = attentions(rows)
    if not found:
        raise NotMeasured("heads (no head split found)")
    return tuple(replace(_plan(calls, tuple(Split(calls(r), axis, batch, e.outputs[0].shape[axis], _tensor(e),
                                                  f"#{e.index} {e.op}", e.index, r) for r, e, axis, batch in f.splits),
                               *f.merge), merge_heads=f.merge_heads) for f in found)


def _plan(calls, found: tuple[Split, ...], merge_r: int, merge_e, batch: int | None,
          out_batch: int | None) -> HeadsPlan:
    """One attention's plan: its splits and its merge (``batch``, ``out_batch``: the batch axis of the
    merge's operand and of its result)."""
    heads = max(s.heads for s in found)
    if any(heads % s.heads for s in found):
        raise NotMeasured("heads (key/value heads do not divide the query heads)")
    if len({(s.tensor, s.heads) for s in found}) != len({s.tensor for s in found}):
        raise NotMeasured("heads (splits of different head counts that cannot be told apart)")
    if batch is None:
        raise NotMeasured("heads (the merge's batch axis has no name)")
    return HeadsPlan(found, calls(merge_r), batch, heads, f"#{merge_e.index} {merge_e.op}", out_batch,
                     merge_e.index, merge_r)


def _tensor(e) -> str:
    """Which of q, k, v a split's operand came from ("" where not known: a fused projection)."""
    return e.projections[0] if e.projections and e.projections[0] in _WORDS else ""


def _unnamed_heads(e, splits) -> bool:
    """Does ``e``'s first operand have an unnamed axis of as many entries as a split has heads (heads
    mixed on purpose lose their name: the values tell whether this is the merge, by its layout)?"""
    sizes = {s_e.outputs[0].shape[axis] for _, s_e, axis in splits}
    return any(d is None and n in sizes for d, n in zip(e.inputs[0].dims, e.inputs[0].shape))


def _copies_heads(e) -> bool:
    """Does ``e`` make heads by copying (``expand``, ``repeat``: multi-query attention's one key/value head
    as wide as the query heads)? That is no split: the split is the one before it."""
    return e.spec is not None and (e.spec.family is Family.EXPAND or e.spec.repeats)


def _keys_alone(e) -> bool:
    """Is ``e``'s operand made from the keys or the values alone (``repeat_kv``'s fold of the copies, at
    n_rep = H as wide as the heads)? The merge's operand is the attention's output, made from both."""
    return bool(e.projections) and e.projections[0] in ("k", "v")


def _folds(e) -> bool:
    """Does ``e`` make a result of fewer axes than its first operand (the merge folds the heads away)?"""
    return bool(e.outputs) and bool(e.inputs) and len(e.outputs[0].shape) < len(e.inputs[0].shape)


def _heads_axes(dims, role_of) -> list[int]:
    return [i for i, d in enumerate(dims) if d and "*" not in d and role_of(d) == "heads"]


def _batch_axis(dims, role_of) -> int | None:
    found = [i for i, d in enumerate(dims) if d and "*" not in d and role_of(d) == "batch"]
    return found[0] if len(found) == 1 else None


def _split(calls, r: int, e, axis: int, role_of) -> Split:
    batch = _batch_axis(e.outputs[0].dims, role_of)
    if batch is None:
        raise NotMeasured("heads (a split's batch axis has no name)")
    return Split(calls(r), axis, batch, e.outputs[0].shape[axis], _tensor(e), f"#{e.index} {e.op}",
                 e.index, r)


class _Calls:
    """The top call's records as :class:`Call` s: ``calls(r)``, record ``r`` with its occurrence counted
    from the top call's first record (each record's key read once)."""

    def __init__(self, records, start: int, end: int):
        self.records, self.start = records, start
        self.keys = [_key_of(q) if type(q) is OpRecord else None for q in records[start:end]]

    def __call__(self, r: int) -> Call:
        record = self.records[r]
        if type(record) is not OpRecord or not record.spec.row:
            raise NotMeasured("heads (a split or merge without a row of its own)")
        key = self.keys[r - self.start]
        return Call(record.spec, *key[1:], self.keys[:r - self.start].count(key))


def _key_of(record) -> tuple:
    site = record.site
    return (record.spec, site.codes[0] if site is not None and site.codes else None,
            site.offset if site is not None else -1)


class Attention:
    """One attention as the measuring run meets it: its plan, which heads each copy moves, and what
    the run saw (the batch at the splits, the query split's map, the merge's results)."""

    def __init__(self, plan: HeadsPlan, kinds: dict[int, list[tuple[str, int]]] | None = None):
        self.plan = plan
        #: copy j -> the (tensor, head) pairs it moves; by default copy j moves query head j and the
        #: key/value head that query head j reads
        self.kinds = kinds if kinds is not None else {
            j: [(s.tensor, j * s.heads // plan.heads) for s in plan.splits] for j in range(plan.heads)}
        self.batch = 0
        self.reference: torch.Tensor | None = None   # the head of each element of the query split's operand
        self.read: list[torch.Tensor] | None = None   # the merge's result: the original batch, then each copy
        self._moves: dict[tuple, tuple | None] = {}

    def moves(self, tensor: str, n: int, device) -> tuple | None:
        """``(rows, heads)``: the batch entries (of the copies appended after ``n`` entries) and the heads
        of ``tensor`` they move, as index tensors made once; None where no copy moves ``tensor``."""
        moves = tuple(((j + 1) * n, head) for j, pairs in self.kinds.items() for t, head in pairs if t == tensor)
        if moves not in self._moves:   # (made once for q, k and v where they move the same heads)
            self._moves[moves] = tuple(torch.tensor(c, device=device) for c in zip(*moves)) if moves else None
        return self._moves[moves]


class HeadsMode(TorchFunctionMode):
    """Moves heads at the splits and reads them at the merge of every attention, during the measuring
    run (see the module's docstring): after the run, each :class:`Attention`'s ``read`` holds its
    merge's result for the original batch and for each copy."""

    def __init__(self, attentions: list[Attention]):
        super().__init__()
        self.attentions = attentions
        self.specs = {s.call.spec for a in attentions for s in a.plan.splits} | {a.plan.merge.spec for a in attentions}
        self.targets = {_where(s.call): (a, s) for a in attentions for s in a.plan.splits}
        self.merges = {_where(a.plan.merge): a for a in attentions}
        self.seen: dict[tuple, int] = {}
        self.left = len(attentions)   # merges not reached yet (none left: every call runs untouched)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        spec = (_SPECS.get(func) or _spec_of(func))[1] if self.left else None
        if spec is None or spec not in self.specs:
            return func(*args, **kwargs)
        codes, offset = user_stack(sys._getframe(1))
        key = (spec, codes[0] if codes else None, offset)
        occurrence = self.seen[key] = self.seen.get(key, -1) + 1
        where = (*key, occurrence)
        if where in self.targets:
            return self._moved(*self.targets[where], func, args, kwargs)
        if where in self.merges:
            return self._merged(self.merges[where], func, args, kwargs)
        return func(*args, **kwargs)

    def _moved(self, attention: Attention, split: Split, func, args, kwargs) -> torch.Tensor:
        """The split's result, with one copy of the batch per entry of the attention's kinds appended."""
        result = func(*args, **kwargs)
        if not isinstance(result, torch.Tensor) or not result.is_floating_point():
            raise NotMeasured("heads (a split's result is not a floating-point tensor)")
        if attention.reference is None and (split.tensor in ("q", "")):
            attention.reference = _reference(func, args, kwargs, split.heads_axis)
        n = attention.batch = result.shape[split.batch_axis]
        out = torch.cat([result.detach()] * (len(attention.kinds) + 1), split.batch_axis)   # the batch, copied
        moves = attention.moves(split.tensor, n, out.device)
        if moves is not None:
            grid = out.movedim((split.batch_axis, split.heads_axis), (0, 1))         # (entries, heads, ...)
            grid.index_put_(moves, _noise(result, (len(moves[0]), *grid.shape[2:])), accumulate=True)
        return out

    def _merged(self, attention: Attention, func, args, kwargs):
        """The merge run on the original batch and on each copy alone (with the call's own arguments,
        which may hold the traced batch size); the model gets the original batch's result."""
        x = next((a for a in args if isinstance(a, torch.Tensor)), None)
        axis, n, copies = attention.plan.merge_batch, attention.batch, len(attention.kinds) + 1
        if not isinstance(x, torch.Tensor) or not n or x.shape[axis] != n * copies:
            raise NotMeasured("heads (the merge does not see the copies made at the split)")
        pieces = _whole(attention, func, args, kwargs, x.shape[axis])
        if pieces is None:   # arguments that hold the traced batch size (nanoGPT's view(B, T, C)): each copy alone
            pieces = [func(x.narrow(axis, i * n, n), *args[1:], **kwargs) for i in range(copies)]
        attention.read = [pieces[0].clone(), *pieces[1:]]   # (under no_grad; the model may write the first)
        attention.reference = _merged_reference(attention, func, x, args, kwargs, pieces[0].shape)
        self.left -= 1
        return pieces[0]


def _merged_reference(attention: Attention, func, x: torch.Tensor, args, kwargs, shape) -> torch.Tensor | None:
    """The head of each element of the merged output as the merge lays them out (the merge run on the head
    index of each element of its operand, by the axis named heads), where that differs from the query
    split's map only by the order of each row's features: einops' ``'b h n d -> b n (d h)'`` keeps each
    element with its own head before a projection that reads the whole row. Else the split's map."""
    reference, at, out = attention.reference, attention.plan.merge_heads, attention.plan.merge_out_batch
    if reference is None or at is None or out is None or not 0 <= at < x.dim():
        return reference
    heads = torch.arange(x.shape[at], device=x.device).reshape([-1 if i == at else 1 for i in range(x.dim())])
    for entries in (x, x.narrow(attention.plan.merge_batch, 0, attention.batch)):   # (its args may hold either)
        try:   # (a merge that takes no integer tensor, or sizes of the other batch: the split's map)
            found = func(heads.expand(entries.shape).contiguous(), *args[1:], **kwargs).narrow(out, 0, shape[out])
            split = _output_heads(reference, shape, attention.plan.heads)
        except Exception:
            continue
        if tuple(found.shape) == tuple(shape) and torch.equal(found.sort(-1).values, split.sort(-1).values):
            return found
    return reference


def _where(call: Call) -> tuple:
    return call.spec, call.code, call.offset, call.occurrence


#: unit random moves, made once per shape, dtype and device (a few; scaled per split)
_UNIT_NOISE: dict[tuple, torch.Tensor] = {}


def _noise(result: torch.Tensor, shape) -> torch.Tensor:
    """Random moves, a tenth of the split's largest value (not large: a saturated softmax would hide
    them)."""
    key = (tuple(shape), result.dtype, result.device)
    unit = _UNIT_NOISE.get(key)
    if unit is None:
        unit = torch.randn(shape, generator=torch.Generator().manual_seed(1), dtype=result.dtype).to(result.device)
        if len(_UNIT_NOISE) < 16:
            _UNIT_NOISE[key] = unit
    return unit * (0.1 * (1.0 + float(result.detach().abs().amax())))


def _whole(attention: Attention, func, args, kwargs, entries: int) -> list | None:
    """The merge run once on every copy (arguments read from the tensor itself: ``B, H, T, d =
    x.shape``), split back into the original batch and each copy; None where it cannot be."""
    out_axis = attention.plan.merge_out_batch
    if out_axis is None:
        return None
    try:
        whole = func(*args, **kwargs)
    except Exception:
        return None
    if not isinstance(whole, torch.Tensor) or whole.dim() <= out_axis or whole.shape[out_axis] != entries:
        return None
    return list(whole.split(attention.batch, out_axis))


def _reference(func, args, kwargs, heads_axis: int) -> torch.Tensor | None:
    """The head each element of the split's operand goes to: the split run on the operand's
    coordinates (element i holds i); -1 where an element goes to no head."""
    x = args[0]
    if not isinstance(x, torch.Tensor):
        return None
    coordinates = torch.arange(x.numel(), device=x.device).reshape(x.shape)
    try:
        out = func(coordinates, *args[1:], **kwargs)
    except Exception:   # (an op that takes no integer tensor)
        return None
    heads = torch.full((x.numel(),), -1, dtype=torch.long, device=x.device)
    by_head = out.movedim(heads_axis, 0).reshape(out.shape[heads_axis], -1)         # (heads, elements)
    heads[by_head] = torch.arange(by_head.shape[0], device=x.device)[:, None].expand_as(by_head)
    return heads.reshape(x.shape)


#: a change counts when it exceeds this times (1 + the largest value)
_TOLERANCE = {torch.float64: 1e-9, torch.float32: 1e-4}


def reached(plan_heads_count: int, reference: torch.Tensor | None, read: list[torch.Tensor]) -> list[list[set[int]]]:
    """``sets[h]``: for each block of output head ``h`` that changed in any copy (a block: the head's
    features at one position of the other axes, read with ``reference``, the query split's map), the
    copies it changed in; raises :class:`NotMeasured` when the merge's result is not laid out as the
    split's operand. (Blocks, not single elements: one feature may move too little to see.)"""
    base, copies = read[0], torch.stack(read[1:])
    heads = _output_heads(reference, base.shape, plan_heads_count)
    tolerance = float(_TOLERANCE.get(base.dtype, 1e-2) * (1 + base.abs().nan_to_num(0.0).amax()))
    width = base.shape[-1] if base.dim() else 1
    diff = (copies - base).abs().nan_to_num(0.0).reshape(len(copies), -1, width)   # (copies, rows, width)
    index = heads.reshape(1, -1, width).clamp(min=0).expand_as(diff)
    blocks = diff.new_zeros(diff.shape[0], diff.shape[1], plan_heads_count)         # (copies, rows, heads)
    blocks = blocks.scatter_reduce(2, index, diff, "amax") > tolerance
    # each block's copies as one row of booleans, read once (a block of head h: (row, h) where h is there)
    present = torch.zeros(diff.shape[1], plan_heads_count + 1, dtype=torch.bool)
    present[torch.arange(diff.shape[1])[:, None].expand(-1, width), heads.reshape(-1, width)] = True
    found: list[set[tuple]] = [set() for _ in range(plan_heads_count)]
    for here, moved in zip(present[:, :plan_heads_count].tolist(), blocks.permute(1, 2, 0).tolist()):
        for h in range(plan_heads_count):
            if here[h] and any(moved[h]):
                found[h].add(tuple(moved[h]))
    return [[{j for j, hit in enumerate(s) if hit} for s in signatures] for signatures in found]


def _output_heads(reference: torch.Tensor | None, shape, heads: int) -> torch.Tensor:
    """The head each element of the merged output belongs to: the split's map where the merge's result
    has the split operand's shape; where the split's operand is wider (a fused q, k, v projection)
    its first features, when every head is there equally often."""
    if reference is None:
        raise NotMeasured("heads (the split cannot be run on coordinates)")
    if tuple(reference.shape) == tuple(shape):
        return reference
    if tuple(reference.shape[:-1]) == tuple(shape[:-1]) and reference.shape[-1] > shape[-1]:
        cut = reference[..., :shape[-1]]
        counts = torch.bincount(cut.reshape(-1).clamp(min=0), minlength=heads)
        if bool((cut >= 0).all()) and counts.numel() == heads and bool((counts == counts[0]).all()):
            return cut
    raise NotMeasured("heads (the merge's result is laid out unlike the split's operand)")


def regrouped(sets: list[list[set[int]]], plan: HeadsPlan | None = None, kinds: dict | None = None) -> str | None:
    """Where an element of output head ``h`` changes with other copies but not with copy ``h`` (which
    moves query head ``h``, which every element of a head's output reads), the merge does not undo the
    split (heads regrouped with another axis): the sentence saying so; else None. With ``kinds`` (a
    run whose copies each move one head: grouped-query attention), the copies of ``h`` are those that
    move a head output head ``h`` reads."""
    for h, found in enumerate(sets):
        own = {h} if kinds is None or plan is None else _own_copies(plan, kinds, h)
        strays = [s for s in found if not s & own]
        if strays:
            union = sorted(set().union(*strays))
            if kinds is not None:
                union = sorted({head for j in union for _, head in kinds[j]})
            return (f"head {h} of the output has elements that do not depend on head {h} of the queries but on "
                    f"{_heads(union)} of the queries, keys and values")
    return None


def _own_copies(plan: HeadsPlan, kinds: dict, h: int) -> set[int]:
    """The copies that move a head output head ``h`` reads: its query head, its group's key/value head."""
    counts = {s.tensor: s.heads for s in plan.splits}
    return {j for j, pairs in kinds.items() for t, head in pairs if head == h * counts[t] // plan.heads}


def grouped(plan: HeadsPlan) -> bool:
    """Is ``plan`` grouped-query (or multi-query) attention: a split of fewer heads than the queries'?"""
    return any(s.heads != plan.heads for s in plan.splits)


def one_head_each(plan: HeadsPlan) -> dict[int, list[tuple[str, int]]]:
    """Copy j -> the one (tensor, head) it moves: every head of every split's tensor, one per copy."""
    kinds, j = {}, 0
    for tensor in dict.fromkeys(s.tensor for s in plan.splits):
        count = next(s.heads for s in plan.splits if s.tensor == tensor)
        for head in range(count):
            kinds[j], j = [(tensor, head)], j + 1
    return kinds


def _heads(heads: list[int]) -> str:
    if len(heads) == 1:
        return f"head {heads[0]}"
    return f"heads {', '.join(map(str, heads[:-1]))} and {heads[-1]}"


def leaks(plan: HeadsPlan, kinds: dict[int, list[tuple[str, int]]],
          sets: list[list[set[int]]]) -> list[tuple[int, str, list[int], int]]:
    """``(output head, tensor, heads it depends on, the head it should)`` for each output head that
    depends on a head of ``tensor`` other than its own (its key/value group's, in grouped-query
    attention), from the copies of a run whose copy ``j`` moved the ``(tensor, head)`` pairs ``kinds[j]``."""
    counts = {s.tensor: s.heads for s in plan.splits}
    found = []
    for h, per_element in enumerate(sets):
        copies = set().union(*per_element) if per_element else set()
        for tensor, count in counts.items():
            own = h * count // plan.heads
            heads = sorted({head for j in copies for t, head in kinds[j] if t == tensor})
            if heads and heads != [own]:
                found.append((h, tensor, heads, own))
    return found


def findings(plan: HeadsPlan, detected: list[list[set[int]]], separate: tuple | None) -> list[Diagnostic]:
    """The findings of the two runs (``separate``: ``(sets, kinds)`` of the run that moved each tensor's
    heads apart, or None when the first run found nothing; in grouped-query attention the one run moved
    them apart: ``separate`` is its own), each speaking of the events from the split to the merge; []
    when the heads stayed apart."""
    return [replace(d, span=plan.span) for d in _findings(plan, detected, separate)]


def _findings(plan: HeadsPlan, detected: list[list[set[int]]], separate: tuple | None) -> list[Diagnostic]:
    where = f"between the split ({', '.join(s.label for s in plan.splits)}) and the merge ({plan.merge_label})"
    sentence = regrouped(detected, plan, separate[1]) if grouped(plan) and separate else regrouped(detected)
    if sentence is not None and not _key_value_heads_alone(plan, separate):
        return [Kind.HEADS_MIX.found(None, (
            f"measured on the values: {sentence}: the merge does not undo the split ({where}). Heads were merged "
            "with another axis, as a view or reshape of (B, H, T, d_k) to (B, T, D) without the transpose back "
            "does."), "Merge as the split's inverse: y.transpose(1, 2).contiguous().view(B, T, D).")]
    if separate is None:
        return []
    sets, kinds = separate
    first: dict[str, tuple] = {}   # one finding per tensor: its first leaking output head, and how many leak
    for h, tensor, heads, own in leaks(plan, kinds, sets):
        found = first.setdefault(tensor, (h, heads, own, []))
        if found[0] != h:
            found[3].append(h)
    return [_leak_finding(plan, h, tensor, heads, own, where, others)
            for tensor, (h, heads, own, others) in first.items()]


def _key_value_heads_alone(plan: HeadsPlan, separate: tuple | None) -> bool:
    """In grouped-query attention, do only key/value heads leak when each head is moved alone (the
    query heads stay apart)? Then an output element that did not change with its own copy read the
    key/value head of another group (under a causal mask the first token reads nothing else): the
    key/value heads are in the wrong order, not the merge."""
    if separate is None or not grouped(plan):
        return False
    found = {tensor for _, tensor, _, _ in leaks(plan, separate[1], separate[0])}
    return bool(found) and not found & {"q", ""}


def _leak_finding(plan: HeadsPlan, h: int, tensor: str, heads: list[int], own: int, where: str,
                  others: list[int]) -> Diagnostic:
    word = _WORDS.get(tensor, "queries, keys and values")
    also = f" (output {_heads(others)} too)" if others else ""
    count = next(s.heads for s in plan.splits if s.tensor == tensor)
    if len(heads) == 1 and count < plan.heads:
        rep = plan.heads // count
        return Kind.HEADS_MIX.found(None, (
            f"measured on the values: head {h} of the output depends on head {heads[0]} of the {word}{also}, but "
            f"grouped-query attention pairs query head {h} with key/value head {own} (query heads "
            f"{own * rep}-{own * rep + rep - 1} share it, as repeat_interleave and Llama's repeat_kv lay them "
            "out): the key/value heads were tiled in the wrong order."),
            "Repeat each key/value head n_rep times in place: k.repeat_interleave(n_rep, dim=1), not "
            "k.repeat(1, n_rep, 1, 1).")
    message = (f"measured on the values: head {h} of the output depends on {_heads(heads)} of the {word}{also}: "
               f"heads mix {where}.")
    if not tensor:   # one call splits q, k and v: which of them mixed cannot be told apart
        return Kind.HEADS_TALK.found(None, message + (
            " The queries, keys and values are split in one call, so whether the values mix (a bug) or only the "
            "attention weights (talking-heads attention does so on purpose) cannot be told apart here."),
            "If the heads are not meant to talk, keep the heads index apart in every op between the split and "
            "the merge.")
    if tensor in ("q", "k"):
        return Kind.HEADS_TALK.found(None, message + (
            " Talking-heads attention mixes the attention weights of the heads on purpose; in plain multi-head "
            "attention this is a bug (a sum or an einsum over the heads index of the scores)."),
            "If the heads are not meant to talk, keep the heads index apart in every op between the split and "
            "the merge.")
    return Kind.HEADS_MIX.found(None, message + (
        " Each head must read only its own values (an einsum summing over the wrong head index, such as "
        "'bhqk,bgkd->bhqd', does this)."),
        "Keep one heads index through the product with the values: einsum('bhqk,bhkd->bhqd', weights, v).")
