"""Infer: names, provenance and events from a captured run, in passes over the whole record.

:mod:`.capture` keeps what torch said about each call; this module decides what it means, after the
run (or when a trace's events are read while it still records):

1. **names forward**: each node's axes from its producer's operands, through the op registry's name
   rules (:mod:`.propagate`), seeded by the declared sizes where a tensor enters, by
   ``shapetrace.name`` and by einops patterns; every name is checked against torch's own shape;
2. **provenance**: which projection (q, k, v, a fused qkv) each tensor came from, from the module a
   linear ran in, carried through views and splits;
3. **rows**: which calls get a row (an addition onto attention scores does: it is where masks go in)
   and the :class:`~.events.Event` of each, with its layouts and labels;
4. **sequences**: at equal lengths, which sequence queries the other (``T`` and ``S`` for display);
5. **values**: NaN rows of the attention outputs, read once after the run.

Later passes read the whole graph: :mod:`.structure` names what entered unnamed from how the run
used it (a conv patch stem, a class token joined by ``cat``, a cache).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from shapetrace.engine import axes as ax
from shapetrace.engine.axes import Axis, Namer
from shapetrace.engine.backward import heads_from_products
from shapetrace.engine.capture import OpRecord, PassRecord
from shapetrace.engine.elements import ElementPass
from shapetrace.engine.events import Event, ShapeOf, TensorInfo, new_event, new_info
from shapetrace.engine.faults import faults_raise
from shapetrace.engine.ops import (
    ADDITIVE,
    PICKS,
    SCALING,
    SCORE_ADD,
    Call,
    Family,
    OpSpec,
    arg,
    by_parameter_matrix,
    family_of,
    is_basic_indexing,
    lines_up_by_broadcast,
    ops_of,
    record_params,
    selects_along_dim,
    separated_axis,
    separates,
    write_kind,
)
from shapetrace.engine.propagate import fits, strided
from shapetrace.engine.thawed import thaw_args
from shapetrace.engine.vocabulary import FUSED_PARTS, STACK_FACTORS, canonical, projection_kind
from shapetrace.engine.writes import written_axes

#: ops whose result mixes two operands' roles: no projection tag passes through them
COMBINES = ops_of(Family.PRODUCT) | ops_of(Family.FUSED_ATTENTION)
#: ops that project features (their output is tagged q, k or v from the module they run in)
PROJECTIONS = ops_of(Family.PROJECTION)
#: elementwise ops that scale scores by a number (the 1/√d_k of attention)
SCALING_OPS = SCALING
_SPLITS = ops_of(Family.SPLIT)
_PICKS = PICKS


# ---------------------------------------------------------------------------
# the forward pass
# ---------------------------------------------------------------------------

#: ops whose operands torch lines up by broadcasting, from the right


class Inference:
    """Names and events of one capture, made incrementally: :meth:`advance` reads the records added
    since the last call (a trace's events may be read while it records)."""

    def __init__(self, capture, namer: Namer, dims: dict, seed_order: Sequence[str],
                 pins: dict[int, tuple[Axis, ...]] | None = None):
        self.capture = capture
        self.pins = pins or {}                         # node -> axes a later use decided (see corrections)
        self.from_parameters: set[int] = set()          # nodes computed from module parameters only
        self.writes: dict[int, tuple[Axis, ...]] = {}  # written node -> the names its writes prove
        self.sliced_from: dict[int, tuple[int, OpRecord]] = {}   # x[index] -> (x, the record that sliced it)
        self.declared: dict[int, tuple[Axis, ...]] = {}  # node -> the axes a later shapetrace.name() gave it
        self.ambiguous: dict[int, int] = {}            # node -> the entered node whose sizes fit more than
        #                                                one seed, and of which it is a same-axes copy
        self.namer = namer
        self.dims = dims
        self.seed_order = list(seed_order)
        self.axes: dict[int, tuple[Axis, ...]] = {}   # node -> axes
        self.tags: dict[int, str] = {}                 # node -> q / k / v / qkv / kv
        self.sequences: dict[int, str] = {}            # entered token node -> T or S
        self.events: list[Event] = []
        self.made_by: dict[int, tuple[int, int]] = {}  # node -> (event, output position) of the row that made it
        self.event_of_record: dict[int, int] = {}
        self.scalings: list[dict[str, Any]] = []
        self.pattern_conflicts: list[tuple[int, str]] = []
        self.name_mismatches = 0
        self.seeded_by_size = False
        self.unnamed_by_failure: list[tuple[int, str]] = []   # (event, "TypeName: message"): see _op_unnamed
        self._memo: dict[tuple, tuple] = {}
        self._interned: dict[tuple, tuple] = {}
        self._infos: dict[tuple, tuple[TensorInfo, tuple]] = {}   # (layout, id(axes), device) -> (info, axes)
        self._clash_memo: dict[tuple, tuple[bool, tuple]] = {}   # (id of each axes, shapes) -> (clash?, axes)
        self._done = 0
        self._pending = None   # an einops chain: (call id, output node, event index, groups)
        self.elements = ElementPass(namer)

    # -- nodes -------------------------------------------------------------------------------------
    def axes_of(self, node: int) -> tuple[Axis, ...]:
        found = self.axes.get(node)
        if found is not None:
            return found
        pinned = self.pins.get(node)
        if pinned is not None:
            self.axes[node] = pinned
            return pinned
        facts = self.capture.nodes[node]
        seeded = self._seed(node, facts) if facts.entered else None
        if seeded is not None:
            return seeded
        found = ax.unknown_axes(facts.shape)
        self.axes[node] = found
        return found

    def _seed(self, node: int, facts) -> tuple[Axis, ...] | None:
        """Names for a tensor that enters the traced code (an input, not a parameter, not made here).

        Its shape is matched against the declared sizes: ``[B, T, D]``, ``[B, T]`` (token ids),
        ``[B, H, T, d_k]``... The first token tensor to enter is ``T``; with ``S`` declared, a
        second, different one is ``S`` (cross-attention), even when the two lengths are equal.
        """
        shape = facts.shape
        if len(shape) < 2 or facts.parameter or not self.dims:
            return None
        seq = self._sequence_name(node, shape)
        names = self._seed_names(shape, seq)
        if names is None:
            return None
        if self._seed_names(shape, seq, skip=names) is not None:
            self.ambiguous[node] = node   # [4, 4] at B = T = 4: [B, T] or [T, B]; a later use may decide
        axes = tuple(ax.root_axis(n, s) for n, s in zip(names, shape))
        axes = self._interned.setdefault(axes, axes)
        self.axes[node] = axes
        if "T" in names or "S" in names:
            self.sequences.setdefault(node, "S" if "S" in names else "T")
        self.seeded_by_size = True
        return axes

    def _sequence_name(self, node: int, shape: tuple[int, ...]) -> str:
        """``T`` for the first sequence to enter; ``S`` for a second one when ``S`` is declared."""
        if node in self.sequences:
            return self.sequences[node]
        if "S" in self.dims and "T" in self.sequences.values():
            return "S" if self.dims["S"] in shape else "T"
        if "T" not in self.dims or (self.dims["T"] not in shape and "S" in self.dims):
            return "S"
        return "T"

    def _seed_names(self, shape: tuple[int, ...], seq: str, skip: list[str] | None = None) -> list[str] | None:
        declared = self.seed_order[:len(shape)]   # the declared order, with this tensor's sequence name
        other = "S" if seq == "T" else "T"
        patterns = [[seq if n == other and seq not in declared else n for n in declared]]
        leads = (["B", seq], ["B", "H", seq], ["B", "H_kv", seq], ["B", seq, "H"], ["B", seq, "H_kv"], [seq, "B"])
        patterns += [["B", seq, seq], ["B", "H", seq, seq]]   # masks and scores: a token axis twice
        for lead in leads:   # batch-first before seq-first: [T, B, D] is named only where [B, T, D] does not fit
            for tail in ([], ["D"], ["d_k"], ["D_kv"], ["3*D"], ["2*D"], ["H*d_k"]):
                patterns.append(lead + tail)
        for names in patterns:
            if names == skip:
                continue
            if len(names) == len(shape) and all(self.namer.size_of(n) == s for n, s in zip(names, shape)):
                if len(set(names)) == len(names) or names.count(seq) == 2 and len(set(names)) == len(names) - 1:
                    return names
        return None

    # -- the pass ----------------------------------------------------------------------------------
    def advance(self) -> list[Event]:
        records = self.capture.records
        self._infos.clear()   # labels read since the last pass are not shared with the infos of this one
        for index in range(self._done, len(records)):
            record = records[index]
            kind = type(record)
            if self._pending is not None and not self._chained(record):
                self._finish_pattern()
            if kind is OpRecord:
                try:
                    self._op(index, record)
                except Exception as exc:   # a fault of the inference itself, never of the traced code
                    self._op_unnamed(index, record, exc)
            elif kind is PassRecord:
                try:
                    self._pass(record)
                except Exception as exc:
                    self._unnamed_outputs(record.outs, record.out_shapes, exc)
            else:
                self.axes[record.node] = record.axes
                if record.was is not None:
                    self.declared[record.was] = record.axes
        self._done = len(records)
        return self.events

    def finish(self) -> None:
        """After the run: the last einops chain ends, failed calls that ended the block join."""
        self.advance()
        if self._pending is not None:
            self._finish_pattern()

    def corrections(self) -> dict[int, tuple[Axis, ...]]:
        """Names that a later use proves for tensors whose sizes fit more than one seed.

        A fresh ``torch.ones(T, T).triu(1)`` at B = T fits ``[B, T]`` and ``[T, B]``; when it is then
        broadcast onto scores ``[B, H, T, T]`` from the right (a mask, a bias), torch lines it up with
        ``[T, T]``, and that is what it is. Only an ambiguous size guess yields to its use: a guess
        that fits one seed only stays, and a use that contradicts it is a finding of the diagnostics.
        """
        found: dict[int, tuple[Axis, ...]] = {n: a for n, a in self.writes.items() if n not in self.pins}
        found.update(self._declared_later(found))
        found.update(heads_from_products(self, found))
        if not self.ambiguous:
            return found
        for record in self.capture.records:
            if type(record) is not OpRecord and type(record) is not PassRecord:
                continue
            if not lines_up_by_broadcast(record.spec.name) or len(record.ins) < 2:
                continue
            for node in record.ins:
                root = self.ambiguous.get(node)
                if root is not None and root not in found:
                    lined = self._lined_up(node, record.ins)
                    if lined is not None and len(_without_ones(lined)) == len(self.capture.nodes[root].shape):
                        found[root] = _without_ones(lined)
        return found

    def _declared_later(self, found: dict) -> dict[int, tuple[Axis, ...]]:
        """``mask = torch.ones(T, T).triu(1)`` then ``shapetrace.name(mask, "T T")``: the declaration
        speaks for the tensor before it too, where that had no names (or only a size guess that fit more
        than one seed). Names computed before are never overridden: a contradiction is a finding."""
        out: dict[int, tuple[Axis, ...]] = {}
        for node, axes in self.declared.items():
            if node in self.pins or node in found or self.capture.nodes[node].shape != tuple(a.size for a in axes):
                continue
            root = self.ambiguous.get(node)
            if root is not None:
                out.setdefault(root, axes)
            elif all(self.namer.label(a) is None for a in self.axes.get(node, ())):
                out[node] = axes
        return out

    def _note_write(self, record: PassRecord, in_axes) -> None:
        """A write into a tensor (``cache[:, :, s:e] = k``, ``cache.index_copy_(2, pos, k)``,
        ``buf.copy_(x)``): where the target's axes are unnamed, the written values name them. An axis
        written whole takes the value's name; one written in part along a token axis holds positions
        (``L``, a capacity of tokens). Kept as pins: the inference runs again with them."""
        target, value = record.ins[0], record.ins[-1]
        if target == value:
            return
        mine, theirs = in_axes[0], in_axes[-1]
        lined = {p: (theirs[v], whole) for p, (v, whole) in self.write_lines(record, len(mine), len(theirs)).items()}
        pinned, changed = list(self.writes.get(target, mine)), False
        for p, (axis, whole) in lined.items():
            if self.namer.label(pinned[p]) is not None or self.namer.label(axis) is None:
                continue
            if whole and axis.size == pinned[p].size:
                pinned[p], changed = axis, True
            elif not whole and self.namer.is_token_root(axis.atoms[0].root):
                pinned[p], changed = ax.root_axis(CAPACITY, pinned[p].size), True
        if changed:
            self.writes[target] = self.axes[target] = tuple(pinned)   # what it holds from here on
            self._name_sliced_buffer(target, tuple(pinned))

    def _name_sliced_buffer(self, view: int, named: tuple[Axis, ...]) -> None:
        """A write into a slice of a buffer names the buffer too, on the axes the slice keeps whole:
        ``key_states[..., :nope].copy_(k_nope)`` fills a ``new_empty`` buffer in parts (transformers'
        DeepSeek latent attention), and the buffer is what the attention product reads."""
        found = self.sliced_from.get(view)
        if found is None:
            return
        base, record = found
        mine = list(self.writes.get(base, self.axes_of(base)))
        args, _ = thaw_args(record.frozen)
        changed = False
        for p, (v, whole) in written_axes(args[1] if len(args) > 1 else None, len(mine), len(named)).items():
            axis = named[v]
            if whole and self.namer.label(mine[p]) is None and self.namer.label(axis) is not None and \
                    axis.size == mine[p].size:
                mine[p], changed = axis, True
        if changed:
            self.writes[base] = self.axes[base] = tuple(mine)

    @staticmethod
    def write_lines(record, ndim: int, value_ndim: int) -> dict[int, tuple[int, bool]]:
        """A write's target axis -> (the value's axis lined up with it, written whole?)."""
        args, kwargs = thaw_args(record.frozen)
        kind = write_kind(record.spec.name)
        if kind == "whole":
            return {p: (v, True) for v, p in enumerate(range(ndim - value_ndim, ndim)) if p >= 0}
        if kind == "rows":
            if value_ndim != ndim:
                return {}
            dim = arg(args, kwargs, 1, "dim", 0) % ndim
            return {p: (p, p != dim) for p in range(ndim)}
        return written_axes(args[1] if len(args) > 1 else None, ndim, value_ndim)

    def _keep_ambiguity(self, ins, outs, in_axes, out_axes) -> None:
        """A one-operand op that keeps an ambiguous guess's axes (``triu``, ``~``, ``.bool()``, or
        ``m[None, None]`` that only adds axes of size 1) passes the ambiguity on: a later use of its
        result decides the guess."""
        if len(ins) == 1 and ins[0] in self.ambiguous:
            kept = _without_ones(in_axes[0])
            for node, axes in zip(outs, out_axes):
                if _without_ones(axes) == kept:
                    self.ambiguous.setdefault(node, self.ambiguous[ins[0]])

    def _lined_up(self, node: int, ins) -> tuple[Axis, ...] | None:
        """The axes ``node`` meets, from the right, in a larger operand of the same broadcast."""
        mine = self.axes.get(node)
        if mine is None:
            return None
        for other in ins:
            theirs = self.axes.get(other)
            if other == node or other in self.ambiguous or theirs is None or len(theirs) < len(mine):
                continue
            lined = theirs[len(theirs) - len(mine):]
            if all(a.size == b.size or a.size == 1 for a, b in zip(mine, lined)) and \
                    all(_whole_root(b) for a, b in zip(mine, lined) if a.size != 1):
                pinned = tuple(b if a.size != 1 else a for a, b in zip(mine, lined))
                return pinned if pinned != mine else None
        return None

    def _op(self, index: int, record: OpRecord) -> None:
        spec = record.spec
        in_axes = [self.axes_of(n) for n in record.ins]
        if not spec.row:
            if spec.name in ADDITIVE and self._onto_scores(in_axes):
                spec = SCORE_ADD
                record = record._replace(spec=spec, params=_additive_params(record.kept))
            elif not self._clashes(record, in_axes):
                self._pass_names(spec, record.ins, record.outs, [r[0] for r in record.out_raw], record.frozen,
                                 in_axes)
                return
        if spec.contraction == "matrix" and self._by_parameter_matrix(record):
            spec = by_parameter_matrix(spec)
            record = record._replace(spec=spec)
        family = family_of(spec.name)
        if family is Family.WRITE and len(record.ins) >= 2:
            record = self._written(record, in_axes)
        shapes = [r[0] for r in record.out_raw]
        if record.error is None and separates(spec.name) and in_axes:
            self._decide_stack(spec, record, in_axes[0], len(record.outs))
        if record.error is None and family is Family.WRITE:
            out_axes, params = [in_axes[0]], record.params or {}
        elif record.error is None:
            out_axes, params = self._names_of(spec, record, in_axes, shapes)
        else:
            out_axes, params = [], record.params or {}
        if family is Family.JOIN and out_axes:
            out_axes = [self._joined_with_parameters(record.ins, in_axes, out_axes[0], params)]
        if spec.name in PROJECTIONS and out_axes and out_axes[0]:
            out_axes[0] = self._one_part_unstacked(record, out_axes[0])
        if record.error is None and out_axes:   # element provenance (:mod:`.elements`)
            out_axes = self.elements.axes(record, in_axes, out_axes, self.axes_of)
        self.elements.note(record)
        if record.ins and self._from_parameters_only(record.ins):
            self.from_parameters.update(record.outs)
        if self.pins and out_axes:
            out_axes = [self.pins.get(node, axes) for node, axes in zip(record.outs, out_axes)]
        for node, axes in zip(record.outs, out_axes):
            if node not in self.axes or not _same_node_as_input(node, record.ins):
                self.axes[node] = axes
        if self.ambiguous:
            self._keep_ambiguity(record.ins, record.outs, in_axes, out_axes)
        tags = self._tags_of(record.ins)
        if record.outs and (tags or spec.name in PROJECTIONS):
            self._tag_outputs(spec, record, in_axes, shapes, params, tags)
        if is_basic_indexing(spec.name) and record.outs and record.ins:
            self.sliced_from[record.outs[0]] = (record.ins[0], record)
        event_index = len(self.events)
        self.event_of_record[index] = event_index
        event = self._event(event_index, spec, record, in_axes, out_axes, params, tags)
        event.sources = tuple(map(self.made_by.get, record.ins))
        for position, node in enumerate(record.outs):
            self.made_by[node] = (event_index, position)
        self.events.append(event)
        if record.einops is not None and len(record.outs) == 1:
            self._pending = (record.einops[0], record.outs[0], event_index, record.einops[1])

    def _op_unnamed(self, index: int, record: OpRecord, exc: Exception) -> None:
        """The inference failed on one op (a fault of shapetrace): its results are left unnamed, its
        row still shows, and the run's other ops are inferred as usual; the diagnostics say so
        (:mod:`.faults`; with ``SHAPETRACE_STRICT=1`` the fault is raised instead)."""
        self._unnamed_outputs(record.outs, [r[0] for r in record.out_raw], exc)
        if index in self.event_of_record:
            return   # the row was made before the fault
        in_axes = [self.axes_of(n) for n in record.ins]
        out_axes = [self.axes[n] for n in record.outs]
        event_index = len(self.events)
        self.event_of_record[index] = event_index
        event = self._event(event_index, record.spec, record, in_axes, out_axes, record.params or {}, None)
        event.sources = tuple(map(self.made_by.get, record.ins))
        for position, node in enumerate(record.outs):
            self.made_by[node] = (event_index, position)
        self.events.append(event)
        self.unnamed_by_failure.append((event_index, f"{type(exc).__name__}: {exc}"))

    def _unnamed_outputs(self, outs, shapes, exc: Exception) -> None:
        if faults_raise():
            raise exc
        for node, shape in zip(outs, shapes):
            self.axes[node] = ax.unknown_axes(tuple(shape))

    def _by_parameter_matrix(self, record: OpRecord) -> bool:
        """Is this product ``x @ W``, with ``W`` a matrix made from module parameters only and ``x``
        computed from the inputs (a projection written as a product)?"""
        if len(record.ins) != 2 or len(record.in_raw[1][0]) != 2 or len(record.in_raw[0][0]) < 2:
            return False
        x, weight = record.ins
        return self._from_parameters_only((weight,)) and not self._from_parameters_only((x,))

    def _from_parameters_only(self, nodes) -> bool:
        """Are all these nodes parameters, or computed from parameters only? (a loop, not ``all()`` over
        a generator: asked for every call)"""
        nodes_facts, computed = self.capture.nodes, self.from_parameters
        for n in nodes:
            if n not in computed and not nodes_facts[n].parameter:
                return False
        return True

    def _written(self, record: OpRecord, in_axes) -> OpRecord:
        """A write (``cache[:, :, s:e] = k``, ``index_copy_``, ``copy_``): the names it proves for its
        target are noted, and its result is the target itself (``__setitem__`` returns nothing)."""
        if record.error is None:
            self._note_write(record, in_axes)
        if not record.outs and record.error is None:
            record = record._replace(outs=record.ins[:1], out_raw=record.in_raw[:1])
        return record

    def _joined_with_parameters(self, ins, in_axes, joined: tuple[Axis, ...], params) -> tuple[Axis, ...]:
        """``cat`` of a part made from parameters only (a class token, expanded over the batch) with a
        named part (the patches ``[B, N, D]``): the parameter's unnamed axes take the names of the
        axes they are lined up with. A part computed from inputs that is unnamed names nothing."""
        dim = params.get("dim", 0) if params else 0
        out = list(joined)
        # torch still joins an empty 1-d tensor (``torch.cat([torch.tensor([]), k], dim=-2)``, the first
        # write into transformers' DynamicCache): it adds nothing, and has no axis to line up
        parts = [(n, a) for n, a in zip(ins, in_axes) if len(a) == len(joined)]
        for j, axis in enumerate(joined):
            if j == dim % len(joined) or self.namer.label(axis) is not None:
                continue
            named = {self.namer.label(a[j]): a[j] for _, a in parts if self.namer.label(a[j]) is not None}
            unnamed_from_parameters = all(n in self.from_parameters or self.capture.nodes[n].parameter
                                          for n, a in parts if self.namer.label(a[j]) is None)
            if len(named) == 1 and unnamed_from_parameters:
                out[j] = next(iter(named.values()))
        return tuple(out)

    def _decide_stack(self, spec: OpSpec, record: OpRecord, axes: tuple[Axis, ...], parts: int) -> None:
        """A fused projection taken apart along one of its pieces, into as many parts as it stacks
        (``qkv.unbind(0)``, ``fused[..., 0, :]``, ``chunk(3, dim)``): that piece is the stack (``qkv``,
        ``kv``), so where ``H`` has the same size, the other piece is the heads."""
        args, kwargs = thaw_args(record.frozen)
        dim = separated_axis(spec.name, args, kwargs, len(axes))
        if dim is None or not -len(axes) <= dim < len(axes):
            return
        axis = axes[dim]
        if len(axis.atoms) != 1 or not self.namer.clashed(axis.atoms[0]):
            return
        atom = axis.atoms[0]
        for stack, factor in STACK_FACTORS.items():
            if atom.size == factor and (spec.name in PICKS or parts == factor):
                if self.namer.decide(atom, stack):
                    self._clash_memo.clear()   # the labels changed: a broadcast may line up other roles now
                return

    def _pass(self, record: PassRecord) -> None:
        in_axes = [self.axes_of(n) for n in record.ins]
        if family_of(record.spec.name) is Family.WRITE and len(record.ins) >= 2:
            self._note_write(record, in_axes)
        self._pass_names(record.spec, record.ins, record.outs, record.out_shapes, record.frozen, in_axes)
        if record.spec.name in SCALING_OPS:
            self._note_scaling(record, in_axes)

    def _pass_names(self, spec: OpSpec, ins, outs, shapes, frozen, in_axes) -> None:
        """Ops without a row: elementwise ones pass names on by broadcasting; unknown ones name nothing."""
        for node, shape in zip(outs, shapes):
            if node in ins:
                continue   # an in-place op kept its input's node: its names stay
            if spec.names is None:
                self.axes[node] = self.pins.get(node) or ax.unknown_axes(tuple(shape))
                continue
            operands = [a for a, n in zip(in_axes, ins)]
            found, _ = self._names_of(spec, _PassCall(frozen, ins), operands, [shape])
            self.axes[node] = found[0]
            if self.ambiguous:
                self._keep_ambiguity(ins, [node], in_axes, found)
        if ins and self._from_parameters_only(ins):
            self.from_parameters.update(n for n in outs if n not in ins)
        self._carry_source(ins, outs, shapes)
        tags = self._tags_of(ins)
        if tags:
            tag = _single(tags)
            if tag is not None:
                for node in outs:
                    if node not in ins:
                        self.tags[node] = tag

    def _carry_source(self, ins, outs, shapes) -> None:
        """A call without a row (dropout, ``x * 2``) keeps the layout of its operand of the same shape: its
        result is traced back through it to the row that made that operand."""
        for node, shape in zip(outs, shapes):
            if node in ins:
                continue
            same = next((n for n in ins if n in self.made_by and self.capture.nodes[n].shape == tuple(shape)), None)
            if same is not None:
                self.made_by[node] = self.made_by[same]

    # -- names -------------------------------------------------------------------------------------
    def _names_of(self, spec: OpSpec, record, in_axes, shapes):
        """``(names of each output, params)``. A name rule is a function of the op, its operands'
        axes, its arguments (tensors by shape, dtype and kind) and torch's output shapes, so the same
        call in the next layer is answered from a memo. Axes are keyed by identity (each memo entry
        keeps its axes alive, so no id is reused)."""
        frozen, params = record.frozen, record.params
        layouts = getattr(record, "in_raw", None) if spec.names in _READS_LAYOUT else None
        try:
            key = (spec.name, spec.names, tuple(map(id, in_axes)), frozen, tuple(shapes),   # (torch.Size == tuple)
                   None if params is None else _freeze_params(params),
                   None if layouts is None else tuple(tuple(r[1]) + (r[2],) for r in layouts))
            hit = self._memo.get(key)
        except TypeError:   # an argument that cannot be hashed: computed afresh
            key = hit = None
        if hit is not None:
            self.name_mismatches += hit[1]
            return hit[0], (hit[2] if params is None else params)
        args, kwargs = thaw_args(frozen)
        if params is None:
            params = record_params(spec, args, kwargs)
        shapes = [tuple(s) for s in shapes]
        if spec.names is None or not shapes:
            found, mismatched = [ax.unknown_axes(s) for s in shapes], 0
        else:
            before = self.name_mismatches
            inputs = list(layouts) if layouts is not None else [None] * len(in_axes)
            call = Call(spec.name, args, kwargs, inputs, list(in_axes), shapes, self.namer, params)
            found = self._checked(spec, call)
            mismatched = self.name_mismatches - before
        found = [self._interned.setdefault(axes, axes) for axes in found]   # equal axes: one object
        if key is not None:
            self._memo[key] = (found, mismatched, params, tuple(in_axes))
        return found, params

    def _checked(self, spec: OpSpec, call: Call) -> list[tuple[Axis, ...]]:
        """The registry's names for each output, kept only where they fit torch's own shape."""
        try:
            found = spec.names(call)
        except (IndexError, KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError):
            found = None   # arguments in a form the name rule does not read: unnamed, never guessed
        found = found if isinstance(found, list) else [found]
        checked = []
        for axes, shape in zip(found + [None] * len(call.shapes), call.shapes):
            if axes is not None and fits(axes, shape):
                checked.append(tuple(axes))
            else:
                self.name_mismatches += axes is not None
                checked.append(ax.unknown_axes(shape))
        return checked

    def _one_part_unstacked(self, record: OpRecord, axes: tuple[Axis, ...]) -> tuple[Axis, ...]:
        """A projection its module names as q, k or v alone (``wk``, ``k_proj``) holds no q/k/v stack: a
        width that only sizes read as a stack (``2*d_k`` = kv·d_k, which is two kv heads of d_k in
        grouped-query code with H_kv undeclared) is left unnamed."""
        last = axes[-1]
        if len(last.atoms) != 1 or not _stacked_root(self.namer.aliases.get(last.atoms[0].root, last.atoms[0].root)):
            return axes
        if _projection_here(record, self.capture.module_calls) not in ("q", "k", "v"):
            return axes
        return (*axes[:-1], ax.unknown_axes((last.size,))[0])

    # -- provenance: which projection a tensor came from ------------------------------------------
    def _tags_of(self, nodes) -> tuple | None:
        if not self.tags:
            return None
        found = tuple(map(self.tags.get, nodes))
        return None if found.count(None) == len(found) else found

    def _tag_outputs(self, spec: OpSpec, record: OpRecord, in_axes, shapes, params, input_tags) -> None:
        """q, k and v from the projection modules that made them (``q_proj``, ``c_attn`` then a split
        into three, ``proj[0]`` of a packed in-projection), carried through views and elementwise ops."""
        outs, op = record.outs, spec.name
        if op in PROJECTIONS:
            tag = _projection_here(record, self.capture.module_calls)
            if tag is not None:
                self.tags[outs[0]] = tag
            return
        tag = _single(input_tags or ())
        if tag is None or op in COMBINES:
            return
        parts = FUSED_PARTS.get(tag)
        if parts and len(outs) == len(parts) and op in _SPLITS:
            for out, part in zip(outs, parts):
                self.tags[out] = part
            return
        if parts and op in _PICKS:
            args, kwargs = thaw_args(record.frozen)
            picked = _fused_index(Call(op, args, kwargs, [], in_axes, shapes, self.namer, params), parts)
            if picked is not None:
                self.tags[outs[0]] = picked
            return
        for out in outs:
            self.tags[out] = tag

    def _clashes(self, record: OpRecord, in_axes) -> bool:
        """Does this broadcast line up two named axes of different roles (a rotary table's T with the
        heads, or tokens in row order with the same tokens in window order)? Then it gets a row of its
        own, where the diagnostics say so."""
        if record.error is not None or len(in_axes) < 2 or not lines_up_by_broadcast(record.spec.name):
            return False
        shapes = tuple(r[0] for r in record.in_raw)
        # the same broadcast in the next layer: the same verdict (the axes are keyed by identity, and the
        # entry keeps them alive; a decided name forgets every verdict, see _decide_stack)
        key = (tuple(map(id, in_axes)), shapes)
        try:
            hit = self._clash_memo.get(key)
        except TypeError:   # a size that cannot be hashed: judged afresh, as the name memo does
            return self._clash_found(in_axes, shapes)
        if hit is None:
            hit = self._clash_memo[key] = (self._clash_found(in_axes, shapes), tuple(in_axes))
        return hit[0]

    def _clash_found(self, in_axes, shapes) -> bool:
        if self.namer.broadcast_clash([(self.namer.dims_of(a), s) for a, s in zip(in_axes, shapes)]) is not None:
            return True
        return ax.order_clash(list(zip(in_axes, shapes)), self.namer) is not None

    def _onto_scores(self, in_axes) -> bool:
        """Is one operand a tensor of attention scores (query and key axes)?"""
        return len(in_axes) == 2 and any({"query", "key"} <= {a.role for a in axes} for axes in in_axes)

    def _note_scaling(self, record: PassRecord, in_axes) -> None:
        """``scores / s`` or ``q * s`` by a plain number: kept (as the factor applied) for the scale check."""
        args = record.frozen[0]
        if len(args) != 2 or len(record.ins) != 1:
            return
        number = args[1] if type(args[0]) is ShapeOf else args[0]
        if type(number) is ShapeOf or not isinstance(number, (int, float)) or isinstance(number, bool) or \
                number == 0:
            return
        roles = {a.role for a in in_axes[0]}
        on = "scores" if {"query", "key"} <= roles else self.tags.get(record.ins[0])
        if on in ("scores", "q", "k"):
            factor = 1 / number if "div" in record.spec.name else float(number)
            self.scalings.append({"event": max(len(self.events) - 1, 0), "factor": factor, "on": on})

    # -- einops ------------------------------------------------------------------------------------
    def _chained(self, record) -> bool:
        pending = self._pending
        return type(record) is OpRecord and record.einops is not None and record.einops[0] == pending[0] and \
            bool(record.ins) and record.ins[0] == pending[1]

    def _finish_pattern(self) -> None:
        """The pattern's output: an axis it calls heads that holds tokens is a contradiction
        (``'b (h n) d -> b h n d'``); an axis provenance left unnamed takes the pattern's name where
        that name is a declared one of the same size (``h`` -> ``H``)."""
        _, node, index, groups = self._pending
        self._pending = None
        event = self.events[index] if index < len(self.events) else None
        if groups is None or event is None or not event.outputs or len(groups) != len(event.outputs[0].axes):
            return
        info = event.outputs[0]
        for group, axis in zip(groups, info.axes):
            if len(group) == 1 and canonical(group[0]) == "H" and any(
                    self.namer.is_token_root(a.root) for a in axis.atoms):
                self.pattern_conflicts.append((index, group[0]))
        axes = tuple(self._pattern_axis(group, axis) for group, axis in zip(groups, info.axes))
        if axes != info.axes:
            event.outputs[0] = _info_like(info, axes, self.namer)
            self.axes[node] = axes

    def _pattern_axis(self, group: list[str], axis: Axis) -> Axis:
        if not axis.atoms or any(a.root != ax.UNKNOWN for a in axis.atoms):
            return axis
        names = [canonical(w) for w in group if not w.isdigit()]
        sizes = [self.namer.size_of(n) for n in names]
        if not names or None in sizes or math.prod(sizes) != axis.size:
            return axis
        return ax.Axis(tuple(ax.Atom(n, s, 1, s) for n, s in zip(names, sizes) if s != 1))

    # -- events ------------------------------------------------------------------------------------
    def _event(self, index: int, spec: OpSpec, record: OpRecord, in_axes, out_axes, params, tags) -> Event:
        view, noop, allocates, copies = record.memory
        device = _device_type(record.device)
        out_infos = [self._shared_info(raw, axes, device) for raw, axes in zip(record.out_raw, out_axes)]
        alloc = sum(o.nbytes for o in out_infos) if allocates else 0   # bytes from the shapes read at call time
        frozen_args, frozen_kwargs = record.frozen
        in_infos = [self._shared_info(r, a, device) for r, a in zip(record.in_raw, in_axes)]
        module = self.capture.module_calls.path(record.module)
        return new_event(index, spec.name, in_infos, out_infos, view, noop, alloc, alloc if copies else 0,
                         params or {}, record.error, module, tags or (None,) * len(record.ins), record.site,
                         (spec.name, frozen_args, frozen_kwargs))

    def _shared_info(self, raw: tuple, axes: tuple[Axis, ...], device: str) -> TensorInfo:
        """:meth:`info`, one object for each layout and axes of this pass: most tensors are one row's
        output and the next row's input, and an info's labels are then resolved once. Shared only
        within one :meth:`advance` (nothing reads a label until it ends), so no info created after a
        read shares labels resolved before it. Keyed by the axes' identity: the entry keeps them alive."""
        key = (raw, id(axes), device)
        hit = self._infos.get(key)
        if hit is None:
            hit = self._infos[key] = (self.info(raw, axes, device), axes)
        return hit[0]

    def info(self, raw: tuple, axes: tuple[Axis, ...], device: str) -> TensorInfo:
        layout = _LAYOUTS.get(raw)
        if layout is None:
            layout = _layout_facts(raw)
        shape = layout[0]
        if len(axes) != len(shape):   # (every name was checked against torch's shape when it was made)
            axes = ax.unknown_axes(shape)
        return new_info(shape, layout[1], layout[2], layout[3], layout[4], device, layout[5], axes, self.namer)

    def failed_event(self, record: OpRecord) -> Event:
        in_axes = [self.axes_of(n) for n in record.ins]
        return self._event(len(self.events), record.spec, record, in_axes, [], record.params, None)

    # -- sequences ---------------------------------------------------------------------------------
    def orient_sequences(self) -> None:
        """With ``S`` and ``T`` of one length, the first token tensor to enter is called ``T``. Where the
        run shows the other one queries it (scores of q and k whose rows are ``S`` and columns ``T``: an
        encoder that ran before its decoder), the two labels are swapped for display, so the queries'
        tokens read ``T`` and the source's ``S``, as in torch's ``nn.Transformer``."""
        if self.dims.get("S") is None or self.dims.get("S") != self.dims.get("T"):
            return
        for event in self.events:
            tags, outs = event.projections, [o.axes for o in event.outputs]
            if event.op in COMBINES and tags and tuple(tags[:2]) == ("q", "k") and outs and len(outs[0]) >= 2:
                rows, cols = (axis.atoms[0].root if len(axis.atoms) == 1 and axis.atoms[0].whole else None
                              for axis in outs[0][-2:])
                if (rows, cols) == ("S", "T"):
                    self.namer.swap_sequences()
                if {rows, cols} == {"S", "T"}:
                    return


class _PassCall:
    """The part of a record :meth:`Inference._names_of` reads, for a call without a row."""

    __slots__ = ("frozen", "params")

    def __init__(self, frozen, ins):
        self.frozen = frozen
        self.params = None


#: name rules that read the operands' layouts (strides, offset) as well as their names
_READS_LAYOUT = frozenset({strided})

#: the name of a buffer's axis that holds token positions written in parts (a static cache's length)
CAPACITY = "L"


def _without_ones(axes: tuple[Axis, ...]) -> tuple[Axis, ...]:
    return tuple(a for a in axes if a.size != 1)


def _whole_root(axis: Axis) -> bool:
    """A whole named axis (``T``, not a piece of one, a merge, or an unknown)."""
    return len(axis.atoms) == 1 and axis.atoms[0].whole and axis.atoms[0].root not in (ax.UNKNOWN, ax.COPIES)


def _same_node_as_input(node: int, ins) -> bool:
    return node in ins


def _single(tags) -> str | None:
    """The one projection tag among ``tags`` (None when there is none, or two different ones)."""
    tag = None
    for t in tags:
        if t is not None and t != tag:
            if tag is not None:
                return None   # operands of two projections: the result is neither
            tag = t
    return tag


#: the counts a fused width's stack factor is written with (``2*d_k``, ``3*D``)
_STACK_COUNTS = frozenset(str(f) for f in STACK_FACTORS.values())


def _stacked_root(root: str) -> bool:
    """``2*d_k``, ``3*D``, ``D+2*D_kv``: a width read as a stack of q, k and v parts."""
    return any("*" in term and term.partition("*")[0] in _STACK_COUNTS for term in root.split("+"))


def _projection_here(record: OpRecord, modules) -> str | None:
    """The kind of projection a linear is, from the module it runs in (or torch's packed MHA weight)."""
    path = modules.path(record.module)
    kind = projection_kind(path) if path else None
    if kind is None and modules.type_name(record.module) == "MultiheadAttention":
        args, kwargs = thaw_args(record.frozen)
        weight = arg(args, kwargs, 1, "weight")
        shape = getattr(weight, "shape", ())
        if len(shape) == 2 and shape[0] == 3 * shape[1]:
            kind = "qkv"
    return kind


def _fused_index(call: Call, parts: tuple[str, ...]) -> str | None:
    """``proj[0]``/``select(0, 1)`` on a fused axis (``qkv``, size 3): which of q, k, v it picks."""
    if selects_along_dim(call.op):
        dim, index = call.arg(1, "dim"), call.arg(2, "index")
    else:
        index = call.args[1]
        if isinstance(index, tuple):
            items = index
            ints = [(d, i) for d, i in enumerate(items) if isinstance(i, int)]
            plain = all(i is Ellipsis or i == slice(None) or isinstance(i, int) for i in items)
            if len(ints) != 1 or not plain or sum(i is Ellipsis for i in items) > 1:
                return None
            dim, index = ints[0]
            if any(i is Ellipsis for i in items[:dim]):   # counted from the end: x[..., 0, :]
                dim = len(call.in_axes[0]) - (len(items) - dim)
        elif isinstance(index, int):
            dim = 0
        else:
            return None
    axes = call.in_axes[0]
    if not isinstance(dim, int) or not isinstance(index, int) or not axes:
        return None
    size = axes[dim % len(axes)].size
    return parts[index % size] if size == len(parts) else None


def _additive_params(kept) -> dict:
    """Does the added tensor hide scores (values at or below -1e4: an additive mask)? Read on CPU only,
    from the operand kept at call time (none kept: not read)."""
    if kept is None or kept.numel() == 0:
        return {}
    return {"hides": bool(kept.min().item() <= -1e4)}


def _freeze_params(params: dict) -> tuple:
    return tuple(sorted((k, _hashable(v)) for k, v in params.items()))


def _hashable(value):
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return _freeze_params(value)
    return value


def _info_like(info: TensorInfo, axes: tuple[Axis, ...], namer) -> TensorInfo:
    return replace(info, dims=None, axes=axes, namer=namer)


#: raw layout -> (shape, stride, offset, dtype name, contiguous, bytes): the same layouts recur layer after layer
_LAYOUTS: dict[tuple, tuple] = {}


def _layout_facts(raw: tuple) -> tuple:
    shape, stride, offset, dtype = raw
    shape = tuple(shape)
    facts = (shape, stride, offset, _dtype_name(dtype), _is_contiguous(shape, stride),
             math.prod(shape) * dtype.itemsize)
    if len(_LAYOUTS) >= 8192:
        _LAYOUTS.clear()
    _LAYOUTS[raw] = facts
    return facts


def _is_contiguous(shape: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """torch's rule: row-major strides, ignoring axes of size 1 (and any tensor with no elements)."""
    expected = 1
    for size, step in zip(reversed(shape), reversed(stride)):
        if size == 0:
            return True
        if size != 1:
            if step != expected:
                return False
            expected *= size
    return True


_DTYPE_NAMES: dict = {}
_DEVICE_TYPES: dict = {}


def _device_type(device) -> str:
    """``device.type`` (``"cpu"``), remembered per device: torch builds the string afresh on each read."""
    name = _DEVICE_TYPES.get(device)
    if name is None:
        name = _DEVICE_TYPES[device] = device.type
    return name


def _dtype_name(dtype) -> str:
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).replace("torch.", "")
    return name
