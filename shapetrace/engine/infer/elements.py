"""Names from element provenance: the inference's pass for ops that move or select elements.

For a recorded call that moves data (indexing, ``gather``, ``index_select``, ``take_along_dim``, ``cat``
and ``stack``, ``roll``, ``flip``, ``repeat``, ``expand``, ``unfold``, ``as_strided``, ``pad``), the call
is replayed on coordinate tensors (:mod:`.provenance`) and each output axis is named from the operand
axes it walks:

- a walk over one or more operand axes (in any mixed radix: a fold ``(B·H)``, a split piece, a
  reversed or rolled axis) is named as :func:`~.axes.strided_axes` names that walk over the operand's
  own axes, so a product carries every name it folds;
- an axis selected by an index keeps the name of the axis it selects along and says so
  (``T[ids_keep]``, the index's name read from the call's line);
- copies (stride 0), joins, padding and anything unproven stay as the registry's name rule left them.

A ``cat``/``stack`` of every piece of one ``split``/``chunk``/``unbind`` is replayed as the whole chain
on the split's input (``torch.cat(x.split(d_k, -1), 0)`` is heads folded over batch, ``(H·B)``, not a
join of batch with itself). Sizes never decide anything here: only coordinates.

Reads: a record whose op has a replay (or a join of a whole split), its operands' axes and the registry's
names for its outputs. Adds: the outputs' names it proves (returned to :mod:`.record`); keeps which
record made each node (``producers``) and a memo of replays.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Sequence

import torch

from shapetrace.engine import axes as ax
from shapetrace.engine.axes import Axis
from shapetrace.engine.axis_reshape import strided_axes
from shapetrace.engine.infer.counted import counted_values
from shapetrace.engine.namer import Namer
from shapetrace.engine.ops import Family, callables_of, is_basic_indexing
from shapetrace.engine.provenance import (
    MAX_ELEMENTS,
    ROLLED,
    SELECTED,
    WALK,
    AxisSource,
    Data,
    Index,
    index_walks,
    sources,
)
from shapetrace.engine.sites import resolve
from shapetrace.engine.thawed import TensorStub, map_operands, thaw_args


def callable_of(path: str) -> Callable | None:
    """The function a registry entry's ``replay`` path names (``torch.cat``, ``Tensor.unfold``)."""
    if not path:
        return None
    head, _, rest = path.partition(".")
    found: object = torch.Tensor if head == "Tensor" else torch if head == "torch" else None
    for part in rest.split("."):
        found = getattr(found, part, None)
    return found if callable(found) else None


#: elements a same-shape call may have for its replay to be read for a roll: reading the coordinates costs
#: about a second per 65,536 elements on a loaded CPU, and nothing is named from it (the row only says less
#: above this: the registry's words)
ROLL_READ_MAX = 1 << 15


class Replays:
    """One run's replays of recorded calls on coordinates (where each output element came from, which index
    axis each pick follows): functions of the call alone (its function, its arguments as recorded and its
    operands' shapes), never of names, so every inference of the run asks once — each reading of equal sizes,
    the walk again with pins, and the same call in the next layer. Measured over tests/corpus: 11,548 replays
    asked, 1,938 distinct."""

    def __init__(self):
        self._found: dict[tuple, object] = {}

    @staticmethod
    def key(fn, record) -> tuple:
        """What a replay of ``fn`` on ``record``'s arguments is a function of."""
        return getattr(fn, "replay_key", fn), record.frozen, tuple(tuple(raw[0]) for raw in record.in_raw)

    def get(self, key: tuple, replay: Callable[[], object]):
        """The replay ``key`` names, replayed on first ask; an argument that cannot be hashed: replayed afresh."""
        try:
            if key in self._found:
                return self._found[key]
        except TypeError:
            return replay()
        found = self._found[key] = replay()
        return found


def replays_of(capture) -> Replays:
    """The run's memo of replays, kept with its capture (every inference of one capture shares it)."""
    return capture.__dict__.setdefault("replays", Replays())


