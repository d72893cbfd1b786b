"""Which way a mask or a position bias on the scores points, read against the scores' query and key
axes (issue 33 item 4: a mask, ``score_mod`` or bias whose direction is reversed is a finding).

The values were read when the op ran (:mod:`shapetrace.engine.directions`: on the CPU, up to a bound),
as if the last two axes of the scores were queries and keys; a rule speaks only where the names prove
they are (the scores' axes carry the query and key roles), so equal sizes decide nothing:

* a **position bias that grows with distance** (linear in ``i - j`` over the keys each query may see,
  the same sign in every head): ALiBi with its sign reversed, so each query favours the farthest keys;
* a **causal mask reversed**: it hides exactly the keys before each query and keeps those after (a fill with
  a large negative before a softmax, or with zeros where the filled scores go straight into a product with the
  values, as linear attention, gated linear attention and RetNet mask theirs: ``A.masked_fill(~tril, 0) @ v``);
* a mask or bias onto the scores whose values were **not read** (a device, a size over the bound, the
  meta device): a note, and the verdict does not claim that its direction was checked.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from shapetrace.engine.axes import cut_from
from shapetrace.engine.directions import HIDES, READ_LIMIT
from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import SCORE_SUB, Family, family_of
from shapetrace.engine.rules.channels import readers
from shapetrace.engine.rules.declared import causal_unmasked, window_applied_nowhere
from shapetrace.engine.rules.indices import told_by_size

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic
    from shapetrace.engine.events import Event, TensorInfo


def _onto_scores(e: Event) -> tuple[TensorInfo, TensorInfo] | None:
    """``(the scores, the mask or bias)`` of an op whose result's last two axes are the queries and the
    keys (by their roles), or None."""
    if not e.outputs or len(e.inputs) < 2 or len(e.outputs[0].axes) < 2:
        return None
    if [a.role for a in e.outputs[0].axes[-2:]] != ["query", "key"]:
        return None
    scores = next((t for t in e.inputs if [a.role for a in t.axes[-2:]] == ["query", "key"]), e.inputs[0])
    other = next((t for t in e.inputs if t is not scores), e.inputs[1])
    return scores, other


def _hides(e: Event) -> bool:
    """Does this op hide keys (a masked fill with a large negative, or an additive mask)?"""
    if family_of(e.op) is Family.MASK_FILL:
        value = e.params.get("value")
        return isinstance(value, (int, float)) and value <= HIDES
    return bool(e.params.get("hides"))


def _zeroes_weights(e: Event, reading: dict) -> bool:
    """Does ``e`` fill with zeros scores that every reader multiplies straight into a product (no softmax
    after it to undo the zeros): the filled keys then weigh nothing, the zeros hide them."""
    uses = reading.get(e.index, ())
    return (family_of(e.op) is Family.MASK_FILL and e.params.get("value") == 0 and bool(uses)
            and all(family_of(p.op) is Family.PRODUCT for p, _ in uses))


def direction(analysis: Analysis) -> list[Diagnostic]:
    """A position bias that favours far keys, a causal mask reversed, and masks or biases onto the
    scores whose direction was not read."""
    out = []
    reading = readers(analysis.events)
    for e in (*analysis.events_of(Family.MASK_FILL), *analysis.events_of(Family.ELEMENTWISE)):
        pair = _onto_scores(e)
        if pair is None:
            continue
        scores, other = pair
        shown, key = fmt_named(scores.dims, scores.shape), scores.dims[-1]
        if e.params.get("bias_favours") == "far":
            out.append(_far_bias(e, shown, key, fmt_named(other.dims, other.shape)))
        if e.params.get("bias_ignored"):
            out.append(_ignored_bias(e, shown, key, fmt_named(other.dims, other.shape)))
        hides = _hides(e) or _zeroes_weights(e, reading)
        if e.params.get("hides_side") in ("past", "past-and-padding", "past-and-self") and hides:
            out.append(_reversed_mask(e, shown, key, other, e.params["hides_side"] == "past-and-padding",
                                      e.params["hides_side"] == "past-and-self"))
        if e.params.get("hides_side") == "future-and-self" and hides:
            out.append(_mask_hides_itself(e, shown, key, other))
        elif e.params.get("blind_queries") and _hides(e) and _judged_on_one_sequence(e, scores.axes[-2:]):
            out.append(_blind_queries(e, shown, key, other))
        if e.params.get("hides_own_key") and _hides(e) and _one_sequence(*scores.axes[-2:]):
            out.append(_hides_own_key(e, shown, key, other))
        if e.params.get("past_only") and _hides(e) and _one_sequence(*scores.axes[-2:]):
            out.append(_keeps_future(e, shown, key, other))
        if e.params.get("whole_past_hidden") and _hides(e) and _one_sequence(*scores.axes[-2:]):
            out.append(_reads_only_future(e, shown, key, other))
        if e.params.get("keeps_far_future") and _hides(e) and _one_sequence(*scores.axes[-2:]):
            out.append(_keeps_far_future(e, shown, key, other))
        if e.params.get("skips_ahead") and _hides(e) and _one_sequence(*scores.axes[-2:]):
            out.append(_skips_ahead(e, shown, key, other))
        if e.params.get("looks_ahead") and _hides(e):
            out.append(_looks_ahead(e, shown, key, other))
        if "hides_side" not in e.params and (family_of(e.op) is Family.MASK_FILL or "hides" not in e.params):
            out.append(_unread(e, shown, other))
        if _causal_pattern(e) and _hides(e):
            out.extend(_across_sequences(analysis, e, scores, other) or _off_positions(analysis, e, scores, other))
    return sorted(out + _fused(analysis) + _product_bases(analysis) + windows_kept(analysis) + padding_seen(analysis)
                  + window_widths(analysis) + causal_unmasked(analysis) + window_applied_nowhere(analysis),
                  key=lambda d: d.event)


def padding_seen(analysis: Analysis) -> list[Diagnostic]:
    """A mask read on its values (:func:`.directions.padding_seen`) that shows a padded key to a real query,
    where the names prove its queries and keys one sequence (the scores' or SDPA's q and k). A mask with blind
    queries (a padding mask laid on the queries, which shows the pads to every real query) is reported as such."""
    out = []
    for e in analysis.events:
        fused = family_of(e.op) is Family.FUSED_ATTENTION
        if not e.params.get("padding_seen") or e.params.get("blind_queries") or not (fused or _hides(e)):
            continue
        if fused and len(e.inputs) >= 4:
            axes, mask = (e.inputs[0].axes[-2], e.inputs[1].axes[-2]), e.inputs[3]
        else:
            scores = next((t for t in e.inputs if [a.role for a in t.axes[-2:]] == ["query", "key"]), None)
            mask = next((t for t in e.inputs if t is not scores), None)
            axes = tuple(scores.axes[-2:]) if scores is not None else ()
        if len(axes) != 2 or mask is None or not _one_sequence(*axes):
            continue
        where, query, key = e.params["padding_seen"]
        lead = f" in slice {where} of its leading axes" if where else ""
        out.append(Kind.MASK_SHOWS_PADDING.found(e.index, (
            f"{e.op} #{e.index} hides the scores with a mask {fmt_named(mask.dims, mask.shape)} whose key {key} is "
            f"padding{lead} (hidden from its own query there, though that position sees itself in another slice) "
            f"and yet shown to query {query}, which sees its own key: the padding reaches a real token's output "
            "(a row of the mask written as all ones, as a class token's prepended to a padded set)."),
            "Build every row from the padding mask, the prepended tokens' too: token_mask[:, :, 0, 1:] = valid; "
            "token_mask[:, :, 1:, 0] = valid."))
    return out


def windows_kept(analysis: Analysis) -> list[Diagnostic]:
    """A sliding window is a property of its attention: where a mask made on one line of one module is a causal
    window of ``w`` keys (:func:`.directions.causal_window`) at one call, a later call on that line whose mask
    lets a query see more keys (a wider window, or the causal mask alone over more than ``w`` keys) is an error
    (trymirai/lalamo PR #200: a chunk's window measured from the chunk's own rows, ``triu(-(w - 1))``, so every
    query of a chunk after a cached prefix saw the whole prefix). Read on the values; sizes decide nothing."""
    first: dict[tuple, tuple] = {}
    out = []
    for e in sorted((*analysis.events_of(Family.MASK_FILL), *analysis.events_of(Family.ELEMENTWISE)),
                    key=lambda e: e.index):
        line = (e.module, e.source)
        pair = _onto_scores(e) if line not in first else _same_line(e, first[line][2])
        if pair is None or not _hides(e) or ("window" not in e.params and e.params.get("hides_side") != "future"):
            continue
        scores, mask = pair
        sees = e.params.get("window") or scores.shape[-1]
        if line not in first:
            if "window" in e.params:
                first[line] = (e, sees, e.op)
            continue
        before, width, _ = first[line]
        if sees > width and before is not None:
            first[line] = (None, width, e.op)   # (one finding per line)
            out.append(Kind.WINDOW_WIDENS.found(e.index, (
                f"{e.op} #{e.index} puts a mask {fmt_named(mask.dims, mask.shape)} onto the scores "
                f"{fmt_named(scores.dims, scores.shape)} that lets a query see {sees} keys, but the same line "
                f"({e.source}) kept a sliding window of {width} keys per query at #{before.index}: the window's "
                "lower edge was not moved with the queries' positions (counted from the chunk's own rows, not "
                "from the cache's length)."),
                "Measure both edges of the window in absolute positions: query i of a chunk after P cached tokens "
                f"is position P + i, and sees keys P + i - {width - 1} .. P + i (triu(diagonal=P - {width - 1}))."))
    return out


def window_widths(analysis: Analysis) -> list[Diagnostic]:
    """A causal sliding window of ``w`` keys read on a mask's values (:func:`.directions.causal_window`), or a
    window reaching ``b`` keys up to each query and ``a`` after it (:func:`.directions.band_window`), is
    checked against the windows the model's modules hold (``self.sliding_window``: :attr:`.Analysis.windows`),
    as a reader checks it: one of them ``w``, the width is the model's own; none (a band one key wider than
    ``sliding_window``, ``>`` written for ``>=``; or no window held at all), a note: the width is a number of the
    model's configuration that the run cannot check (mistral-src's ``triu(-sliding_window)`` keeps
    ``sliding_window + 1`` keys by design), so no ``✓``. One note per width."""
    held = {width for _, _, width in analysis.windows}
    out, said = [], set()
    for e in analysis.events:
        width, band = e.params.get("window"), e.params.get("band")
        widths = (width,) if width else tuple(band or ())
        if not widths or set(widths) <= held or widths in said:
            continue
        said.add(widths)
        names = ", ".join(f"{path + '.' if path else ''}{name} = {value}" for path, name, value in analysis.windows)
        what = f"a causal sliding window of {width} keys per query" if width else \
            f"a sliding window of {band[0]} keys up to each query and {band[1]} after it"
        out.append(Kind.WINDOW_WIDTH_UNCHECKED.found(e.index, (
            f"{e.op} #{e.index} applies {what} (read on the mask's values), and " +
            (f"no window the model holds is {' or '.join(map(str, sorted(set(widths) - held)))} ({names})" if names
             else "no module of the model holds a window width (an attribute such as sliding_window)") +
            ": which width the model meant is a number of its configuration, so the width is not checked."),
            "Check the window against the model's configuration: a query sees itself and the sliding_window - 1 "
            "keys before it where the hidden keys are q_idx - kv_idx >= sliding_window" +
            ("" if width else ", and the keys up to the right window after it (-dist <= right, not <)") + "."))
    return out


#: the patterns read on a mask's values (:func:`.directions.hidden_side`) that hide the keys after each query
_CAUSAL_SIDES = ("future", "future-and-padding")


def _causal_pattern(e: Event) -> bool:
    """Does the mask of ``e`` hide, by its values, the keys after each query (aligned bottom-right, or
    from the first key: query ``i`` beside key ``i``)?"""
    return bool(e.params.get("causal_from_first_key")) or e.params.get("hides_side") in _CAUSAL_SIDES


def _across_sequences(analysis: Analysis, e: Event, scores: TensorInfo, mask: TensorInfo) -> list[Diagnostic]:
    """A causal mask onto scores whose queries and keys are proven to be two different sequences (by their
    names; sizes decide nothing). Cut from the corner of a square table (its rows and its columns are
    positions of one sequence: key ``i`` beside query ``i``), it was built for another attention: an error
    (openai/whisper's ``mask`` buffer cut ``[:n_ctx, :n_audio]`` for the cross-attention). Built otherwise
    (``ones(T, S).tril()`` from the two lengths, a window from positions), it is a causal pattern between
    places of two sequences: a warning, since an alignment may be meant so (wait-k decoding), though it is
    most often a decoder's causal flag handed to its cross-attention (onlybooks/llm issue #4,
    NVIDIA/TransformerEngine issue #629). A square table's last rows (aligned bottom-right: a KV cache's
    mask over one sequence) say the queries and keys are one sequence, whatever their names: nothing."""
    queries, keys = scores.axes[-2], scores.axes[-1]
    q_roots, k_roots = _roots(queries), _roots(keys)
    if not q_roots or not k_roots or q_roots & k_roots or None in scores.dims[-2:]:
        return []
    q, k = scores.dims[-2], scores.dims[-1]
    table = _square_table(analysis, e, next(i for i, t in enumerate(e.inputs) if t is mask))
    if table is not None and not e.params.get("causal_from_first_key"):
        return []   # (a square table's last rows: one sequence's cache mask, whatever the keys were named)
    if table is None:
        if not _declared_sequences(analysis, q_roots | k_roots) or _rest_on_sizes(analysis, q_roots, k_roots):
            return []
        return [Kind.CAUSAL_MASK_ACROSS_SEQUENCES.found(e.index, (
            f"{e.op} #{e.index} puts a mask {fmt_named(mask.dims, mask.shape)} that hides the keys after each query "
            f"onto the scores {fmt_named(scores.dims, scores.shape)}, whose keys ({k}) are another sequence than its "
            f"queries ({q}): a causal pattern between places of two sequences, so later keys of {k} are hidden from "
            f"earlier queries of {q}. A decoder's causal mask or flag handed to its cross-attention does this; an "
            "alignment meant so (wait-k decoding) would too, so this is a warning."),
            f"Unless {q} and {k} are aligned on purpose, give this attention no causal mask, only a padding mask "
            f"over its own keys ({k}): a causal mask belongs to the attention whose queries and keys are one "
            "sequence.", severity="warning")]
    return [Kind.CAUSAL_MASK_ACROSS_SEQUENCES.found(e.index, (
        f"{e.op} #{e.index} puts a causal mask {fmt_named(mask.dims, mask.shape)}, cut from the corner of the "
        f"square table {list(table)} (each query i hides the keys after key i), onto the scores "
        f"{fmt_named(scores.dims, scores.shape)}, whose keys ({k}) are another sequence than its queries ({q}): a "
        f"mask built for an attention over one sequence is given to an attention across two, so later keys of "
        f"{k} are hidden from earlier queries of {q} for no reason."),
        f"Give this attention no causal mask (mask=None), or a padding mask over its own keys ({k}): a causal "
        "mask belongs to the attention whose queries and keys are one sequence.")]


def _proven_start(queries, keys) -> int | None:
    """Where the queries start among the keys, where the names prove it: the queries are the slice ``K[a:b]``
    (or ``K[-1:]``) of the keys' own whole axis ``K`` (Perceiver AR's latents, the last ``N`` of the ``T``
    tokens whose prefix and latents are its keys); None otherwise. Sizes decide nothing: the slice's place is
    the slicing op's own."""
    k_atoms, q_atoms = getattr(keys, "atoms", ()), getattr(queries, "atoms", ())
    if len(k_atoms) != 1 or len(q_atoms) != 1 or k_atoms[0].size != k_atoms[0].root_size:
        return None
    base, cut = k_atoms[0].root, cut_from(q_atoms[0].root)
    if not base or base == "?" or cut is None or cut[0] != base:
        return None
    start, stop = (keys.size - 1, keys.size) if cut[1:] == (-1, None) else cut[1:]
    if start is None or stop is None or start < 0 or stop - start != queries.size or stop > keys.size:
        return None
    return start


