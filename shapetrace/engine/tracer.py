"""Record the tensor operations of a forward pass as plain data: capture while it runs, infer after.

``trace()`` installs the :class:`~.capture.Recorder` (a :class:`torch.overrides.TorchFunctionMode`)
that sees each Python-level call a user writes (``x.view(...)``, ``q @ k``, ``F.linear``), runs it
unchanged and keeps what torch says about it (:mod:`.capture`). Names, provenance and events are
inferred from the whole record afterwards (:mod:`.infer`), and diagnostics from the events.
No Rich here: rendering lives in ``shapetrace.render``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch

from shapetrace.engine import axes as ax
from shapetrace.engine.analysis import Analysis, NanRow
from shapetrace.engine.axes import Axis
from shapetrace.engine.capture import (
    OpRecord,
    PassRecord,
    Recorder,
    drop_closed_recorders,
    freeze_args,
    raw_layout,
    remove_mode,
    run_opened,
    shares_storage,
)
from shapetrace.engine.collector import collector_held, hold_collector, release_collector
from shapetrace.engine.diagnostic import SEVERITY_ORDER
from shapetrace.engine.events import Event, TensorInfo
from shapetrace.engine.findings import nan_rows_of
from shapetrace.engine.head_width import with_head_width
from shapetrace.engine.infer import Inference
from shapetrace.engine.modules import ModulePaths
from shapetrace.engine.namer import Namer
from shapetrace.engine.settle import analysis_of, settled
from shapetrace.engine.sites import forget_cwd, remember_cwd
from shapetrace.engine.unrowed import new_capture
from shapetrace.engine.vocabulary import canonical_dims
from shapetrace.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.report import Report

__all__ = ["Trace", "active_trace", "freeze_args", "name_axes", "run_opened"]
_shares_storage = shares_storage   # (the name tests and older callers use)


def _unmeasured_notes(trace: Trace) -> list:
    """The notes of what the values could not check once the run has ended (each a ``?``, never a ``✓``)."""
    from shapetrace.engine.grouped_positions import grouped_position_masks
    from shapetrace.engine.lengths_read import unmeasured_lengths
    from shapetrace.engine.pooled_read import unmeasured_read
    return unmeasured_read(trace) + unmeasured_lengths(trace) + grouped_position_masks(trace)


class Trace:
    """The record of one traced run: events, axis names and diagnostics.

    Use :func:`shapetrace.trace` to make one. ``events`` is a list of
    :class:`Event`; ``diagnostics`` is computed from them on first access.
    In Jupyter a trace displays itself as the table (``_repr_mimebundle_``).

    >>> import torch, shapetrace
    >>> x = torch.zeros(2, 6, 512)
    >>> with shapetrace.trace(dims="B=2 T=6 D=512 H=8") as t:
    ...     heads = x.view(2, 6, 8, 64).transpose(1, 2)
    ...     merged = heads.contiguous().view(2, 6, 512)
    >>> t
    <Trace: 4 ops, 1 error, 0 warnings>
    >>> e = t.events[3]
    >>> e.op, e.output.dims, e.view
    ('view', ('B', '!H*T', '!H*T*d_k'), True)
    >>> t.diagnostics[0].kind
    'mixed-axis'
    """

    backward = None   # the backward pass: traced by :class:`~.backward.trace.BackwardTrace` only

    def __init__(self, dims: dict[str, int] | None = None, seed_order: Sequence[str] | None = None):
        sizes, declared = canonical_dims(dims or {})
        self.namer = Namer(sizes, declared_roles=declared)
        self.dims = self.namer.dims
        order = [canonical_dims({n: 1})[0].popitem()[0] for n in seed_order] if seed_order else list(sizes)
        self.seed_order = order
        self.capture = new_capture()   # (every call kept for a row under --all: .unrowed)
        self._inference = Inference(self.capture, self.namer, self.dims, order)
        self._nan_rows: list[NanRow] | None = None   # read after the run (_finish), or given (read_values)
        self._value_note: str | None = None   # why no values were read, when none were (read_values)
        self._nan_event: int | None = None
        self.exception: BaseException | None = None
        self.result: Any = None
        self._mode: Recorder | None = None
        self._paths: ModulePaths | None = None
        self._held = None   # the collector thresholds this trace raised, to put back (hold_collector)
        self._diagnostics = self._failure = None
        self._dependencies: tuple[list, list[str]] | None = None
        self.probe = None   # the dependency contracts' :class:`.dependencies.Probe`, once measured (:mod:`.padding`)
        self._triangle: str | None = None   # the attention weights' zero triangle (dependencies)
        self._uniform_rows: list = []   # the attention rows the same on every key (:mod:`.unattended`)
        self._finished = self._concluded = False
        self._head_width: int | None = None
        self._nan_record: int | None = None
        self._shown: list[Event] | None = None   # events set in place of the inferred ones

    # -- context manager ---------------------------------------------------
    def __enter__(self) -> Trace:
        if self._mode is not None:
            raise UsageError("this trace is already recording: a trace can be entered once at a time "
                             "(start another with shapetrace.trace())")
        drop_closed_recorders()
        self._thread = threading.get_ident()
        self._mode = Recorder(self.capture)
        self._held = hold_collector()
        remember_cwd()
        self._mode.__enter__()
        _ACTIVE.append(self)
        self._paths = ModulePaths(self.capture)
        self._paths.install()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self in _ACTIVE:
            _ACTIVE.remove(self)
            forget_cwd()
        release_collector(self._held)
        self._held = None
        if self._paths is not None:
            self._paths.remove()
        self._paths = None
        self.capture.modules.clear()
        if self._mode is not None:
            if threading.get_ident() == self._thread:
                remove_mode(self._mode)   # exactly this recorder, even if the traced code left its own mode on top
            else:   # exited in another thread (a generator closed there): it records nothing more, and
                self._mode.closed = True   # its own thread takes it off its stack when it next enters one
        self._mode = None
        self.exception = exc
        self._finish(exc)

    def _finish(self, exc: BaseException | None) -> None:
        """What must be read when the run ends (attention outputs the capture kept, which later code could
        change; those screened at their call had no NaN); the rest is inferred on first read."""
        self._failure = self.capture.unrecorded_failure
        self.capture.unrecorded_failure = None
        checked, self.capture.value_checked = self.capture.value_checked, []
        cleared = self.capture.nan_held.cleared()   # (rows the code itself replaced: no error)
        found = nan_rows_of([pair for pair in checked if pair[0] not in cleared])   # (rows, record index), or None
        if found is None and (self.capture.values_screened or cleared):   # (read at their calls: none kept a NaN)
            found = ([], None)
        if self.capture.keep_top_call:
            from shapetrace.engine.unattended import triangular_weights, uniform_rows
            self._triangle = triangular_weights(checked)
            self._uniform_rows = uniform_rows(checked)
        if found is not None:
            self._nan_rows, self._nan_record = found
        self._diagnostics = None
        self._finished = True

    @collector_held()   # (the analysis's many small objects are not walked again and again)
    def _inferred(self) -> Inference:
        """The inference, advanced over every record so far; after the run, finished once (the last
        einops chain, the failure that ended the block, NaN rows, which sequence queries which)."""
        inference = self._inference
        if not self._finished:
            inference.advance()
            return inference
        if not self._concluded:
            self._concluded = True
            inference = self._inference = settled(self, with_head_width(self, inference))   # (the passes after the run)
            if self._nan_record is not None:
                self._nan_event = inference.event_of_record.get(self._nan_record, 0)
            self.capture.module_calls.settle()   # every module is named: the trace lets them go
        return inference

    @property
    def head_width(self) -> int | None:
        """``d_k`` as the model's own head split proves it where not D / H (:mod:`.head_width`), or None."""
        if self._finished:
            self._inferred()
        return self._head_width

    @property
    def nan_rows(self) -> list[NanRow] | None:
        """``(batch, head, query)`` of each all-NaN attention row (head None for a 3-d output): read
        from the first traced attention output that has any once the run ends, or given by
        :meth:`read_values`; None when no values were read."""
        return self._nan_rows

    def read_values(self, nan_rows: Sequence[NanRow] | None, note: str | None = None) -> None:
        """Give the trace what was read from the values after the run, in place of its own reading:
        the all-NaN attention rows, or None with ``note`` saying why they could not be read (the meta
        device has no values). The diagnostics are worked out again on their next read."""
        self._nan_rows = None if nan_rows is None else list(nan_rows)
        self._value_note = note
        self._diagnostics = None

    @property
    def nan_event(self) -> int | None:
        """The index of the first event whose output has a row of NaNs (None when none has)."""
        if self._nan_record is not None:
            self._inferred()
        return self._nan_event

    # -- events ------------------------------------------------------------
    @property
    def events(self) -> list[Event]:
        """Every recorded call with a row, in order, inferred from the capture on first read (or the
        events set in their place: a filtered copy of a trace shares its inference, never its list)."""
        if self._shown is not None:
            return self._shown
        return self._inferred().events

    @events.setter
    def events(self, value: list[Event]) -> None:
        self._inferred()
        self._shown = list(value)
        self._diagnostics = None

    @property
    def seeded_by_size(self) -> bool:
        return self._inferred().seeded_by_size

    @property
    def name_mismatches(self) -> int:
        return self._inferred().name_mismatches

    # -- names ---------------------------------------------------------------
    def set_names(self, tensor: torch.Tensor, names: Sequence[str | None]) -> None:
        """Name the axes of ``tensor`` explicitly (what :func:`shapetrace.name` calls)."""
        if len(names) != tensor.dim():
            raise UsageError(f"{len(names)} names given for a tensor with {tensor.dim()} axes "
                             f"(shape {list(tensor.shape)}); give one name per axis")
        axes = tuple(ax.root_axis(n, s) if n else ax.unknown_axis(s) for n, s in zip(names, tensor.shape))
        self.capture.declare(tensor, axes)

    def axes_of(self, tensor: torch.Tensor) -> tuple[Axis, ...]:
        """The axes this trace gives ``tensor`` (as the run has shown so far)."""
        node = self.capture.node_of(tensor)
        axes = self._inferred().axes_of(node)
        return axes if ax.sizes_of(axes) == tuple(tensor.shape) else ax.unknown_axes(tuple(tensor.shape))

    def tag_of(self, tensor: torch.Tensor) -> str | None:
        node = self.capture.known_node(tensor)
        return None if node is None else self._inferred().tags.get(node)

    def info(self, tensor: torch.Tensor) -> TensorInfo:
        """What torch says about ``tensor`` now, with the names this trace gives its axes."""
        return self._inference.info(raw_layout(tensor), self.axes_of(tensor), tensor.device.type)

    # -- results -------------------------------------------------------------
    @property
    @collector_held()
    def diagnostics(self):
        """Structured findings (:class:`shapetrace.engine.diagnostic.Diagnostic`), errors first.

        >>> import torch, shapetrace
        >>> with shapetrace.trace(dims="B=2 T=6 D=512 H=8") as t:
        ...     s = torch.zeros(2, 8, 6, 6).softmax(dim=-1)
        >>> t.diagnostics
        []
        """
        if self._diagnostics is None or not self._finished:
            from shapetrace.engine.declared import held_causal
            from shapetrace.engine.readings import in_every_reading
            from shapetrace.engine.rules.causes import with_witnesses
            from shapetrace.engine.rules.diagnose import diagnose
            found = in_every_reading(self, diagnose(self.analysis()))   # (names resting on equal sizes)
            if self._finished:   # a second witness: folded into the rule's error it backs, else its own finding
                from shapetrace.engine.dependencies import CAUSAL
                found = with_witnesses(found, self._measured()[0]) + _unmeasured_notes(self)
                found = held_causal(found, CAUSAL in self._measured()[1])   # (a declared causal module measured so)
            self._diagnostics = sorted(found, key=lambda d: SEVERITY_ORDER[d.severity])
        return self._diagnostics

    @property
    def contracts(self) -> list[str]:
        """The dependency contracts measured on the values that held (none before the run ends)."""
        return list(self._measured()[1]) if self._finished else []

    @property
    def unmeasured(self) -> list[str]:   # the dependency contracts not measured, each with why
        return list(self._measured()[2]) if self._finished else []

    def check_dependencies(self, per_entry: tuple = ()) -> None:
        """Measure on perturbed copies after the run (:mod:`.dependencies`); ``per_entry``: see there."""
        self.capture.keep_top_call, self.capture.per_entry = True, tuple(per_entry)

    def _measured(self) -> tuple[list, list[str], list[str]]:
        """``(broken contracts as findings, held, not measured)``, measured once after the run."""
        if self._dependencies is None:
            from shapetrace.engine import dependencies, padding
            self._dependencies = padding.padded(dependencies.measure_trace(self), self)
        return self._dependencies

    def analysis(self) -> Analysis:
        """What inference concluded, as the plain data the rules read (never the recorder): final after the run."""
        return analysis_of(self, self._inferred(), tuple(self.events), self.nan_event)

    def left_out(self) -> dict[str, int]:
        """The calls that ran without a row of their own, by op name in order of first use, with how many
        times each ran (:func:`calls_without_a_row`): the table leaves them out; this says what it left out."""
        return calls_without_a_row(self.capture, self._inferred().event_of_record)

    def setup_indices(self) -> set[int]:
        """The indices of the events that ran while a model was being built, outside any module's forward
        (a weight deep-copied by ``clones()``, a ``tril`` buffer, an initialiser): the capture marks them
        by the call they ran in (:func:`~shapetrace.engine.capture.building_a_model`)."""
        rows = self._inferred().event_of_record
        return {rows[i] for i in self.capture.setup if i in rows}

    def report(self, header: dict[str, Any] | None = None, title: str | None = None,
               notes: Sequence[str] = ()) -> Report:
        """Everything this run found, as one plain :class:`~shapetrace.engine.report.Report`.

        Args:
            header: what the command prints above the table (``{"lines": [...]}``, and the ops where
                each decode step begins, ``"steps"``); the trace itself has none.
            title: the report's title (the Report's own default when None).
            notes: the command's sentences for the report, before the trace's own (why values were
                not read).
        """
        from shapetrace.engine.report import report_of

        return report_of(self, header, title, notes)

    def to_dict(self) -> dict[str, Any]:
        return self.report().to_dict()

    def to_json(self, indent: int | None = 2) -> str:
        """The trace as JSON (schema version 2), as ``shapetrace run --json`` prints it.

        >>> import json, torch, shapetrace
        >>> with shapetrace.trace(dims="B=2 T=6 D=512 H=8") as t:
        ...     q = torch.zeros(2, 6, 512).view(2, 6, 8, 64)
        >>> data = json.loads(t.to_json())
        >>> sorted(data), data["events"][0]["output"]["dims"]
        (['diagnostics', 'dims', 'events', 'verdict', 'version'], ['B', 'T', 'H', 'd_k'])
        """
        return self.report().to_json(indent)

    def __repr__(self) -> str:
        return _summary(len(self), *(sum(d.severity == s for d in self.diagnostics) for s in ("error", "warning")))

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def __len__(self) -> int:
        """How many ops got a row. While the trace records, the records are counted and nothing is
        inferred (another thread may ask: a watcher counting ops); after it, the events."""
        if not self._finished and self._shown is None:
            return self.capture.rows
        return len(self.events)


