"""The inference's state: what the passes of :mod:`shapetrace.engine.infer` read and add, per capture.

:class:`Inference` holds the facts the passes build (axes per node, tags, writes, events) and runs
them over the records added since its last call (:meth:`Inference.advance`: a trace's events may be
read while it records); the passes themselves are functions in their own modules. :func:`concluded`
runs what comes after the run, once, in order; :func:`corrected` applies what later uses proved (the
pins of :mod:`.corrections`) to the ops before them, walking again only where a pin changes what a
record read (:func:`changed_by`).

Reads: the capture's records, the namer. Adds: every field of :class:`Inference` (through the passes),
and which record first used each node (``used``), which nodes were renamed after a use (``renamed``)
and which were seeded (``seeded``): what :func:`changed_by` reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shapetrace.engine import axes as ax
from shapetrace.engine.axes import Axis
from shapetrace.engine.capture import OpRecord, PassRecord
from shapetrace.engine.events import Event, TensorInfo
from shapetrace.engine.infer import corrections as corrections_pass
from shapetrace.engine.infer import rows, sequences
from shapetrace.engine.infer.einops import chained, finish_pattern
from shapetrace.engine.infer.elements import ElementPass, replays_of
from shapetrace.engine.infer.guesses import Guesses
from shapetrace.engine.infer.record import infer_op, infer_pass, op_unnamed, unnamed_outputs
from shapetrace.engine.infer.seeds import built_argument, seed
from shapetrace.engine.namer import Namer


class Inference:
    """Names and events of one capture, made incrementally: :meth:`advance` reads the records added
    since the last call (a trace's events may be read while it records)."""

    def __init__(self, capture, namer: Namer, dims: dict, seed_order: Sequence[str],
                 pins: dict[int, tuple[Axis, ...]] | None = None,
                 readings: dict[int, tuple[str, ...]] | None = None):
        self.capture = capture
        self.pins = pins or {}                         # node -> axes a later use decided (see corrections)
        self.readings = readings or {}                 # entered node -> the fitting seed it is read with
        self.from_parameters: set[int] = set()          # nodes computed from module parameters only
        self.from_entries: set[int] = set()             # nodes computed from unseeded entered data only (.seeds)
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
        self.reduced_into: dict[int, frozenset[int]] = {}   # node -> reduction rows that entered it without a row
        self.carried: set[int] = set()   # nodes traced back to a row through calls without a row
        self.event_of_record: dict[int, int] = {}
        self.scalings: list[dict[str, Any]] = []
        self.pattern_conflicts: list[tuple[int, str]] = []
        self.name_mismatches = 0
        self.seeded_by_size = False
        self.size_choices: set[tuple[str, str]] = set()   # equal-size declared names a seed chose between
        self.unnamed_by_failure: list[tuple[int, str]] = []   # (event, "TypeName: message"): see op_unnamed
        self.name_memo: dict[tuple, tuple] = {}
        self.interned: dict[tuple, tuple] = {}
        self.infos: dict[tuple, tuple[TensorInfo, tuple]] = {}   # (layout, id(axes), device) -> (info, axes)
        self.clash_memo: dict[tuple, tuple[bool, tuple]] = {}   # (id of each axes, shapes) -> (clash?, axes)
        self.pending_pattern = None   # einops chain: (id, out node, event, groups, (in groups, in axes), read lengths)
        self.elements = ElementPass(namer, replays_of(capture))   # element provenance: producers, replays (.elements)
        self.guesses = Guesses()                       # which nodes were made from a size guess (.guesses)
        self.index = 0                                 # the record being inferred
        self.used: dict[int, int] = {}                 # node -> the first record that read it or showed it
        self.renamed: set[int] = set()                 # nodes given other axes after an earlier record used them
        self.seeded: set[int] = set()                  # entered nodes named from the declared sizes (.seeds)
        self._done = 0

    def axes_of(self, node: int) -> tuple[Axis, ...]:
        """A node's axes: as inferred, pinned by a later use, seeded where it entered, or unknown."""
        first_read = node not in self.used
        if first_read:
            self.used[node] = self.index
        found = self.axes.get(node)
        if found is not None:
            return built_argument(self, node, found) if first_read else found
        pinned = self.pins.get(node)
        if pinned is not None:
            self.axes[node] = pinned
            return pinned
        facts = self.capture.nodes[node]
        seeded = seed(self, node, facts) if facts.entered else None
        if seeded is not None:
            return seeded
        found = ax.unknown_axes(facts.shape)
        self.axes[node] = found
        return found

    def advance(self) -> list[Event]:
        """Every record added since the last call, through :mod:`.record`'s steps in order."""
        records = self.capture.records
        self.infos.clear()   # labels read since the last pass are not shared with the infos of this one
        for index in range(self._done, len(records)):
            record = records[index]
            kind = type(record)
            self.index = index
            if self.pending_pattern is not None and not chained(self, record):
                finish_pattern(self)
            if kind is OpRecord:
                try:
                    infer_op(self, index, record)
                except Exception as exc:   # a fault of the inference itself, never of the traced code
                    op_unnamed(self, index, record, exc)
            elif kind is PassRecord:
                try:
                    infer_pass(self, record)
                except Exception as exc:
                    unnamed_outputs(self, record.outs, record.out_shapes, exc)
            else:
                self.axes[record.node] = record.axes
                if record.was is not None:
                    self.declared[record.was] = record.axes
        self._done = self.index = len(records)
        return self.events

    def rename(self, node: int, axes: tuple[Axis, ...]) -> None:
        """``node``'s axes replaced (a write proved names for its target, an einops pattern named its
        result); noted where a record before this one already used the old ones (:func:`changed_by`)."""
        if self.used.get(node, self.index) < self.index:
            self.renamed.add(node)
        self.axes[node] = axes

    def finish(self) -> None:
        """After the run: the last einops chain ends, failed calls that ended the block join."""
        self.advance()
        if self.pending_pattern is not None:
            finish_pattern(self)

    def info(self, raw: tuple, axes: tuple[Axis, ...], device: str) -> TensorInfo:
        """A :class:`TensorInfo` of a layout read from torch, with these axes (:func:`.rows.info`)."""
        return rows.info(self, raw, axes, device)

    def failed_event(self, record: OpRecord) -> Event:
        """The event of the call that raised and ended the traced block."""
        in_axes = [self.axes_of(n) for n in record.ins]
        return rows.event_of(self, len(self.events), record.spec, record, in_axes, [], record.params, None)

    def orient_sequences(self) -> None:
        """``T`` and ``S`` swapped for display where the source entered first (:mod:`.sequences`)."""
        sequences.orient_sequences(self)


def concluded(inference: Inference) -> Inference:
    """After the run, once, in order: the walk finished (:meth:`Inference.finish`), the names later
    uses proved for earlier tensors applied (:func:`corrected`), and which sequence queries the other
    (:mod:`.sequences`). The one call the tracer makes when the run has ended."""
    inference.finish()
    inference = corrected(inference)
    inference.orient_sequences()
    return inference


def corrected(inference: Inference) -> Inference:
    """The finished inference with the names later uses proved for earlier tensors (the pins of
    :func:`.corrections.corrections`): itself where no pin changes anything a record used
    (:func:`changed_by`: a static cache's buffer first read by the write that names it); else the
    records walked again with the pins, where every call the pins do not reach is answered from this
    walk's memos (its name rules, element replays and broadcast verdicts: functions of the operands'
    axes, which stay the same objects wherever the pins do not reach), so only what the pins reach is
    named afresh. A fused width whose stack a use decided (:meth:`.Namer.decide`) changes only the
    labels of its pieces: walked again, and nothing reused, only where a record read them before the
    decision (``namer.relabelled``); a record after it read the decided labels, as a second walk would."""
    pins = corrections_pass.corrections(inference)
    relabelled = bool(inference.namer.relabelled)
    if not relabelled and not changed_by(inference, pins):
        return inference
    again = Inference(inference.capture, inference.namer, inference.dims, inference.seed_order, pins,
                      inference.readings)
    if not relabelled:   # (the labels every memo was made with still hold)
        again.name_memo, again.interned = inference.name_memo, inference.interned
        again.clash_memo, again.elements = inference.clash_memo, inference.elements.reused()
    again.finish()
    return again


def changed_by(inference: Inference, pins: dict[int, tuple[Axis, ...]]) -> bool:
    """Would a walk with these pins differ from this one? Only where a pinned node holds other axes
    than its pin, was given its axes after a record before used the old ones, or was named from the
    declared sizes (a pinned node is never seeded, and a seed records which sequence entered). A node
    no record made or read (an input named with ``shapetrace.name`` before any use: its tensor reads
    as the declared node from then on) changes nothing. Where none changes, every record read what
    the pins say, and walking again would repeat this walk."""
    for node, axes in pins.items():
        if node in inference.renamed or node in inference.seeded:
            return True
        held = inference.axes.get(node)
        if held != axes and (held is not None or node in inference.used):
            return True
    return False