def _off_positions(analysis: Analysis, e: Event, scores: TensorInfo, mask: TensorInfo) -> list[Diagnostic]:
    """A causal mask whose values align query ``i`` with another key than the query's own position, where the
    names prove that position: the queries are the slice ``K[a:b]`` of the keys ``K``, so query ``i`` is key
    ``a + i`` and must see keys ``0 .. a + i``. Cut from the first key (``ones(L, S).triu(1)``: query ``i``
    beside key ``i``) with ``a > 0``, it hides each query's own position and the ``a`` keys before it
    (lucidrains/perceiver-ar-pytorch's prefix mask written ``triu(1)`` for ``triu(j - i + 1)``); aligned
    bottom-right with ``b`` short of the keys' end, it shows keys after the queries. The base's identity must
    not rest on a choice between equal sizes."""
    queries, keys = scores.axes[-2], scores.axes[-1]
    start = _proven_start(queries, keys)
    if start is None or told_by_size(analysis, keys.atoms[0].root):
        return []
    n_q, n_k = queries.size, keys.size
    aligned = 0 if e.params.get("causal_from_first_key") else n_k - n_q
    if aligned == start:
        return []
    q, k = scores.dims[-2], scores.dims[-1]
    seen = (f"query i sees keys 0..{aligned}+i" if aligned else "query i sees keys 0..i")
    return [Kind.CAUSAL_MASK_MISALIGNED.found(e.index, (
        f"{e.op} #{e.index} puts a causal mask {fmt_named(mask.dims, mask.shape)} onto the scores "
        f"{fmt_named(scores.dims, scores.shape)} whose queries ({q}) are positions {start}..{start + n_q - 1} of "
        f"its keys ({k}), but the mask is aligned otherwise: {seen}, where query i is key {start}+i and should "
        f"see keys 0..{start}+i" + (" (it hides each query's own position)." if aligned < start else
                                    " (it shows keys after each query).")),
        f"Offset the mask by the queries' start: torch.ones({n_q}, {n_k}, dtype=torch.bool).triu({start + 1}) "
        f"hides exactly the keys after each query (for queries that end the keys: triu(S - L + 1)).")]


