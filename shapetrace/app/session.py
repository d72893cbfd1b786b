"""Build, trace and describe the reference model for one configuration (engine, no Rich)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shapetrace.app.backward import at_double_t, grad_mode, new_trace, with_doubled
from shapetrace.app.devices import budget_or_default, pick_device
from shapetrace.app.steps import cache_names, split_steps
from shapetrace.app.threads import threads_for
from shapetrace.attention.catalogue import apply_forces, leak_config
from shapetrace.attention.config import AttentionConfig, header_lines
from shapetrace.attention.memory import forced_variant_bytes, reference_bytes, variant_bytes

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.app.request import RunRequest
    from shapetrace.engine.report import Report
    from shapetrace.engine.tracer import Trace


@dataclass
class ReferenceRun:
    """The reference model traced once, with what ``run`` prints around its table."""

    trace: Trace
    header: dict[str, Any] = field(default_factory=dict)   #: {"lines": [...]} above the table
    notes: list[str] = field(default_factory=list)   #: sentences for the report (why the meta device)
    doubled: Any = None   #: with --backward: (2T, the backward of the same model at 2T)

    def report(self) -> Report:
        """The plain report the renderers and ``--json`` read: the trace's findings, this run's header."""
        return self.trace.report(header=self.header, notes=self.notes)

    def to_json(self, report: Report) -> str:
        """The trace's JSON; ``report``: :meth:`report`, made once."""
        if self.doubled is None:
            return report.to_json()
        return json.dumps(with_doubled(report.to_dict(), self.doubled), indent=2)


def trace_request(request: RunRequest, device: str, note: str | None) -> ReferenceRun | VariantRun:
    """The run ``request`` asks for, traced on ``device`` (``note``: why there, from
    :func:`~shapetrace.app.devices.pick_device`): the plain reference, or the variant with ``--preset``'s
    note first."""
    if not request.is_variant:
        return run_reference(request.config, device, note, request.backward)
    run = traced_variant(request.config, device, note, backward=request.backward)
    if request.preset_note:
        run.notes.insert(0, request.preset_note)
    return run


def run_reference(config: AttentionConfig, device: str = "cpu", note: str | None = None,
                  backward: bool = False) -> ReferenceRun:
    """:func:`trace_reference`, with the header (``note``, why this device, as its last line) and, on the
    meta device, ``note`` as a note of the report too."""
    header = {"lines": header_lines(config) + ([note] if note else [])}
    run = ReferenceRun(trace_reference(config, device, backward), header,
                       [note] if note and device == "meta" else [])
    if backward:
        run.doubled = at_double_t(config, lambda c: trace_reference(c, device, backward=True))
    return run


def trace_reference(config: AttentionConfig, device: str = "cpu", backward: bool = False) -> Trace:
    """Run the reference model once under the tracer; the input is named [B, T, D] explicitly.

    ``device="meta"`` traces shapes and strides without allocating data; ``backward``: the backward of
    the output's sum too (``trace.backward``).
    """
    from shapetrace.attention.reference import build

    model, x = build(config, device)
    trace = new_trace(config.dims, backward)
    trace.check_dependencies()
    with threads_for(reference_bytes(config)), grad_mode(backward), trace:
        trace.set_names(x, ["B", "T", "D"])
        trace.result = model(x)
    return trace


# ---------------------------------------------------------------------------
# attention variants (issue 4): masks, cross-attention, GQA, implementations, breaks
# ---------------------------------------------------------------------------

@dataclass
class VariantRun:
    """One traced variant run and what was learned from its values."""

    trace: Trace
    config: AttentionConfig
    device: str
    notes: list[str] = field(default_factory=list)
    heat: dict[str, Any] | None = None
    comparison: dict[str, Any] | None = None
    #: what the table shows above itself: {"lines": [...]}, and for a decode the op where each step begins
    header: dict[str, Any] = field(default_factory=dict)
    doubled: Any = None   #: with --backward: (2T, the backward of the same model at 2T)

    def report(self) -> Report:
        """The plain report the renderers and ``--json`` read: the trace's findings, this run's header."""
        return self.trace.report(header=self.header)

    def to_json(self, report: Report) -> str:
        """The trace's JSON plus a ``variant`` object: config, device, notes, NaN rows, and for
        a break the comparison with the reference (``report``: :meth:`report`, made once)."""
        data = report.to_dict()
        data["variant"] = {"config": dataclasses.asdict(self.config), "device": self.device, "notes": self.notes,
                           "nan_rows": report.nan_rows, "comparison": self._comparison_data()}
        if self.config.decode:
            data["variant"]["decode"] = self._decode_data()
        if self.config.image:
            c = self.config
            data["variant"]["image"] = {"size": c.image, "patch": c.patch, "channels": c.in_channels,
                                        "grid": [c.grid, c.grid], "patches": c.grid ** 2, "tokens": 1 + c.grid ** 2}
        if self.doubled is not None:
            data = with_doubled(data, self.doubled)
        return json.dumps(data, indent=2, default=list)

    def _comparison_data(self) -> dict[str, Any] | None:
        cmp = dict(self.comparison) if self.comparison else None
        if cmp and cmp.get("leaks") is not None:
            cmp["leaks"] = [[list(src), list(dst)] for src, dst in cmp["leaks"]]
        return cmp

    def _decode_data(self) -> dict[str, Any]:
        """Where the prefill and each step begin and end (op indices) and the cache's name after each step."""
        events, starts = self.trace.events, self.header.get("steps", [])
        prefill, steps = split_steps(events, starts)
        span = lambda evs: [evs[0].index, evs[-1].index] if evs else None  # noqa: E731
        return {"prefill": span(prefill), "steps": [span(list(s.events)) for s in steps],
                "cache": cache_names(events, starts)}


