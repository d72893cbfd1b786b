"""A trace's inference after its run, and the plain data the rules read from it: what both a trace
(:mod:`.tracer`) and its other readings of equal sizes (:mod:`.readings`) conclude the same way.

Reads: the trace's capture, what its run left (the failure that ended it, NaN rows, the value note).
Adds: nothing; returns the concluded :class:`~.infer.Inference` and its :class:`~.analysis.Analysis`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.analysis import Analysis
from shapetrace.engine.events import Event
from shapetrace.engine.indices import misindexed_of, node_labels
from shapetrace.engine.infer import Inference, concluded
from shapetrace.engine.library import inside_library
from shapetrace.engine.lookups import ids_read_twice, picked_at_length, restarted_positions
from shapetrace.engine.mask_parts import from_triangles, mask_parts_of
from shapetrace.engine.rolls import unrolled_meetings
from shapetrace.engine.rotary import rotaries_of
from shapetrace.engine.rotary_sides import one_sided_rotations
from shapetrace.engine.unread import bypassed_projections, dropped_records, output_node, unread_arguments
from shapetrace.engine.unrowed import add_ending_failure
from shapetrace.engine.value_checked import note_final

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.tracer import Trace



def settled(trace: Trace, inference: Inference) -> Inference:
    """A trace's inference after its run, once, in order: :func:`.infer.concluded`, the row of the call
    that ended the block (if any), then what reads the final names (hidden copies, value checks)."""
    inference = concluded(inference)
    failed = trace._failure
    if trace.exception is not None and failed is not None and failed[0] is trace.exception:
        inference.events.append(inference.failed_event(failed[1]))
    else:   # (a call without a row that raised what ended the block: its row)
        add_ending_failure(inference, trace.capture, trace.exception)
    note_final(inference, trace.capture)   # (after the names are final: hidden copies, value checks)
    return inference


def _in_order(namer, choices: set[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """``choices`` in the order of the declared sizes (``B = T``, then ``T = H``)."""
    return tuple(pair for pair in namer.coinciding_sizes() if pair in choices)


def analysis_of(trace: Trace, inference: Inference, events: tuple[Event, ...], nan_event: int | None) -> Analysis:
    """What ``inference`` (of ``trace``'s capture) concluded, as the plain data the rules read."""
    rows, namer, capture = inference.event_of_record, inference.namer, trace.capture   # (while it records: so far)
    labels_of, output = node_labels(inference.axes, namer), output_node(capture)
    first = capture.module_calls.first_call
    given = getattr(first, "arguments", ())
    rotaries = rotaries_of(capture, rows)
    return Analysis(
        events=events, namer=namer, dims=dict(namer.dims),
        seeded_by_size=inference.seeded_by_size, size_choices=_in_order(namer, inference.size_choices),
        name_mismatches=inference.name_mismatches,
        scalings=tuple(inference.scalings), pattern_conflicts=tuple(inference.pattern_conflicts),
        nan_rows=None if trace._nan_rows is None else tuple(trace._nan_rows),
        nan_event=nan_event, value_note=trace._value_note,
        unnamed_by_failure=tuple(inference.unnamed_by_failure),
        unrolled=unrolled_meetings(capture.records, capture.nodes, rows, events),
        inside=inside_library(events, capture.opened, rows),
        rotaries=rotaries, mask_parts=mask_parts_of(capture, rows),
        one_sided_rotations=one_sided_rotations(capture.records, rows, events, rotaries),
        misindexed=misindexed_of(capture.records, labels_of, namer.plain_role, rows, events),
        unread=unread_arguments(capture),
        bypassed=tuple(rows[r] for r in bypassed_projections(capture) if r in rows),
        dropped=frozenset(rows[r] for r in dropped_records(capture) if r in rows),
        in_modules=frozenset(e for r, e in rows.items() if r < len(capture.records) and capture.records[r].module >= 0),
        output_dims=None if output is None else labels_of(output), windows=tuple(capture.module_calls.windows),
        output_made=None if output is None else inference.made_by.get(output),
        causal_declared=tuple(capture.module_calls.causal),
        pairings_declared=tuple(capture.module_calls.pairings),
        padded_in_front=tuple((a.name, labels_of(a.node), a.shape) for a in given if a.front_padded),
        packed_positions=tuple((a.name, labels_of(a.node), a.shape) for a in given if a.packed),
        ids_read_twice=ids_read_twice(capture.records, rows),
        restarted_positions=restarted_positions(capture.records, rows),
        picked_at_length=picked_at_length(capture.records, rows, lambda n: tuple(capture.nodes[n].shape),
                                          capture.size_read.stamp, getattr(first, "start", 0)),
        from_triangles=from_triangles(capture.records, rows, events),
    )