def _rest_on_sizes(analysis: Analysis, q_roots: frozenset[str], k_roots: frozenset[str]) -> bool:
    """Does telling the queries' sequence from the keys' rest on sizes (a seed chose between two declared
    names of equal size, ``T`` and ``S`` at T = S, and no later use settled it)?"""
    choices = {frozenset(pair) for pair in analysis.size_choices}
    return any(frozenset((q, k)) in choices for q in q_roots for k in k_roots)


def _declared_sequences(analysis: Analysis, roots: frozenset[str]) -> bool:
    """Are these named axes all token axes the run declared (``T``, ``S``)? A static cache's length (``L``,
    named by the engine for the buffer a self-attention's keys are read from) is no second sequence."""
    return all(r in analysis.dims and analysis.namer.is_token_root(r) for r in roots)


def _same_line(e: Event, op: str) -> tuple[TensorInfo, TensorInfo] | None:
    """``(the scores, the mask)`` of a later call of the op that put a window onto proven scores on this line
    (the same code: a chunk's scores, which its unnamed input leaves without roles, are still the scores)."""
    if e.op != op or len(e.inputs) < 2 or not e.outputs:
        return None
    scores = next((t for t in e.inputs if tuple(t.shape) == tuple(e.outputs[0].shape)), None)
    mask = next((t for t in e.inputs if t is not scores), None)
    return (scores, mask) if scores is not None and mask is not None else None


