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
    """A note for each mask whose every value passed on this input and whose layout does not prove it, unless
    the same code hid keys on another run of it (the same op on the same line reached through the same functions,
    its mask made by the same lines): Canine's local chunks run one line per chunk from one loop, and only the last
    chunk holds the padding; the line's values were read there. A shared attention function given a mask made
    elsewhere is not vouched for so."""
    out = []
    exercised = {_made_by(analysis, e) for e in analysis.events
                 if "hides_side" in e.params and e.params.get("hides") is not False and not e.params.get("passes_all")}
    for e in analysis.events:
        if not e.params.get("passes_all") or len(e.inputs) < 2 or _made_by(analysis, e) in exercised:
            continue
        scores, mask = _operands(e)
        if family_of(e.op) is Family.FUSED_ATTENTION:
            if not _fused_lines_up(analysis, e):
                out.append(_note(e, mask, "the queries' and keys' token axes"))
        elif not _lines_up_with_keys(scores, mask, family_of(e.op) is Family.MASK_FILL or bool(e.params.get("hides"))):
            out.append(_note(e, mask, fmt_named(scores.dims, scores.shape)))
    return out


def _made_by(analysis: Analysis, e: Event, depth: int = 8) -> tuple:
    """The code that ran ``e``: its op, line and calling functions, then the line and op of each call that made
    its mask, back along their first inputs (``depth`` of them at most)."""
    lines: list = [(e.op, e.source, e.stack)]
    _, mask = _operands(e)
    at = next((src for t, src in zip(e.inputs, e.sources) if t is mask), None)
    while at is not None and len(lines) <= depth:
        made = analysis.events[at[0]]
        lines.append((made.op, made.source))
        at = made.sources[0] if made.sources else None
    return tuple(lines)


def regrouped_ones(analysis: Analysis) -> list[Diagnostic]:
    """A note for each view that places an axis of one entry (``bsz`` at B = 1) against the memory order of
    the pieces it is cut from (:func:`.infer.sizes.regrouped_one`): the run cannot show the bug it is at
    more entries, so the run is not proven."""
    return [_regrouped_note(e, *e.params["regrouped_one"]) for e in analysis.events if e.params.get("regrouped_one")]


def _regrouped_note(e: Event, name: str, crossed: tuple[str, ...]) -> Diagnostic:
    others = ", ".join(crossed)
    return Kind.BATCH_UNEXERCISED.found(e.index, (
        f"{e.op} #{e.index} is given a size read from {name}, which has one entry here, and places it on the other "
        f"side of {others} than memory holds it: with one entry both orders hold the same elements, with more this "
        f"view would regroup them ({name} and {others} interleaved), so this run could not check it."),
        f"Trace it with more than one entry along {name}, or view in the order memory holds (the order the axes "
        "were merged in).")


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


def _lines_up_with_keys(scores: TensorInfo, mask: TensorInfo, read_as_mask: bool) -> bool:
    """Do the layout or the names say which of the scores' query and key axes (by their roles) the mask
    varies along?"""
    roles = [a.role for a in scores.axes]
    if "query" not in roles or "key" not in roles:
        return False
    lead = len(scores.shape) - len(mask.shape)
    q, k = roles.index("query"), roles.index("key")
    return _on_names(mask, q - lead, k - lead, scores.dims[q], scores.dims[k], read_as_mask)


def _fused_lines_up(analysis: Analysis, e: Event) -> bool:
    """SDPA's ``attn_mask [..., L, S]`` against its queries ``[..., L, E]`` and keys ``[..., S, E]`` (their
    names are read where they say both hold tokens)."""
    if len(e.inputs) < 4:
        return False
    q, k, mask = e.inputs[0], e.inputs[1], e.inputs[3]
    named = all(len(t.dims) >= 2 and analysis.namer.plain_role(t.dims[-2]) == "tokens" for t in (q, k))
    return _on_names(mask, len(mask.shape) - 2, len(mask.shape) - 1, q.dims[-2] if named else None,
                     k.dims[-2] if named else None, True)


def _on_names(mask: TensorInfo, q: int, k: int, query: str | None, key: str | None, read_as_mask: bool) -> bool:
    """Does its layout or its names say which of the scores' axes the mask varies along? By its layout: along
    one of the two alone (the other absent or of one entry, where broadcasting puts it): the keys, or the
    queries where :func:`.masks.mask_axis` reads the op as a mask and so says it is wrong (``read_as_mask``:
    a fill, SDPA's mask, a ``where``; not an addition of zeros, which may be no mask at all); a table over
    both: its names (``k`` named ``key``, ``q`` named ``query``, two different names)."""
    along_keys = 0 <= k < len(mask.shape) and mask.shape[k] > 1
    along_queries = 0 <= q < len(mask.shape) and mask.shape[q] > 1
    if along_keys != along_queries:
        return along_keys or read_as_mask
    return along_keys and key is not None and mask.dims[k] == key and mask.dims[q] == query != key


def _note(e: Event, mask: TensorInfo, scores: str) -> Diagnostic:
    return Kind.MASK_UNEXERCISED.found(e.index, (
        f"{e.op} #{e.index} puts the mask {fmt_named(mask.dims, mask.shape)} onto the scores {scores}, but on this "
        "input it hid nothing (no padded key, no key after a query), and neither its layout nor its names prove "
        "that it lines up with the keys: a mask laid on the queries would have given the same output, so where it "
        "lands was not checked."),
        "Trace an input that the mask acts on (a padded sequence: two lengths in the batch), or name the mask's "
        "axes (shapetrace.name) so that its key axis is read from the names.")