class ElementPass:
    """The pass's state over one inference: which record made each node, and a memo of replays (the same
    call in the next layer is answered from it)."""

    def __init__(self, namer: Namer, replays: Replays | None = None):
        self.namer = namer
        self.producers: dict[int, object] = {}
        self._memo: dict[tuple, tuple[list | None, tuple]] = {}
        self.replays = replays if replays is not None else Replays()

    def reused(self) -> ElementPass:
        """A fresh pass over the same capture that answers from this one's memo of replays."""
        again = ElementPass(self.namer, self.replays)
        again._memo = self._memo
        return again

    def note(self, record) -> None:
        for node in record.outs:
            self.producers[node] = record

    def axes(self, record, in_axes: Sequence[tuple[Axis, ...]], out_axes: list[tuple[Axis, ...]],
             axes_of: Callable[[int], tuple[Axis, ...]],
             guessed: Callable[[int], bool] = lambda node: False) -> list[tuple[Axis, ...]]:
        """``out_axes`` with every axis that element provenance names exactly: unnamed ones, or, where a
        whole split-then-join chain is replayed, every axis the chain names (it knows more than the join)."""
        chain = _split_chain(record, self.producers.get)
        if chain is not None:
            split, fn = chain
            found = self._named(fn, split, [axes_of(split.ins[0])], [r[0] for r in record.out_raw], record, guessed)
            return _merged(out_axes, found, replace=True)
        if not record.spec.replay or all(self.namer.label(a) is not None for axes in out_axes for a in axes):
            return out_axes
        fn = callable_of(record.spec.replay)
        if fn is None:
            return out_axes
        found = self._named(fn, record, list(in_axes), [r[0] for r in record.out_raw], record, guessed)
        return _merged(out_axes, found, replace=False)

    def _named(self, fn, record, in_axes, shapes, shown, guessed: Callable[[int], bool]) -> list | None:
        doubted = frozenset(p for p, node in enumerate(record.ins[:len(in_axes)]) if guessed(node))
        try:   # the same call in the next layer (same arguments, axes and line): answered from the memo
            key = (fn, record.frozen, tuple(map(id, in_axes)), tuple(map(tuple, shapes)), shown.site, doubted)
            if key in self._memo:
                return self._memo[key][0]
        except TypeError:
            key = None
        found = _named(fn, record, in_axes, shapes, self.namer, lambda: _index_word(shown), doubted, self.replays,
                       self.producers.get)
        if key is not None:   # (the entry keeps the axes it is keyed by alive: no id is reused)
            self._memo[key] = (found, tuple(in_axes))
        return found


    def rolled(self, record, in_axes, out_axes) -> dict[int, int]:
        """``{output axis: shift}`` for each axis of a same-shape call that keeps every name but starts its
        positions part way and wraps around (``torch.roll``; Swin's shifted windows): the names are
        right, the positions are not where they were, and the row says so. The shift is read from the
        replay, signed the short way round (``-1`` of 6, not ``5``); {} where nothing wrapped, the call
        cannot be replayed, or it holds more than ``ROLL_READ_MAX`` elements."""
        found = self._moved_in_place(record, in_axes, out_axes)
        if not found:
            return {}
        shape = tuple(record.out_raw[0][0])
        return {j: _signed(s.shift, shape[j]) for j, s in enumerate(found[0]) if s.kind == ROLLED and s.shift}

    def reversed(self, record, in_axes, out_axes) -> tuple[int, ...]:
        """The output axes a same-shape call that keeps every name walks backwards, whole (``flip``: a
        backward recurrence's input read from its last token), from the same replay as :meth:`rolled`."""
        found = self._moved_in_place(record, in_axes, out_axes)
        if not found:
            return ()
        shape = tuple(record.out_raw[0][0])
        return tuple(j for j, s in enumerate(found[0]) if s.kind == WALK and shape[j] > 1 and len(s.walks) == 1
                     and len(s.walks[0][1]) == 1 and s.walks[0][1][0].stride < 0
                     and s.walks[0][1][0].size == shape[j])

    def _moved_in_place(self, record, in_axes, out_axes) -> list | None:
        """The replayed sources of a one-operand call whose one result has its operand's shape and names: the
        replay's function first, then the op's own (a method's spelling, ``x.flip(1)``, that ``torch.flip``
        refuses)."""
        fn = callable_of(record.spec.replay)
        if fn is None or len(record.ins) != 1 or len(out_axes) != 1 or tuple(out_axes[0]) != tuple(in_axes[0]) \
                or tuple(record.out_raw[0][0]) != tuple(record.in_raw[0][0]) \
                or math.prod(record.in_raw[0][0]) > ROLL_READ_MAX:
            return None
        for f in (fn, *(g for g in callables_of(record.spec) if g is not fn)):
            found = self.replays.get(("rolled", *Replays.key(f, record)), lambda f=f: _replayed(f, record))
            if found:
                return found
        return None


