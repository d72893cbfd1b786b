"""A module that declares itself causal while its self-attention applies no causal mask (:mod:`..declared`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.declared import unmasked
from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic


def causal_unmasked(analysis: Analysis) -> list[Diagnostic]:
    """A self-attention over several queries inside a module that declares itself causal (``is_decoder =
    True``), in a run where no op applies a causal mask: a note (the flag may say nothing of how the module
    runs, but a decoder given an encoder's padding-only mask runs exactly these ops: huggingface/transformers
    issue #48745), so no ``✓``. The causal contract measured on the values makes it an error where later
    tokens reach earlier ones (:func:`.dependencies.measure_trace`). One note per run."""
    found = unmasked(analysis.events, analysis.causal_declared)
    if found is None:
        return []
    e, out = found.event, found.event.outputs[0] if found.event.outputs else None
    where = f" {fmt_named(out.dims, out.shape)}" if out is not None else ""
    return [Kind.CAUSAL_DECLARED_UNMASKED.found(e.index, (
        f"a module declares itself causal ({found.declaration}) and its attention over {found.queries} queries "
        f"applies no causal mask: {e.op} #{e.index}{where} weighs keys of the queries' own sequence, and no op of "
        "the run hides the keys after each query (no causal tril or triu, no is_causal=True, no mask read as causal "
        "on its values), so each position may see the tokens after it."),
        "A decoder's mask is the padding AND the causal triangle (ones(T, T).tril()); if the module is not meant "
        "to be causal, its flag says otherwise.")]
