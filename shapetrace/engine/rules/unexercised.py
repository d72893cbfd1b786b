"""A mask that hid nothing on this input (issue 33 item 1: no check mark that is not earned).

A mask is checked two ways: by its layout (its axes' names line up with the scores' keys:
:func:`.masks.mask_axis`) and on its values (which keys it hides: NaN rows, a reversed or blind mask,
the dependency contracts). A run whose input exercises no mask (nothing padded: fairseq's
``key_padding_mask`` at a batch of one, every sequence full; transformers' extended attention mask
``(1.0 - mask) * min`` all zeros; SDPA's boolean ``attn_mask`` all True; a 0/1 table multiplied onto the
scores all ones) shows nothing on the values: a padding mask laid on the queries
(``key_padding_mask.unsqueeze(1).unsqueeze(3)``) gives the same output there as the right one. So where
every value of a mask passed (read at call time: :func:`.directions.passes_all`), it counts as checked
only when its layout proves it lines up with the keys: the scores' query and key axes are known by
their roles, the mask's axis on the keys has more than one entry, and its axis on the queries is
broadcast (one entry: the mask varies along the keys alone, as broadcasting lines it up; a decode step's
causal mask ``[1, S]``), or, for a table over both, the two bear the queries' and the keys' names, two
different ones (a ``[T, T]`` table of one name could lie either way). Otherwise a note, and the verdict
says what was not checked. Equal sizes decide nothing: positions and names do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.directions import where_params
from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family, family_of

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic
    from shapetrace.engine.events import Event, TensorInfo


def unexercised_masks(analysis: Analysis) -> list[Diagnostic]:
    """A note for each mask whose every value passed on this input and whose layout does not prove it."""
    out = []
    for e in analysis.events:
        if not e.params.get("passes_all") or len(e.inputs) < 2:
            continue
        scores, mask = _operands(e)
        if family_of(e.op) is Family.FUSED_ATTENTION:
            if not _fused_lines_up(analysis, e):
                out.append(_note(e, mask, "the queries' and keys' token axes"))
        elif not _lines_up_with_keys(scores, mask):
            out.append(_note(e, mask, fmt_named(scores.dims, scores.shape)))
    return out


def _operands(e: Event) -> tuple[TensorInfo, TensorInfo]:
    """``(the scores, the mask)``: SDPA's ``attn_mask``; the operand that is not the scores elsewhere (the
    scores: the operand whose axes are the queries and the keys, else a fill's first, a ``where``'s second)."""
    if family_of(e.op) is Family.FUSED_ATTENTION:
        return e.inputs[0], e.inputs[3] if len(e.inputs) > 3 else e.inputs[-1]
    picks = e.spec.params is where_params   # (torch.where(condition, scores, fill): the condition first)
    roles = [{"query", "key"} <= {a.role for a in t.axes} for t in e.inputs]
    scores = e.inputs[roles.index(True)] if roles.count(True) == 1 else e.inputs[1 if picks else 0]
    mask = e.inputs[0] if picks and scores is not e.inputs[0] else next(t for t in e.inputs if t is not scores)
    return scores, mask


def _lines_up_with_keys(scores: TensorInfo, mask: TensorInfo) -> bool:
    """Do the names prove the mask varies along the scores' keys and not along their queries?"""
    roles = [a.role for a in scores.axes]
    if "query" not in roles or "key" not in roles:
        return False
    lead = len(scores.shape) - len(mask.shape)
    q, k = roles.index("query"), roles.index("key")
    return _on_names(mask, q - lead, k - lead, scores.dims[q], scores.dims[k])


def _fused_lines_up(analysis: Analysis, e: Event) -> bool:
    """SDPA's ``attn_mask [..., L, S]`` against its queries ``[..., L, E]`` and keys ``[..., S, E]`` (their
    names are read where they say both hold tokens)."""
    if len(e.inputs) < 4:
        return False
    q, k, mask = e.inputs[0], e.inputs[1], e.inputs[3]
    named = all(len(t.dims) >= 2 and analysis.namer.plain_role(t.dims[-2]) == "tokens" for t in (q, k))
    return _on_names(mask, len(mask.shape) - 2, len(mask.shape) - 1, q.dims[-2] if named else None,
                     k.dims[-2] if named else None)


def _on_names(mask: TensorInfo, q: int, k: int, query: str | None, key: str | None) -> bool:
    """Does the mask vary along the keys (its axis ``k`` has more than one entry) and, by its layout, not along
    the queries (its axis ``q`` absent or of one entry: broadcasting puts it on the keys alone), or, a table
    over both, do its names say which is which (``k`` named ``key``, ``q`` named ``query``, two names)?"""
    if not 0 <= k < len(mask.shape) or mask.shape[k] == 1:
        return False
    if not 0 <= q < len(mask.shape) or mask.shape[q] == 1:
        return True
    return key is not None and mask.dims[k] == key and mask.dims[q] == query != key


def _note(e: Event, mask: TensorInfo, scores: str) -> Diagnostic:
    return Kind.MASK_UNEXERCISED.found(e.index, (
        f"{e.op} #{e.index} puts the mask {fmt_named(mask.dims, mask.shape)} onto the scores {scores}, but on this "
        "input it hid nothing (no padded key, no key after a query), and neither its layout nor its names prove "
        "that it lines up with the keys: a mask laid on the queries would have given the same output, so where it "
        "lands was not checked."),
        "Trace an input that the mask acts on (a padded sequence: two lengths in the batch), or name the mask's "
        "axes (shapetrace.name) so that its key axis is read from the names.")