def _one_sequence(queries, keys) -> bool:
    """Are the scores' queries and keys proven to be one sequence (the same named axes)? Sizes decide nothing."""
    roots = _roots(queries)
    return bool(roots) and roots == _roots(keys)


def _judged_on_one_sequence(e: Event, axes) -> bool:
    """Blind queries of a causal pattern (:func:`.directions.rows_set_aside`) stand as they are; those of any
    other pattern (:func:`.directions.blind_rows`) are judged only where the queries and keys are one sequence."""
    return str(e.params.get("hides_side", "")).startswith("future") or _one_sequence(*axes)


def _roots(axis) -> frozenset[str]:
    """The named axes an axis is made of (``{"T"}``; nothing where a part has no name)."""
    roots = frozenset(atom.root for atom in getattr(axis, "atoms", ()))
    return frozenset() if not roots or any(not r or r == "?" for r in roots) else roots


#: how many views back from a mask its table is looked for
_TABLE_DEPTH = 4


def _square_table(analysis: Analysis, e: Event, operand: int) -> tuple[int, int] | None:
    """The square 2-d table ``[L, L]`` the mask operand of ``e`` was cut from, through views only
    (``mask[:n_ctx, :n_audio]``, ``[None, None]``), at least as large as the mask's last two axes; None
    where it was made otherwise."""
    mask = e.inputs[operand]
    event, position = e, operand
    for _ in range(_TABLE_DEPTH):
        source = event.sources[position] if position < len(event.sources) else None
        if source is None:
            return None
        event, position = analysis.events[source[0]], 0
        if not event.view or not event.inputs:
            return None
        shape = tuple(event.inputs[0].shape)
        if len(shape) == 2 and shape[0] == shape[1] and shape[0] >= max(mask.shape[-2:]):
            return shape
    return None


