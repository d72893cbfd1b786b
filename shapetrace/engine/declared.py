"""A module that declares itself causal, and the attention it runs (huggingface/transformers issue #48745).

A model says it is causal in its settings (``self.is_decoder = True``, ``config.is_causal``:
:func:`.modules.declared_causal`), never in what torch records: RoFormer configured as a decoder that built
the padding-only mask ran exactly an encoder's ops. So the two are compared: a self-attention over several
queries (its queries and keys proven one sequence by their names; sizes decide nothing) that runs inside a
module declaring itself causal, in a run where no op applies a causal mask (a causal ``tril``/``triu``,
``is_causal=True``, a mask read as causal on its values, a causal window), cannot be called right: a note
(:func:`.rules.declared.causal_unmasked`); and the causal dependency contract is measured on it
(:func:`.dependencies.measure_trace`), where later tokens reaching earlier ones is an error. A decode step
(one query) needs no mask; a cross-attention (keys of another sequence) is never causal.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from shapetrace.engine.directions import causal_triangle, tokens_reversed
from shapetrace.engine.ops import Family, family_of

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable, Sequence

    from shapetrace.engine.events import Event

#: the fused attention op, whose queries and keys are its first two operands
SDPA = "scaled_dot_product_attention"
#: the patterns read on a mask's values (:func:`.directions.hidden_side`) that hide the keys after each query
CAUSAL_SIDES = ("future", "future-and-padding")


@dataclass(frozen=True)
class Unmasked:
    """A self-attention run inside a module that declares itself causal, where no op applies a causal mask.

    Attributes:
        event: the attention (its softmax, or the fused op).
        queries: how many queries it runs over (more than one).
        path: the declaring module's path ("" for the outermost); flag: its attribute (``config.is_decoder``).
        every: every self-attention over several queries of the run is inside a module declaring itself causal
            (then a later token that reaches an earlier output went through one of them).
    """

    event: Event
    queries: int
    path: str
    flag: str
    every: bool

    @property
    def declaration(self) -> str:
        """``"is_decoder=True"``, with the module's path where not the outermost (``"h.0.config.is_causal=True"``)."""
        return f"{self.path + '.' if self.path else ''}{self.flag}=True"


def masks_causally(e: Event, role: Callable[[str | None], str | None]) -> bool:
    """Does ``e`` apply or build a causal mask, by its call or by its values? Not a fill of a tensor whose rows
    are batch entries (``role``: the run's plain role of a name): OLMo's ``position_ids.masked_fill_(attention_mask
    == 0, 1)`` fills a ``[B, T]`` tensor of positions, and the pattern of its fill is no queries' view of keys."""
    params = e.params
    out = e.outputs[0] if e.outputs else None
    if out is not None and len(out.dims) >= 2 and role(out.dims[-2]) == "batch":
        return False
    return bool(causal_triangle(e) or params.get("is_causal") or params.get("mask_pattern") == "causal"
                or params.get("causal_from_first_key") or params.get("hides_side") in CAUSAL_SIDES
                or params.get("window"))


def self_attention(e: Event) -> int | None:
    """How many queries ``e`` attends over when it is a self-attention (a softmax over proven scores, or the
    fused op) whose queries and keys are proven one sequence by their names; None otherwise."""
    if e.op == SDPA and len(e.inputs) >= 2 and min(len(e.inputs[0].axes), len(e.inputs[1].axes)) >= 2:
        queries, keys, n = e.inputs[0].axes[-2], e.inputs[1].axes[-2], e.inputs[0].shape[-2]
    elif family_of(e.op) is Family.SOFTMAX and e.outputs and len(e.outputs[0].axes) >= 2 \
            and [a.role for a in e.outputs[0].axes[-2:]] == ["query", "key"]:
        queries, keys, n = e.outputs[0].axes[-2], e.outputs[0].axes[-1], e.outputs[0].shape[-2]
    else:
        return None
    roots = _roots(queries)
    return n if roots and roots == _roots(keys) else None


def unmasked(events: Sequence[Event], declared: Sequence[tuple[str, str]],
             role: Callable[[str | None], str | None]) -> Unmasked | None:
    """The first self-attention over several queries inside a module that declares itself causal (``declared``:
    ``(module path, flag)``), where no op of the run applies a causal mask; None where there is none (``role``:
    the run's plain role of a name)."""
    if not declared or any(masks_causally(e, role) for e in events):
        return None
    found, every = None, True
    for e in events:
        n = self_attention(e)
        if n is None or n < 2:
            continue
        owner = next(((path, flag) for path, flag in declared if inside(e.module, path)), None)
        if owner is None:
            every = False
        elif found is None:
            found = (e, n, *owner)
    return None if found is None else Unmasked(*found, every=every)


def inside(module: str, path: str) -> bool:
    """Did an op that ran in ``module`` run inside the module at ``path`` ("": the outermost, the whole run)?"""
    return not path or module == path or module.startswith(path + ".")


def _roots(axis) -> frozenset[str]:
    """The named axes an axis is made of (``{"T"}``; nothing where a part has no name)."""
    roots = frozenset(atom.root for atom in getattr(axis, "atoms", ()))
    return frozenset() if not roots or any(not r or r == "?" for r in roots) else roots


def declared_probe(trace, probe):
    """``probe`` (:class:`.dependencies.Probe`) asked to measure the causal contract where nothing else asked for
    it: the run applies no causal mask and every self-attention over several queries runs in a module declaring
    itself causal (:func:`unmasked`), so a later token that reaches an earlier output broke the declaration."""
    if probe.causal is not None:
        return probe
    events = trace._inferred().events   # (all of them: ``trace.events`` may be a filtered copy)
    found = unmasked(events, trace.capture.module_calls.causal, trace.namer.plain_role)
    if found is None or not found.every or tokens_reversed(events, trace.namer.role):
        return probe
    return replace(probe, causal=f"a module declares itself causal: {found.declaration}")


def held_causal(found: list, held: bool) -> list:
    """``found`` without the note that a module declaring itself causal applies no causal mask
    (:func:`.rules.declared.causal_unmasked`) where the causal contract was measured and ``held``: later tokens
    reach no earlier output, so the module runs causally by a mask the run could not read as one."""
    from shapetrace.engine.kinds import Kind

    return [d for d in found if d.kind != Kind.CAUSAL_DECLARED_UNMASKED] if held else found
