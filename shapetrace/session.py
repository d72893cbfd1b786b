"""Build, trace and describe the reference model for one configuration (engine, no Rich)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .config import AttentionConfig, header_lines

if TYPE_CHECKING:  # pragma: no cover
    from .tracer import Trace


def trace_reference(config: AttentionConfig, device: str = "cpu", note: str | None = None) -> "Trace":
    """Run the reference model once under the tracer; the input is named [B, T, D] explicitly.

    ``device="meta"`` traces shapes and strides without allocating data; ``note`` says why.
    """
    import torch

    from .devices import build_reference
    from .tracer import Trace

    model, x = build_reference(config, device)
    trace = Trace(config.dims)
    trace.header = {"lines": header_lines(config) + ([note] if note else [])}
    trace.meta_note = note if device == "meta" else None
    with torch.no_grad(), trace:
        trace.set_names(x, ["B", "T", "D"])
        trace.result = model(x)
    return trace
