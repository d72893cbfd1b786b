"""Build, trace and describe the reference model for one configuration (engine, no Rich)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .config import AttentionConfig, header_lines

if TYPE_CHECKING:  # pragma: no cover
    from .tracer import Trace


def trace_reference(config: AttentionConfig) -> "Trace":
    """Run the reference model once under the tracer; the input is named [B, T, D] explicitly."""
    import torch

    from . import attention
    from .tracer import Trace

    model, x = attention.build(config)
    trace = Trace(config.dims)
    trace.header = {"lines": header_lines(config)}
    with torch.no_grad(), trace:
        trace.set_names(x, ["B", "T", "D"])
        trace.result = model(x)
    return trace