def _product_bases(analysis: Analysis) -> list[Diagnostic]:
    """The same fact for a product that adds a base to the scores it computes (``alibi.baddbmm(q, k)``,
    read as ``β · base``), where its result's last two axes are the queries and the keys by their roles."""
    out = []
    for e in analysis.events_of(Family.PRODUCT):
        far, ignored = e.params.get("bias_favours") == "far", e.params.get("bias_ignored")
        if not (far or ignored) or not e.outputs or len(e.outputs[0].axes) < 2 \
                or [a.role for a in e.outputs[0].axes[-2:]] != ["query", "key"]:
            continue
        scores, base = e.outputs[0], tuple(e.params.get("base_shape", ()))
        shown, base = fmt_named(scores.dims, scores.shape), f"{fmt_named((None,) * len(base), base)} as its base"
        out.append(_far_bias(e, shown, scores.dims[-1], base) if far else
                   _ignored_bias(e, shown, scores.dims[-1], base))
    return out


def _fused(analysis: Analysis) -> list[Diagnostic]:
    """The same facts for ``F.scaled_dot_product_attention``'s ``attn_mask``, where the names prove that
    its q and k hold tokens on their second-to-last axes (the scores' queries and keys)."""
    out = []
    for e in analysis.events_of(Family.FUSED_ATTENTION):
        if not e.params.get("has_mask") or len(e.inputs) < 4:
            continue
        q, k, mask = e.inputs[0], e.inputs[1], e.inputs[3]
        if not all(len(t.dims) >= 2 and analysis.namer.plain_role(t.dims[-2]) == "tokens" for t in (q, k)):
            continue
        scores = f"[..., {q.dims[-2]}={q.shape[-2]}, {k.dims[-2]}={k.shape[-2]}]"
        if e.params.get("bias_favours") == "far":
            out.append(_far_bias(e, scores, k.dims[-2], fmt_named(mask.dims, mask.shape)))
        if e.params.get("bias_ignored"):
            out.append(_ignored_bias(e, scores, k.dims[-2], fmt_named(mask.dims, mask.shape)))
        if e.params.get("hides_side") in ("past", "past-and-padding", "past-and-self"):   # (as for masked_fill)
            out.append(_reversed_mask(e, scores, k.dims[-2], mask, e.params["hides_side"] == "past-and-padding",
                                      e.params["hides_side"] == "past-and-self"))
        if e.params.get("hides_side") == "future-and-self":
            out.append(_mask_hides_itself(e, scores, k.dims[-2], mask))
        elif e.params.get("blind_queries") and _judged_on_one_sequence(e, (q.axes[-2], k.axes[-2])):
            out.append(_blind_queries(e, scores, k.dims[-2], mask))
        if e.params.get("hides_own_key") and _one_sequence(q.axes[-2], k.axes[-2]):
            out.append(_hides_own_key(e, scores, k.dims[-2], mask))
        if e.params.get("past_only") and _one_sequence(q.axes[-2], k.axes[-2]):
            out.append(_keeps_future(e, scores, k.dims[-2], mask))
        if e.params.get("whole_past_hidden") and _one_sequence(q.axes[-2], k.axes[-2]):
            out.append(_reads_only_future(e, scores, k.dims[-2], mask))
        if "hides_side" not in e.params:
            out.append(_unread(e, scores, mask))
    return out


