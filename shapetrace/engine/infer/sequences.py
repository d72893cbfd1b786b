"""Sequences: at equal lengths, which sequence queries the other.

Reads: the events of products of q and k (after the run). Adds: the namer's ``T``/``S`` swapped for
display where the source sequence entered first (an encoder that ran before its decoder).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.infer.state import Inference


def orient_sequences(state: Inference) -> None:
    """With ``S`` and ``T`` of one length, the first token tensor to enter is called ``T``. Where the
    run shows the other one queries it (scores of q and k whose rows are ``S`` and columns ``T``: an
    encoder that ran before its decoder), the two labels are swapped for display, so the queries'
    tokens read ``T`` and the source's ``S``, as in torch's ``nn.Transformer``."""
    if state.dims.get("S") is None or state.dims.get("S") != state.dims.get("T"):
        return
    for event in state.events:
        tags, outs = event.projections, [o.axes for o in event.outputs]
        if event.spec.combines and tags and tuple(tags[:2]) == ("q", "k") and outs and len(outs[0]) >= 2:
            rows, cols = (axis.atoms[0].root if len(axis.atoms) == 1 and axis.atoms[0].whole else None
                          for axis in outs[0][-2:])
            if (rows, cols) == ("S", "T"):
                state.namer.swap_sequences()
            if {rows, cols} == {"S", "T"}:
                return
