"""A module that declares itself causal while its self-attention applies no causal mask (:mod:`..declared`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.declared import SDPA, masks_causally, unmasked
from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic
    from shapetrace.engine.events import Event


def causal_unmasked(analysis: Analysis) -> list[Diagnostic]:
    """A self-attention over several queries inside a module that declares itself causal (``is_decoder =
    True``), in a run where no op applies a causal mask: a note (the flag may say nothing of how the module
    runs, but a decoder given an encoder's padding-only mask runs exactly these ops: huggingface/transformers
    issue #48745), so no ``✓``. The causal contract measured on the values makes it an error where later
    tokens reach earlier ones (:func:`.dependencies.measure_trace`). One note per run."""
    found = unmasked(analysis.events, analysis.causal_declared, analysis.namer.plain_role)
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


def window_applied_nowhere(analysis: Analysis) -> list[Diagnostic]:
    """A sliding window the model holds (``self.window_size = 3``: :attr:`.Analysis.windows`) that no op of the run
    applies, while a causal mask lets a query see more keys than it: a note, so no ``✓`` (proger/hippogriff issue #7:
    flash-attn's ``window_size=(-window, 0)`` reads the negative extent as no limit, so the attention is global). A
    window held and applied by some layer (Gemma 2's global layers beside its sliding ones, or a band that lost its
    causal half: ``mask-keeps-future`` says so) says nothing, nor a window over no causal attention (Swin's
    ``window_size`` cuts the map into windows: no mask applies it)."""
    held = analysis.windows
    if not held or any(e.params.get(k) for e in analysis.events for k in ("window", "band", "past_only")):
        return []
    narrowest = min(width for _, _, width in held)
    for e in analysis.events:
        keys = _keys_seen(e)
        if keys is not None and keys > narrowest and masks_causally(e, analysis.namer.plain_role):
            names = ", ".join(f"{path + '.' if path else ''}{name} = {width}" for path, name, width in held)
            return [Kind.WINDOW_WIDTH_UNCHECKED.found(e.index, (
                f"the model holds a window ({names}), but no op of the run applies one: {e.op} #{e.index} hides "
                f"the keys after each query and none before it, so a query sees up to {keys} keys, more than the "
                f"window's {narrowest}. Which width the model meant is a number of its configuration, so it is not "
                "checked."),
                "Apply the window where the causal mask is made: keep keys with q_idx - kv_idx < window (flash-attn: "
                "window_size=(window - 1, 0); a negative extent there means no limit).")]
    return []


def _keys_seen(e: Event) -> int | None:
    """How many keys the scores ``e`` masks have (the fused op: its keys' tokens); None where it has none."""
    if e.op == SDPA and len(e.inputs) >= 2 and len(e.inputs[1].shape) >= 2:
        return e.inputs[1].shape[-2]
    return e.outputs[0].shape[-1] if e.outputs and len(e.outputs[0].shape) >= 2 else None
