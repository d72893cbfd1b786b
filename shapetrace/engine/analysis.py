"""What inference concluded about one run, as plain read-only data: everything the diagnostic rules read.

The :class:`~shapetrace.engine.tracer.Trace` records and infers; once its inference is final it hands
the rules an :class:`Analysis` (:meth:`Trace.analysis`), never itself. A rule that needs a fact adds it
here, so what the rules depend on stays in one place and an Analysis can be built by hand in a test.
This module imports neither the recorder (``tracer``) nor the capture.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from shapetrace.engine.ops import Family, OpSpec

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import Event
    from shapetrace.engine.library import Inside
    from shapetrace.engine.namer import Namer

#: (batch, head, query) of an all-NaN attention row; head None for a row of a 3-d output
NanRow = tuple[int, int | None, int]


@dataclass(frozen=True)
class Analysis:
    """The inferred facts of one run that the diagnostic rules read (and nothing else).

    Attributes:
        events: every op with a row, in order, with its inferred axis names.
        namer: the name store inference filled (roles, decompositions, size clashes); rules only read it.
        dims: the named sizes the run was traced with (``{"B": 2, "T": 6, ...}``).
        seeded_by_size: names were given by sizes alone (no input was named), so equal sizes are ambiguous.
        size_choices: each pair of declared names of equal size that a seed chose between and no later use
            settled (``("B", "T")`` for an input ``[4, 4, D]`` at B = T = 4): the names that rest on sizes.
        name_mismatches: how many declared names disagreed with what the ops showed.
        scalings: each scaling of scores or queries by a constant: ``{"event", "factor", "on"}``.
        pattern_conflicts: ``(event index, axis)`` where an einops pattern contradicts a proven name.
        nan_rows: the all-NaN attention rows read after the run; None when values were not read.
        nan_event: the index of the event whose output holds them (None: not known).
        value_note: why values were not read (the meta device has none); None when they were.
        unnamed_by_failure: ``(event, "TypeName: message")`` for each op whose inference failed (a
            fault of shapetrace): its results were left unnamed.
        inside: ``{event: Inside}`` for each op that ran inside library code (:mod:`.library`).
        rotaries: each rotary embedding found (:class:`~shapetrace.engine.rotary.Rotary`): does its
            table pair features as its rotation does.
        one_sided_rotations: ``(product event, "q" or "k")``: scores of queries against keys where only that side
            was turned by a rotary table (:func:`~shapetrace.engine.rotary_sides.one_sided_rotations`).
        mask_parts: ``{event: {operand: (shape, ...)}}``: the parts elementwise ops combined a mask from
            (:mod:`~shapetrace.engine.mask_parts`), for each operand of a call that takes a mask.
        unrolled: each call that lines up tokens rolled with the same tokens not rolled back
            (:class:`~shapetrace.engine.rolls.Unrolled`).
        misindexed: each pick by an index tensor along another axis than the one its indices count
            (:class:`~shapetrace.engine.indices.MisIndexed`).
        unread: the model's tensor arguments that no op read (:class:`~shapetrace.engine.unread.Argument`).
        bypassed: the ``linear`` events whose results nothing read nor returned while their input went on
            (:func:`~shapetrace.engine.unread.bypassed_projections`).
        dropped: the events of the first outermost call whose results reach nothing it returned
            (:func:`~shapetrace.engine.unread.dropped_records`): what they compute is no finding.
        in_modules: the events that ran inside a module call (the others ran in the script's own code).
        output_dims: the names of the tensor the first outermost module call returned (None: not known);
        output_made: ``(event, output)`` of the row that made it (None: no row did).
        windows: ``(module path, attribute, width)`` for each window a called module holds (``sliding_window``:
            :func:`~shapetrace.engine.modules.configured_windows`), read after the run.
        causal_declared: ``(module path, attribute)`` for each flag by which a called module declares itself
            causal (``is_decoder = True``: :func:`~shapetrace.engine.modules.declared_causal`), read after the run.
        pairings_declared: ``(module path, attribute, "halves" | "interleaved")`` for each flag by which a called
            module says how its rotary pairs features (``is_neox_style``, ``interleaved``:
            :func:`~shapetrace.engine.modules.declared_pairings`), read after the run.
        padded_in_front: ``(argument name, its axes' labels, its shape)`` of each mask the model was given with a row
            padded in front (:func:`~shapetrace.engine.unread.front_padded`).
        packed_positions: ``(argument name, its axes' labels, its shape)`` of each tensor of positions the model was
            given with several sequences packed in a row (:func:`~shapetrace.engine.unread.packed_positions`).
        ids_read_twice: ``(event, event)``: two tables looked up by one ids tensor and summed
            (:func:`~shapetrace.engine.lookups.ids_read_twice`).
        restarted_positions: ``(earlier lookup, later lookup, join, dim, entries before)`` (events): a position
            table read again from the first position by a step whose keys are appended after a cache
            (:func:`~shapetrace.engine.lookups.restarted_positions`).
        picked_at_length: ``(pick event, addition's op, length)``: a table's one entry picked at a length read from a
            tensor and added to every token of it (:func:`~shapetrace.engine.lookups.picked_at_length`).
        from_triangles: the hiding fills whose mask the code made from a causal triangle
            (:func:`~shapetrace.engine.mask_parts.from_triangles`).
    """

    events: Sequence[Event]
    namer: Namer
    dims: dict[str, int]
    seeded_by_size: bool = False
    size_choices: tuple[tuple[str, str], ...] = ()
    name_mismatches: int = 0
    scalings: Sequence[dict[str, Any]] = field(default_factory=tuple)
    pattern_conflicts: Sequence[tuple[int, str]] = field(default_factory=tuple)
    nan_rows: Sequence[NanRow] | None = None
    nan_event: int | None = None
    value_note: str | None = None
    unnamed_by_failure: Sequence[tuple[int, str]] = field(default_factory=tuple)
    inside: Mapping[int, Inside] = field(default_factory=dict)
    rotaries: Sequence[Any] = field(default_factory=tuple)
    one_sided_rotations: Sequence[tuple[int, str]] = ()
    mask_parts: Mapping[int, Mapping[int, tuple]] = field(default_factory=dict)
    unrolled: Sequence[Any] = field(default_factory=tuple)
    misindexed: Sequence[Any] = field(default_factory=tuple)
    unread: Sequence[Any] = field(default_factory=tuple)
    bypassed: Sequence[int] = field(default_factory=tuple)
    dropped: frozenset[int] = frozenset()
    in_modules: frozenset[int] = frozenset()
    output_dims: tuple | None = None
    output_made: tuple[int, int] | None = None   # (event, output) of the row that made the returned tensor
    windows: Sequence[tuple[str, str, int]] = ()
    causal_declared: Sequence[tuple[str, str]] = ()
    pairings_declared: Sequence[tuple[str, str, str]] = ()
    padded_in_front: Sequence[tuple[str, tuple, tuple]] = ()
    packed_positions: Sequence[tuple[str, tuple, tuple]] = ()
    ids_read_twice: Sequence[tuple[int, int]] = ()
    restarted_positions: Sequence[tuple[int, int, int, int, int]] = ()
    picked_at_length: Sequence[tuple[int, str, int]] = ()
    from_triangles: frozenset[int] = frozenset()

    def events_of(self, *families: Family) -> tuple[Event, ...]:
        """The events whose op is of one of ``families``, in order."""
        return self._selected(families, lambda spec: spec.family in families)

    def events_where(self, test: Callable[[OpSpec], bool]) -> tuple[Event, ...]:
        """The events whose op passes ``test`` (a function of the op's :class:`~.opspec.OpSpec` alone), in order."""
        return self._selected(test, test)

    def _selected(self, key, test: Callable[[OpSpec], bool]) -> tuple[Event, ...]:
        # most rules read one kind of op: each selection is made once per analysis and shared, rather
        # than every rule testing every event (the test is asked once per distinct op)
        found = self._selections.get(key)
        if found is None:
            verdicts = {spec: bool(test(spec)) for spec in {e.spec for e in self.events}}
            found = self._selections[key] = tuple(e for e in self.events if verdicts[e.spec])
        return found

    @cached_property
    def _selections(self) -> dict:
        return {}
