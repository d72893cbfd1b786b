"""``run --backward``'s use cases: the grad mode a traced forward runs in, and the same model at 2T.

Light to import (torch is imported inside the functions): :mod:`.session` imports it at start-up.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any


def new_trace(dims: dict[str, int], backward: bool):
    """A trace of the forward, or of the forward and its backward (:class:`~shapetrace.engine.backward.trace.
    BackwardTrace`)."""
    if backward:
        from shapetrace.engine.backward.trace import BackwardTrace

        return BackwardTrace(dims)
    from shapetrace.engine.tracer import Trace

    return Trace(dims)


def grad_mode(backward: bool):
    """``torch.enable_grad()`` for a traced backward, else ``torch.no_grad()`` (a forward keeps no graph)."""
    import torch

    return torch.enable_grad() if backward else torch.no_grad()


def at_double_t(config, trace_at: Callable[[Any], Any]) -> tuple[int, Any] | None:
    """``(2T, its backward)``: the same model traced at twice the tokens (keys too, in cross-attention),
    for how what autograd keeps grows with T; None where no backward ran there (a forward that raised)."""
    sizes = {"seq_len": 2 * config.seq_len}
    if config.kv_len is not None:
        sizes["kv_len"] = 2 * config.kv_len
    doubled = trace_at(dataclasses.replace(config, **sizes)).backward
    return None if doubled is None or not doubled.rows else (2 * config.seq_len, doubled)


def with_doubled(data: dict[str, Any], doubled: tuple[int, Any] | None) -> dict[str, Any]:
    """The JSON's ``backward`` object with ``at_2T``: T and the saved totals of the same model at 2T."""
    if doubled is not None and "backward" in data:
        t, b = doubled
        data["backward"]["at_2T"] = {"T": t, "saved_bytes": b.saved_bytes, "activation_bytes": b.activation_bytes,
                                     "weights_bytes": b.weights_bytes}
    return data