def _replayed(fn, record) -> list | None:
    placed = placed_arguments(record)
    return sources(fn, placed[0], placed[1]) if placed is not None and placed[2] == [0] else None


def _signed(shift: int, size: int) -> int:
    return shift - size if shift > size // 2 else shift


def _merged(out_axes, found, replace: bool):
    if found is None or len(found) != len(out_axes):
        return out_axes
    merged = []
    for axes, named in zip(out_axes, found):
        if named is None or len(named) != len(axes):
            merged.append(axes)
            continue
        merged.append(tuple(n if n is not None and n.size == a.size and (replace or _unnamed(a)) else a
                            for a, n in zip(axes, named)))
    return merged


def _unnamed(axis: Axis) -> bool:
    return any(a.root == ax.UNKNOWN for a in axis.atoms)


# -- replaying a record -------------------------------------------------------------------------------

def placed_arguments(record, producer: Callable[[int], object] = lambda node: None) \
        -> tuple[tuple, dict, list[int]] | None:
    """The record's arguments with tensors as placeholders, and which operands are data. An index the trace
    counted itself carries its values (:mod:`.counted`); a boolean tensor is picked from as data by ``x[...]``
    (transformers' ``padding_mask[batch_idx, kv_idx]``), while as an index it selects by values: not replayed."""
    stubs: list[TensorStub] = []

    def keep(stub: TensorStub) -> TensorStub:
        stubs.append(stub)
        return stub

    args, kwargs = map_operands(*thaw_args(record.frozen), keep)
    if len(stubs) != len(record.ins) or any(tuple(s.shape) != tuple(r[0]) for s, r in zip(stubs, record.in_raw)):
        return None
    data: list[int] = []
    swap: dict[int, object] = {}
    for position, stub in enumerate(stubs):
        if stub.dtype.is_floating_point or stub.dtype.is_complex:
            raw = record.in_raw[position]
            swap[id(stub)] = Data(tuple(stub.shape), (raw[1], raw[2]) if record.spec.reads_storage else None)
            data.append(position)
        elif stub.dtype == torch.bool and not (position == 0 and is_basic_indexing(record.spec)):
            return None   # a boolean mask selects by values: how many is not known
        elif stub.dtype == torch.bool:
            swap[id(stub)] = Data(tuple(stub.shape))
            data.append(position)
        else:
            swap[id(stub)] = Index(tuple(stub.shape), stub.dtype, counted_values(record.ins[position], producer))

    def put(value):
        if isinstance(value, TensorStub):
            return swap[id(value)]
        if isinstance(value, (list, tuple)):
            return type(value)(put(v) for v in value)
        return value

    return tuple(put(a) for a in args), {k: put(v) for k, v in kwargs.items()}, data