def _unread(e: Event, scores: str, other: TensorInfo) -> Diagnostic:
    why, fix = _why_unread(other)
    return Kind.DIRECTION_UNCHECKED.found(e.index, (
        f"{e.op} #{e.index} puts {fmt_named(other.dims, other.shape)} onto the scores {scores}, but its values "
        f"were not read ({why}): which keys it hides or favours was not checked."), fix)


def _why_unread(other: TensorInfo) -> tuple[str, str]:
    """Why a mask's values were not read, and what would have them read: the true reason, never a guess."""
    if other.device == "meta":
        return "the meta device has no values", "Trace a small copy on the CPU to check it."
    if other.device != "cpu":
        return f"it is on {other.device}, and reading it would wait for the device", \
            "Trace a small copy on the CPU to check it."
    if math.prod(other.shape) > READ_LIMIT:
        return f"it has more than {READ_LIMIT:,} elements", "Trace a small copy to check it."
    return ("the direction is read for masked_fill, torch.where with a large negative fill, a mask added to the "
            "scores and SDPA's attn_mask, not for this op"), \
        "Write the mask as one of those forms to have it checked."


def _far_bias(e: Event, scores: str, key: str | None, bias: str) -> Diagnostic:
    step, key = e.params.get("bias_step"), key or "the keys"
    puts = f"subtracts a bias {bias} from the scores {scores} whose negation" if e.spec is SCORE_SUB else \
        f"adds a bias {bias} to the scores {scores} that"
    return Kind.DISTANCE_BIAS_REVERSED.found(e.index, (
        f"{e.op} #{e.index} {puts} grows with the distance to each query along the keys "
        f"(axis -1, {key}), linearly and in every head{_on_rows(e)} (by up to {step:g} per token): each query "
        "favours the farthest keys, the reverse of ALiBi, which penalises distance."),
        "Reverse its sign: bias = -slope * (i - j) for key j of query i (Press et al.), or slope * j as "
        "Bloom's build_alibi_tensor adds it (the same up to a constant per query).")


