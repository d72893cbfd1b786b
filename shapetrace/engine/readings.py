"""Findings checked under every reading of equal sizes.

An input whose shape fits more than one seed of the declared sizes (``[4, 4, 32]`` at B = T = 4 is
``[B, T, D]`` or ``[T, B, D]``: fairseq's and ChatGLM2's sequence-first input) is named by the first
seed that fits, in the declared order (:mod:`.infer.seeds`), and nothing in the code may settle which.
A finding (an error or a warning) of that first reading rests on the order of equal sizes unless every
other fitting reading finds it too: the capture is inferred again with each other seed pinned
(``Inference.readings``) and the rules run on each; a finding is kept where each reading has one of the
same kind on the same source line (the rules' own unit: :func:`.rules.diagnose.diagnose` reports one per
kind and line). The others become one ``order-of-equal-sizes`` note, and the verdict says why it is ``?``.

The names shown are checked the same way (:func:`names_in_every_reading`, for the report's table): an axis
the readings name differently shows no name, one they all name alike keeps it. Each other reading is
inferred once per trace, for the findings and the names both.

The findings are read again only where the first reading found an error or a warning and an input fits
more than one seed; the names, where an input fits more than one seed and a report is made. A run whose
inputs fit one seed each (distinct sizes, or inputs named with ``shapetrace.name``) pays nothing. At most
:data:`MAX_READINGS` readings besides the first (every combination of the fitting seeds of every such
input); where more fit, no finding and no name that could rest on them is kept.
Inputs only: a tensor the model holds whose shape fits more than one seed yields to its use
(:mod:`.infer.corrections`) and its names never cross an index (:mod:`.infer.guesses`).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from shapetrace.engine.diagnostic import SEVERITY_ORDER, Diagnostic
from shapetrace.engine.infer import Inference
from shapetrace.engine.infer.seeds import fitting_seeds, sequence_name
from shapetrace.engine.kinds import Kind
from shapetrace.engine.namer import Namer

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import Event
    from shapetrace.engine.tracer import Trace

#: the most readings inferred besides the first (each is one more inference and run of the rules)
MAX_READINGS = 8
_FINDINGS = ("error", "warning")
Choices = list[tuple[int, list[tuple[str, ...]]]]   # (entered node, its fitting seeds, the first one first)


def in_every_reading(trace: Trace, found: list[Diagnostic]) -> list[Diagnostic]:
    """``found`` (the first reading's findings) checked under every other fitting reading: one each of them
    makes too (same kind, same line) is kept as it is. Where none of the worst severity is kept so, those of
    that severity are kept if each other reading finds another bug at least as bad (an error for an error),
    since the code is wrong whichever order is true, each with a sentence saying that its names rest on the
    order and what the other readings find. The rest are left out, with one note that says which and why
    (none left out, nothing added: ``found`` itself)."""
    if not trace._finished or not any(d.severity in _FINDINGS for d in found):
        return found
    inference = trace._inferred()
    choices = ambiguous_inputs(inference)
    readings = other_readings(choices)
    if not readings:
        return found
    events = inference.events
    seen = [_findings(trace, r) for r in readings] if len(readings) <= MAX_READINGS else None
    held = [d for d in found if d.severity not in _FINDINGS or seen is not None and all(_key(events, d) in s
                                                                                       for s in seen)]
    unproven = [d for d in found if d not in held]
    worst = min((SEVERITY_ORDER[d.severity] for d in held if d.severity in _FINDINGS), default=len(SEVERITY_ORDER))
    first = min((SEVERITY_ORDER[d.severity] for d in unproven), default=worst)
    kept, dropped = list(held), []
    for d in unproven:   # (kept only where nothing proven is as bad, and every reading finds a bug as bad)
        if SEVERITY_ORDER[d.severity] == first < worst and seen is not None and all(_as_bad(d, s) for s in seen):
            kept.append(replace(d, message=d.message + _elsewhere(inference, choices, readings, seen, d)))
        else:
            dropped.append(d)
    if not dropped:
        return kept
    missing = readings if seen is None else [r for r, s in zip(readings, seen)
                                              if any(_key(events, d) not in s for d in dropped)]
    return kept + [_note(inference, choices, dropped, missing, len(readings))]


def _as_bad(d: Diagnostic, other: dict[tuple[str, str], tuple[str, str]]) -> bool:
    """Does another reading find a bug at least as bad as ``d`` (an error for an error)?"""
    return any(SEVERITY_ORDER[severity] <= SEVERITY_ORDER[d.severity] for severity, _ in other.values())


def _elsewhere(inference: Inference, choices: Choices, readings: list[dict[int, tuple[str, ...]]],
               seen: list[dict[tuple[str, str], tuple[str, str]]], d: Diagnostic) -> str:
    """`` Its names rest on reading the input [4, 4, 32] as [B, T, D] (B = T = 4); read [T, B, D], the
    code has another bug: attends-over-batch at #13 bmm.``"""
    worst = SEVERITY_ORDER[d.severity]
    others = "; ".join(f"read {_reading(choices, r)}, the code has another bug: "
                       + ", ".join(where for severity, where in s.values() if SEVERITY_ORDER[severity] <= worst)
                       for r, s in zip(readings, seen))
    first = {n: f[0] for n, f in choices}
    return f" Its names rest on reading the input {_shapes(inference, choices)} as {_reading(choices, first)} " \
           f"({_pairs(inference)}); {others}."


def ambiguous_inputs(inference: Inference) -> Choices:
    """Each input (not a held tensor) seeded with one of several fitting seeds, with those seeds."""
    out: Choices = []
    for node in sorted(inference.seeded):
        facts = inference.capture.nodes[node]
        if inference.ambiguous.get(node) != node or facts.held:
            continue
        seq = inference.sequences.get(node) or sequence_name(inference, node, facts.shape)
        fitting = [tuple(names) for names in fitting_seeds(inference, facts.shape, seq)]
        if len(fitting) > 1:
            out.append((node, fitting))
    return out


def other_readings(choices: Choices) -> list[dict[int, tuple[str, ...]]]:
    """Every combination of the fitting seeds but the first reading (each input's first seed)."""
    nodes = [node for node, _ in choices]
    combos = itertools.product(*(fitting for _, fitting in choices))
    return [dict(zip(nodes, combo)) for combo in itertools.islice(combos, 1, None)] if choices else []


def names_in_every_reading(trace: Trace, events: list[Event]) -> list[Event]:
    """``events`` with every axis name that another fitting reading of equal sizes gives otherwise left out
    (a name that may be wrong is not printed; one every reading gives stays): ``[T, B, D]`` at B = T = 4
    read ``[B, T, D]`` first shows neither name where the readings swap them. An event that another
    reading does not record alike (another op, or no row) keeps no name at all; so does every event where
    more than :data:`MAX_READINGS` readings fit. A run with one reading (distinct sizes, or inputs named
    by ``shapetrace.name``) is ``events`` itself: nothing is inferred again."""
    if not trace._finished:
        return events
    inference = trace._inferred()
    readings = other_readings(ambiguous_inputs(inference))
    if not readings:
        return events
    others = [_inferred_as(trace, r) for r in readings] if len(readings) <= MAX_READINGS else []
    record_of = {row: record for record, row in inference.event_of_record.items()}
    out = []
    for e in events:
        record = record_of.get(e.index)
        twins = [o.events[o.event_of_record[record]] for o in others
                 if record is not None and record in o.event_of_record and o.event_of_record[record] < len(o.events)]
        alike = len(twins) == len(readings) and all(t.op == e.op and len(t.inputs) == len(e.inputs)
                                                   and len(t.outputs) == len(e.outputs) for t in twins)
        out.append(_agreed(e, twins if alike else None))
    return out


def _agreed(e: Event, twins: list[Event] | None) -> Event:
    """``e`` with the names its ``twins`` (the same call under other readings) all give too; None: no name."""
    def kept(info, others):
        dims = tuple(d if others is not None and all(o.dims[i] == d for o in others) else None
                     for i, d in enumerate(info.dims))
        if dims == info.dims:
            return info
        info = copy.copy(info)
        info.__dict__["dims"] = dims
        return info

    pairs = [(info, None if twins is None else [t.inputs[i] for t in twins]) for i, info in enumerate(e.inputs)]
    outs = [(info, None if twins is None else [t.outputs[i] for t in twins]) for i, info in enumerate(e.outputs)]
    inputs, outputs = [kept(i, o) for i, o in pairs], [kept(i, o) for i, o in outs]
    if all(a is b for a, b in zip((*inputs, *outputs), (*e.inputs, *e.outputs))):
        return e
    shown = copy.copy(e)
    shown.inputs, shown.outputs = inputs, outputs
    return shown


def _inferred_as(trace: Trace, readings: dict[int, tuple[str, ...]]) -> Inference:
    """The capture inferred again with ``readings`` pinned, once per trace (the findings and the names
    shown both read it)."""
    from shapetrace.engine.settle import settled

    cache = trace.__dict__.setdefault("_readings", {})
    key = tuple(sorted(readings.items()))
    if key not in cache:
        namer = _fresh(trace.namer)
        cache[key] = settled(trace, Inference(trace.capture, namer, namer.dims, trace.seed_order, readings=readings))
    return cache[key]


def _findings(trace: Trace, readings: dict[int, tuple[str, ...]]) -> dict[tuple[str, str], tuple[str, str]]:
    """The findings of the capture read with ``readings``: (kind, source line) -> (severity, where)."""
    from shapetrace.engine.rules.diagnose import diagnose
    from shapetrace.engine.settle import analysis_of

    again = _inferred_as(trace, readings)
    nan_event = None if trace._nan_record is None else again.event_of_record.get(trace._nan_record, 0)
    events = tuple(again.events)
    return {_key(events, d): (d.severity, _where(events, d))
            for d in diagnose(analysis_of(trace, again, events, nan_event)) if d.severity in _FINDINGS}


def _fresh(namer: Namer) -> Namer:
    """A namer of the same declared sizes, with nothing a reading decided (a width's stack, clashes)."""
    given = dict(namer.dims)
    if namer.derived_head_width:
        given.pop("d_k", None)   # (derived again, as the first namer derived it)
    return Namer(given, declared_roles=dict(namer.declared_roles))


def _key(events: Sequence, d: Diagnostic) -> tuple[str, str]:
    return d.kind, events[d.event].source if d.event is not None and d.event < len(events) else ""


def _where(events: Sequence, d: Diagnostic) -> str:
    return f"{d.kind} at #{d.event} {events[d.event].op}" if d.event is not None and d.event < len(events) else d.kind


def _shapes(inference: Inference, choices: Choices) -> str:
    return " and ".join(f"[{', '.join(map(str, inference.capture.nodes[n].shape))}]" for n, _ in choices)


def _reading(choices: Choices, reading: dict[int, tuple[str, ...]]) -> str:
    return " and ".join(f"[{', '.join(reading[n])}]" for n, _ in choices)


def _pairs(inference: Inference) -> str:
    return ", ".join(f"{a} = {b} = {inference.namer.dims[a]}" for a, b in inference.namer.coinciding_sizes())


def _note(inference: Inference, choices: Choices, dropped: list[Diagnostic],
          missing: list[dict[int, tuple[str, ...]]], total: int) -> Diagnostic:
    events = inference.events
    where = ", ".join(_where(events, d) for d in dropped)
    first = {n: f[0] for n, f in choices}
    if total > MAX_READINGS:
        others = f"the other {total} readings of equal sizes were not checked (at most {MAX_READINGS})"
    else:
        others = "not where it is read " + " or ".join(_reading(choices, r) for r in missing)
    they = "It is" if len(dropped) == 1 else "They are"
    return Kind.ORDER_OF_EQUAL_SIZES.found(None, (
        f"Not reported: {where}. {they} found where the input {_shapes(inference, choices)} is read "
        f"{_reading(choices, first)}, {others}: {_pairs(inference)}, and the names rest on the order of equal "
        f"sizes, which nothing in the code settles."),
        "Trace at distinct sizes, or name the input in its own order with shapetrace.name(x, \"T B D\").")