def _named(fn, record, in_axes, shapes, namer, index: Callable[[], str], doubted: frozenset[int],
           replays: Replays, producer: Callable[[int], object] = lambda node: None) -> list[tuple | None] | None:
    """Each output's axes from where its elements came from; ``doubted``: the operands made from a size
    guess (:mod:`.guesses`), whose names an index never hands on; ``replays``: the run's memo of replays;
    ``producer``: the record that made each node (an index the trace counted is replayed with its values: a
    plain walk over the axes it picks in order). The same pick by unknown indices is read too: where the walk is
    over an unnamed axis (a table's: ``alibi_bias[h]``, ``h = arange(H)[None, :, None, None]``), the pick takes its
    index's names; where the two name an axis otherwise (a count of ``B`` walking ``T`` in order: ``cos[arange(B)]``
    read at B = T), the walk is a coincidence of sizes and the index's name stands."""
    if sum(math.prod(s) for s in shapes) > MAX_ELEMENTS:
        return None   # (a replay this large would allocate it: an expand of one element to 2**30 copies)
    placed = placed_arguments(record, producer)
    found = _named_placed(fn, record, placed, in_axes, shapes, namer, index, doubted, replays)
    if found is None or not any(i.values is not None for v in (*placed[0], *placed[1].values()) for i in _indices(v)):
        return found
    anyhow = _named_placed(fn, record, placed_arguments(record), in_axes, shapes, namer, index, doubted, replays)
    if anyhow is None or len(anyhow) != len(found):
        return found
    return [mine if theirs is None or mine is None or len(mine) != len(theirs) else
            tuple(_agreed(a, b, namer) for a, b in zip(mine, theirs)) for mine, theirs in zip(found, anyhow)]


def _agreed(walked: Axis | None, picked: Axis | None, namer: Namer) -> Axis | None:
    """An axis as the counted walk names it, unless the pick by unknown indices names it otherwise."""
    mine, theirs = (namer.label(a) if a is not None else None for a in (walked, picked))
    if mine is None or theirs is None:
        return walked if mine is not None else picked
    return walked if mine == theirs.split("[")[0] else picked


def _named_placed(fn, record, placed, in_axes, shapes, namer, index: Callable[[], str], doubted: frozenset[int],
                  replays: Replays) -> list[tuple | None] | None:
    """:func:`_named` for the record's arguments as :func:`placed_arguments` put them (None: not replayed)."""
    if placed is None:
        return None
    args, kwargs, data = placed
    counted = tuple(v.values.numpy().tobytes() for v in (*args, *kwargs.values()) for v in _indices(v)
                    if v.values is not None)
    key = (*Replays.key(fn, record), counted)   # (the same call with counted values replays otherwise)
    found = replays.get(("sources", *key), lambda: sources(fn, args, kwargs))
    if found is None:
        return None
    operands = [(tuple(in_axes[p]), tuple(record.in_raw[p][0])) for p in data]
    if len(found) != len(shapes):
        return None
    index_axes = [() if p in doubted else tuple(in_axes[p]) for p in range(len(in_axes)) if p not in data]
    walks = lambda: replays.get(("walks", *key), lambda: index_walks(fn, args, kwargs))  # noqa: E731
    picks = _Picks(walks, index_axes, namer)   # (a doubted index has no axes to hand on)
    copies = frozenset((k, i) for k, p in enumerate(data) for i, (n, step) in enumerate(_sizes_steps(record.in_raw[p]))
                       if step == 0 and n > 1)
    return [_axes_of(axis_sources, shape, operands, namer, index, lambda j, k=k: picks.axis(k, j), copies)
            for k, (axis_sources, shape) in enumerate(zip(found, shapes))]


def _indices(value) -> list[Index]:
    if isinstance(value, Index):
        return [value]
    if isinstance(value, (list, tuple)) and not isinstance(value, Data):
        return [i for v in value for i in _indices(v)]
    return []


def _sizes_steps(raw) -> list[tuple[int, int | None]]:
    """``(size, stride)`` per axis of a recorded operand's layout (stride None where it was not recorded)."""
    shape, strides = tuple(raw[0]), tuple(raw[1]) if len(raw) > 1 and raw[1] is not None else ()
    return [(n, strides[i] if i < len(strides) else None) for i, n in enumerate(shape)]