def _ignored_bias(e: Event, scores: str, key: str | None, bias: str) -> Diagnostic:
    key = key or "the keys"
    return Kind.BIAS_CONSTANT_ALONG_KEYS.found(e.index, (
        f"{e.op} #{e.index} adds a bias {bias} to the scores {scores} that is the same on every key each query may "
        f"see (along axis -1, {key}) while it changes elsewhere: softmax takes a constant per query away, so the "
        "bias changes no attention weight."),
        "Lay a position bias out along the keys: [..., 1, T] (a value per key position, ALiBi's slope * j), "
        "not [..., T, 1].")


def _on_rows(e: Event) -> str:
    """Where the bias is linear in only most query rows (the others see a key off the line, a padded one):
    how many."""
    rows = e.params.get("bias_rows")
    return f", on {rows[0]} of the {rows[1]} query rows that see three keys or more" if rows else ""


def _mask_hides_itself(e: Event, scores: str, key: str | None, mask: TensorInfo) -> Diagnostic:
    return Kind.CAUSAL_MASK_HIDES_ITSELF.found(e.index, (
        f"{e.op} #{e.index} hides, along the keys (axis -1, {key or 'the keys'}) of the scores {scores}, each "
        f"query's own key as well as those after it ({fmt_named(mask.dims, mask.shape)}): no token attends to "
        "itself, and the first query has no key left at all."),
        "Keep the diagonal: torch.triu(..., diagonal=1) hides only the keys after each query.")


def _hides_own_key(e: Event, scores: str, key: str | None, mask: TensorInfo) -> Diagnostic:
    count, where, query = e.params["hides_own_key"]
    lead = f" (slice {where} of the mask's leading axes)" if where else ""
    more = f", and {count - 1} more quer{'ies' if count > 2 else 'y'} alike" if count > 1 else ""
    return Kind.MASK_HIDES_OWN_KEY.found(e.index, (
        f"{e.op} #{e.index} puts a mask {fmt_named(mask.dims, mask.shape)} onto the scores {scores} that hides "
        f"query {query}'s own key{lead} while that query sees other keys and other queries see its key{more}: "
        f"its queries and keys ({key or 'the keys'}) are one sequence, so a token is kept from attending to "
        "itself: a window or chunk mask built the wrong way round (the positions it should keep hidden), unless "
        "the model means it (XLNet's query stream does not see its own token)."),
        "Keep each query's own key: hide what lies outside the window, masked_fill(~window, min), and take the "
        "chunk of a key as j // C, as for a query.")


def _keeps_future(e: Event, scores: str, key: str | None, mask: TensorInfo) -> Diagnostic:
    _, query, hidden = e.params["past_only"]
    return Kind.MASK_KEEPS_FUTURE.found(e.index, (
        f"{e.op} #{e.index} puts a mask {fmt_named(mask.dims, mask.shape)} onto the scores {scores} that hides "
        f"keys before a query (key {hidden} from query {query}) but no key after any query, along the keys "
        f"({key or 'the keys'}) of one sequence: it limits how far back each query sees yet lets every query see "
        "every later token, a causal sliding window without its causal half."),
        "Keep the causal half with the window: keep = (j <= i) & (j > i - window), hide ~keep.")


def _reads_only_future(e: Event, scores: str, key: str | None, mask: TensorInfo) -> Diagnostic:
    _, query, seen = e.params["whole_past_hidden"]
    return Kind.CAUSAL_MASK_REVERSED.found(e.index, (
        f"{e.op} #{e.index} puts a mask {fmt_named(mask.dims, mask.shape)} onto the scores {scores} that hides "
        f"every key before each query and lets query {query} see the later key {seen}, along the keys "
        f"({key or 'the keys'}) of one sequence: a causal pattern mirrored (its query and key positions swapped), "
        "so each token attends to the future and never to the past."),
        "Build the pattern from the query position i = arange(T)[:, None] and the key position j = arange(T)[None, "
        ":], keep = (i >= j) & pattern(i - j), and hide ~keep.")