def trace_variant(config: AttentionConfig, max_bytes: int | None = None, compare: bool = True,
                  device: str = "auto") -> VariantRun:
    """Trace the configured implementation or broken variant on the device
    :func:`~shapetrace.app.devices.pick_device` chooses for it (``max_bytes``: the budget, by default
    --max-memory's); see :func:`traced_variant`."""
    where, note = pick_device(device, forced_variant_bytes(config), budget_or_default(max_bytes))
    return traced_variant(config, where, note, compare)


def traced_variant(config: AttentionConfig, device: str, note: str | None = None,
                   compare: bool = True, backward: bool = False) -> VariantRun:
    """Trace the configured implementation or broken variant on ``device`` (``note``: why there); fill NaN
    rows, heat map and notes (small sizes with one torch thread: :mod:`shapetrace.app.threads`);
    ``backward``: its backward too, and the same at 2T."""
    with threads_for(variant_bytes(config)):
        run = _trace_variant(config, device, note, compare, backward)
        if backward and not config.image:   # (an image's tokens come from its size: no 2T of it)
            run.doubled = at_double_t(config, lambda c: _trace_variant(c, device, None, False, True).trace)
        return run


def _trace_variant(config: AttentionConfig, device: str, note: str | None, compare: bool,
                   backward: bool = False) -> VariantRun:
    from shapetrace.app.shapes import NO_VALUES_NOTE, run_header
    from shapetrace.attention import variants
    from shapetrace.attention.notes import notes_for
    from shapetrace.engine import findings

    config, forced = apply_forces(config)
    notes = ([_skipped_checks(note) if device == "meta" else note] if note else []) + forced
    if config.decode or config.image:
        from shapetrace.app.shapes import trace_shape

        return trace_shape(config, device, notes, compare, VariantRun, backward)
    ref, inputs = variants.build_reference(config, device)
    model = _model_for(config, ref, device)
    trace = new_trace(config.dims, backward)
    if not config.broken:   # the same contracts as the plain run (grouped-query heads, masks, each --impl)
        trace.check_dependencies(per_entry=(2,))   # (model(x, memory, pad): pad[b], entry b's padding)
    kept = _traced_forward(trace, model, inputs, config, backward)
    run = VariantRun(trace, config, device, notes, header=run_header(config, device))
    if device == "meta":
        trace.read_values(None, NO_VALUES_NOTE)
    else:
        trace.read_values(findings.nan_rows(kept, trace.result if trace.exception is None else None))
        run.heat = findings.heat_map(kept, inputs["pad"])
        if config.broken and compare:
            run.comparison = findings.compare_outputs(model, ref, inputs, lambda: leak_probe(config, device))
    run.notes += notes_for(run.config, run.trace.events, model, run.device)
    return run


def _skipped_checks(note: str) -> str:
    """The meta device's note, for a variant: what it cannot check."""
    return f"{note}. Checks that need values (NaN rows, heat map, outputs) are skipped."


def _traced_forward(trace: Trace, model, inputs: dict, config: AttentionConfig, backward: bool = False) -> dict:
    """Run ``model`` under ``trace`` (an exception stays in ``trace.exception``); return the scores and
    weights its attention formed, watched from outside the model."""
    from shapetrace.app.attention_values import watching_attention

    with watching_attention(model) as kept:
        try:
            with grad_mode(backward), trace:
                trace.set_names(inputs["x"], ["B", config.q_name, "D"])
                if inputs["memory"] is not None:
                    trace.set_names(inputs["memory"], ["B", config.k_name, "D"])
                trace.result = model(inputs["x"], inputs["memory"], inputs["pad"])
        except Exception:  # kept in trace.exception; the table shows the op that raised
            pass
    return kept


def leak_probe(config: AttentionConfig, device: str) -> tuple:
    """The broken model, its reference and their inputs at :func:`~shapetrace.attention.catalogue.leak_config`'s
    smaller width, in float64 (tiny dependencies stay far above rounding), for the leak analysis."""
    import torch

    from shapetrace.attention import variants
    from shapetrace.attention.broken import build_broken

    small = leak_config(config)
    ref, inputs = variants.build_reference(small, device)
    model = build_broken(small, ref, device)
    inputs = {k: v.double() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    return model.double().eval(), ref.double().eval(), inputs


def _model_for(config: AttentionConfig, ref, device: str):
    from shapetrace.attention import variants

    if config.broken:
        from shapetrace.attention.broken import build_broken

        return build_broken(config, ref, device)
    return variants.build_impl(config, config.impl, ref, device)