class _Picks:
    """The index axis each picked output axis follows (:func:`~.provenance.index_walks`), replayed only
    when a pick along an unnamed axis asks: ``table[position_ids]`` takes ``position_ids``' names."""

    def __init__(self, replayed: Callable[[], list | None], index_axes: list[tuple[Axis, ...]], namer: Namer):
        self.replayed, self.index_axes, self.namer = replayed, index_axes, namer
        self.walks: list | None | bool = False

    def axis(self, result: int, j: int) -> Axis | None:
        if self.walks is False:
            self.walks = self.replayed()
        if not self.walks or result >= len(self.walks) or j not in self.walks[result]:
            return None
        followed = [self.index_axes[m][a] if m < len(self.index_axes) and a < len(self.index_axes[m]) else None
                    for m, a in self.walks[result][j]]
        # every index the picks follow along it that names it must name it alike (``[arange(B), eot]``); an
        # index that leaves it unnamed is broadcast with the named one there, so it is that same axis
        # (Informer's ``Q[arange(B)[:, None, None], arange(H)[None, :, None], M_top]``, ``M_top`` unnamed)
        named = [axis for axis in followed if axis is not None and self.namer.label(axis) is not None]
        labels = {self.namer.label(axis) for axis in named}
        return named[0] if len(labels) == 1 and _no_copies(named[0]) else None


def _split_chain(record, producer) -> tuple[object, Callable] | None:
    """A join of every piece of one split, in order: the split's record and the chain as one function."""
    if record.spec.family is not Family.JOIN or not record.ins:
        return None
    made = [producer(node) for node in record.ins]
    split = made[0]
    if split is None or split.spec.family is not Family.SPLIT or any(m is not split for m in made) or \
            list(record.ins) != list(split.outs):
        return None
    cut, join = callable_of(split.spec.replay), callable_of(record.spec.replay)
    split_args, split_kwargs = thaw_args(split.frozen)
    join_args, join_kwargs = thaw_args(record.frozen)
    if cut is None or join is None or any(isinstance(a, TensorStub) for a in (*split_args[1:], *join_args[1:])):
        return None

    def chain(x):
        return join(list(cut(x, *split_args[1:], **split_kwargs)), *join_args[1:], **join_kwargs)

    chain.replay_key = (split.spec.replay, split.frozen, record.spec.replay, record.frozen)   # (:meth:`Replays.key`)

    return split._replace(frozen=((split.frozen[0][0],), None), in_raw=split.in_raw[:1], ins=split.ins[:1]), chain


# -- naming from sources ------------------------------------------------------------------------------

def _axes_of(found: tuple[AxisSource, ...], shape, operands, namer: Namer, index: Callable[[], str],
             picked: Callable[[int], Axis | None],
             copies: frozenset[tuple[int, int]] = frozenset()) -> tuple[Axis | None, ...]:
    """Each output axis named from its source: a walk by the operand axes it walks; a pick along a named
    axis keeps that name and says so (``T[ids_keep]``); a pick along an unnamed one (a table of
    positions), or along several at once (``hidden[arange(B), eot]``), takes the name of the index axis
    it follows (``picked``), where every index it follows names it alike. An index of several axes along one
    named axis (``emb[position_ids]``, ``(B, T)`` positions into a ``(T, d)`` table) makes several output
    axes that pick along it together: none of them is that axis alone (the first is ``position_ids``'
    batch), so each takes its index axis's name, or none. A pick along an axis the operand holds as copies
    (stride 0: ``K.unsqueeze(-3).expand(B, H, L_Q, L_K, E)``) picks copies of one element: no name (Informer's
    ``K_expand[:, :, index_sample, arange(L_Q)]``, the two indices traded, is not a pick of keys)."""
    walked = _walked(found, operands, namer)
    shared = [s.along for s in found if s.kind == SELECTED]
    out: list[Axis | None] = []
    for j, source in enumerate(found):
        if source.kind in (WALK, ROLLED):
            out.append(walked.get(j))
        elif source.kind == SELECTED and set(source.along) <= copies:
            out.append(None)
        elif source.kind == SELECTED and shared.count(source.along) == 1 \
                and (label := _selected_along(source, operands, namer)):
            out.append(ax.root_axis(ax.indexed_label(label, index()), shape[j]))
        elif source.kind == SELECTED:   # along an unnamed axis, or along several (``hidden[arange(B), eot]``)
            follows = picked(j)
            out.append(follows if follows is not None and follows.size == shape[j] else None)
        else:
            out.append(None)
    return tuple(out)


def _selected_along(source: AxisSource, operands, namer: Namer) -> str | None:
    """The name of the one operand axis a pick selects along, where it selects along one named axis."""
    if len(source.along) != 1:
        return None
    k, i = source.along[0]
    return namer.label(operands[k][0][i])