def _keeps_far_future(e: Event, scores: str, key: str | None, mask: TensorInfo) -> Diagnostic:
    a = e.params["keeps_far_future"]
    nearer = "the next key" if a == 1 else f"the next {a} keys"
    return Kind.MASK_KEEPS_FAR_FUTURE.found(e.index, (
        f"{e.op} #{e.index} puts a mask {fmt_named(mask.dims, mask.shape)} onto the scores {scores} that hides "
        f"{nearer} after each query and keeps every key beyond them, along the keys ({key or 'the keys'}) of one "
        f"sequence: each query sees the tokens more than {a} places after it, the far future. A sliding window's "
        "edge cut from the causal mask with tril (tril(causal, diagonal=w)) zeroes the causal mask's far part "
        "instead of hiding the far past."),
        "Hide the far past besides the future: mask = triu(full(min), 1) + tril(full(min), -w), or keep = (j <= i) "
        "& (j > i - w), hide ~keep.")


def _skips_ahead(e: Event, scores: str, key: str | None, mask: TensorInfo) -> Diagnostic:
    count, _, query, hidden, seen = e.params["skips_ahead"]
    return Kind.MASK_SKIPS_AHEAD.found(e.index, (
        f"{e.op} #{e.index} puts a causal mask {fmt_named(mask.dims, mask.shape)} onto the scores {scores} that "
        f"lets query {query} see the later key {seen} while key {hidden} between them, a token other queries "
        f"see, stays hidden from it ({count} such quer{'ies' if count > 1 else 'y'} in all), along the keys "
        f"({key or 'the keys'}) of one sequence: the keys a query may see ahead of it are no contiguous block. "
        "Opening every image token to every other image's (transformers issue #38053) reads later images so."),
        "Open a block only to the queries of that block: give each block an id (a cumsum over the block starts) "
        "and open key j to query i where both ids are equal.")


def _looks_ahead(e: Event, scores: str, key: str | None, mask: TensorInfo) -> Diagnostic:
    a = e.params["looks_ahead"]
    nearer = "the next key" if a == 1 else f"the next {a} keys"
    return Kind.MASK_LOOKS_AHEAD.found(e.index, (
        f"{e.op} #{e.index} hides, along the keys (axis -1, {key or 'the keys'}) of the scores {scores}, the keys "
        f"more than {a} after each query and keeps {nearer} ({fmt_named(mask.dims, mask.shape)}): a causal mask "
        "off its diagonal lets each query see the future, a look-ahead window does so by design, and the values "
        "cannot say which, so the mask is not counted as checked."),
        "A causal mask keeps the diagonal and below: torch.tril(ones, diagonal=0), or triu(..., diagonal=1) "
        "as the hide-mask.")


def _blind_queries(e: Event, scores: str, key: str | None, mask: TensorInfo) -> Diagnostic:
    shape, hits = e.params["blind_queries"]
    where, rest = f"query {hits[0] % shape[-1]}", hits[0] // shape[-1]
    if len(shape) > 1:   # (the entry of the mask's leading axes it lies in: [batch, heads])
        at = [rest // math.prod(shape[i + 1:-1]) % shape[i] for i in range(len(shape) - 1)]
        where += f" at {at} of the mask's leading axes {fmt_named(mask.dims[:-2], shape[:-1])}"
    causal = "causal mask" if str(e.params.get("hides_side", "")).startswith("future") else "mask"
    return Kind.MASK_WRONG_AXIS.found(e.index, (
        f"{e.op} #{e.index} puts a {causal} {fmt_named(mask.dims, mask.shape)} onto the scores {scores} that "
        f"leaves {where} with no key at all (every key hidden, or every key opened as a row with none left), "
        f"though other queries attend to its own token, {len(hits)} such quer{'ies' if len(hits) > 1 else 'y'} in "
        f"all: a real token is masked along the queries, so the padding it should hide along the keys "
        f"({key or 'the keys'}) stays visible."),
        "Lay the padding along the keys, the mask's last axis: keep[:, None, None, :], not keep[:, None, :, None].")


def _reversed_mask(e: Event, scores: str, key: str | None, mask: TensorInfo, padded: bool = False,
                   itself: bool = False) -> Diagnostic:
    key = key or "the keys"
    besides = ", besides the padding keys it hides from every query," if padded else ""
    which = "the keys before each query and its own key" if itself else "the keys before each query"
    return Kind.CAUSAL_MASK_REVERSED.found(e.index, (
        f"{e.op} #{e.index} hides, along the keys (axis -1, {key}) of the scores {scores}, "
        f"exactly {which} ({fmt_named(mask.dims, mask.shape)}){besides} and keeps those after it: "
        "a causal mask reversed, so each token attends to the future and not to the past."),
        "Hide the keys after each query: mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1) with "
        "masked_fill(mask, float('-inf')), or torch.tril(...) == 0.")