_ACTIVE: list[Trace] = []



def _summary(n: int, errors: int, warnings: int) -> str:
    """``<Trace: 3 ops, 1 error, 0 warnings>``"""
    return (f"<Trace: {n} op{'s' * (n != 1)}, "
            f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}>")


def active_trace() -> Trace | None:
    return _ACTIVE[-1] if _ACTIVE else None


def name_axes(tensor: Any, names: str | Sequence[str | None]) -> Any:
    """Name ``tensor``'s axes in the active trace (nothing happens outside one); return ``tensor``.

    ``names`` is ``"B T D"`` or a list; ``_``, ``?`` or ``None`` leave an axis unnamed.
    This is what :func:`shapetrace.name` calls.
    """
    active = active_trace()
    if active is not None:
        parts = names.split() if isinstance(names, str) else list(names)
        active.set_names(tensor, [None if p in (None, "_", "?") else p for p in parts])
    return tensor


def calls_without_a_row(capture, rows: dict[int, int]) -> dict[str, int]:
    """The recorded calls that got no row (not in ``rows``, the record -> event map) and were not setup,
    by op name in order of first use, with how many times each ran: elementwise math whose names simply
    pass on (``x * 2``, ``gelu``, an addition that is not onto attention scores), casts, reductions to an
    index, and ``"?"`` for ops the registry does not know."""
    counts: dict[str, int] = {}
    for index, record in enumerate(capture.records):
        if index not in rows and index not in capture.setup and type(record) in (OpRecord, PassRecord):
            counts[record.spec.name] = counts.get(record.spec.name, 0) + 1
    return counts