def _walked(found, operands, namer: Namer) -> dict[int, Axis]:
    """Each walking output axis, named from the operand axes it walks (every operand it walks agreeing)."""
    per_operand: dict[int, dict[int, Axis | None]] = {}
    for k, (axes, shape) in enumerate(operands):
        digits = [(j, d) for j, s in enumerate(found) if s.kind in (WALK, ROLLED)
                  for kk, ds in s.walks if kk == k for d in ds]
        moving = [(j, d) for j, d in digits if d.stride != 0]
        named = strided_axes(axes, _row_major(shape), [d.size for _, d in moving],
                                [abs(d.stride) for _, d in moving], namer) if moving else ()
        atoms: dict[int, list | None] = {}
        pieces = iter(named)
        for j, d in digits:
            if d.stride == 0:
                piece: Axis | None = Axis((ax.Atom(ax.COPIES, d.size, 1, d.size),))
            else:
                piece = next(pieces)
                if not piece.atoms or any(a.root == ax.UNKNOWN or a.root.startswith(ax.MIXED_PREFIX)
                                          for a in piece.atoms):
                    piece = None
            if piece is None or atoms.get(j, []) is None:
                atoms[j] = None
            else:
                atoms[j] = atoms.get(j, []) + list(piece.atoms)
        per_operand[k] = {j: (Axis(tuple(a)) if a else None) for j, a in atoms.items()}
    out: dict[int, Axis] = {}
    for j, source in enumerate(found):
        if source.kind not in (WALK, ROLLED) or not source.walks:
            continue
        named = [per_operand[k].get(j) for k, _ in source.walks]
        labels = {namer.label(a) if a is not None else None for a in named}
        if len(labels) == 1 and None not in labels and all(_no_copies(a) for a in named):
            out[j] = named[0]
    return out


def _no_copies(axis: Axis | None) -> bool:
    """Copies alone are no name (an expanded axis says nothing of what it spans)."""
    return axis is not None and any(a.root != ax.COPIES for a in axis.atoms)


def _row_major(shape) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def _index_word(record) -> str:
    """The index's name as the call's line writes it (``ids_keep`` in ``torch.gather(x, 1, ids_keep...)``),
    else ``index``."""
    try:
        text = resolve(record.site)[1]
        tree = ast.parse(text.rstrip(":").strip())
    except (SyntaxError, ValueError, AttributeError, TypeError):
        return "index"
    try:
        recorded = thaw_args(record.frozen)[0]
    except (TypeError, ValueError, AttributeError):
        recorded = ()
    numbers = {k for k, a in enumerate(recorded) if isinstance(a, int) and not isinstance(a, bool)}
    for node in ast.walk(tree):
        for candidate in _index_expressions(node, record.spec.name, record.spec.family is Family.SLICE, numbers):
            name = _root_name(candidate)
            if name:
                return name
    return "index"


def _index_expressions(node, called: str, indexing: bool, numbers: set[int] = frozenset()) -> list:
    """The expressions that may be a call's index: a subscript's items, an ``index=`` or later argument;
    never one whose recorded value was a number (``numbers``: positions among the recorded arguments, the
    tensor a method is called on first), as the dim a variable holds in ``x.index_select(axis, beam_idx)``."""
    if isinstance(node, ast.Subscript) and indexing:
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return [i for i in items if not isinstance(i, (ast.Slice, ast.Constant))]
    if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == called:
        keyword = [k.value for k in node.keywords if k.arg == "index"]
        function = isinstance(node.func, ast.Name) or _is_torch(node.func)
        plain = not any(isinstance(a, ast.Starred) for a in node.args)
        rest = [a for k, a in enumerate(node.args) if not isinstance(a, ast.Constant)
                and not (plain and (k if function else k + 1) in numbers)]
        return keyword + rest[1:] if function and node.args and rest[:1] == node.args[:1] else keyword + rest
    return []


def _is_torch(func) -> bool:
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "torch"


def _root_name(node) -> str | None:
    while not isinstance(node, ast.Name):
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        elif isinstance(node, ast.Call) and not _is_torch(node.func):
            node = node.func
        else:
            return None
    return node.id
