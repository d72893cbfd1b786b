"""A tensor the model was given and never read (:mod:`..unread`): a note that leaves ``?``.

fairseq issue #318: the decoder layer is handed the encoder's padding mask and calls the encoder
attention without it; every op that ran is right, and the padded source frames are read all the same.
Nothing the run recorded is wrong, so this is no error: it is what the run could not check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic


def unread_inputs(analysis: Analysis) -> list[Diagnostic]:
    """One note for each tensor argument of the model that no op read; one that was read only as Python
    numbers (``.tolist()``, ``.item()``: :func:`..unread.values_read`) is said to be so, not unread."""
    return [_handed_to_python(a) if getattr(a, "read_as", "") else Kind.INPUT_UNREAD.found(None, (
        f"the model was given `{a.name}` ({a.dtype} [{', '.join(map(str, a.shape))}]) and none of its ops read "
        "it: whatever it should have changed (a padding mask's hidden keys, positions) did not happen, and no "
        "check can see what was never used."),
        f"Pass `{a.name}` on to the op that needs it, or stop passing it.") for a in analysis.unread]


def _handed_to_python(a) -> Diagnostic:
    return Kind.INPUT_UNREAD.found(None, (
        f"the model was given `{a.name}` ({a.dtype} [{', '.join(map(str, a.shape))}]) and read it only as Python "
        f"numbers (`{a.read_as}`), never in a tensor op: what those numbers decided (loop bounds, slices, "
        "offsets) is not checked against the tensor's axes."),
        f"Check by hand what `{a.name}`'s numbers select, or let a tensor op take `{a.name}` itself.")


def bypassed_projections(analysis: Analysis) -> list[Diagnostic]:
    """A warning for each ``linear`` whose result reaches nothing the model returned while the tensor it
    projected was read elsewhere (ethen8181/machine-learning issue #13: ``linear_proj =
    self.linear_proj(output)`` computed and ``output`` returned): the layer's output is its projection's
    input, and the projection's weights reach nothing. A warning, not an error: the run cannot say the code
    meant to use it (a head computed for nothing is waste, not a wrong layout)."""
    rows = {e.index: e for e in analysis.events}
    out = []
    for index in analysis.bypassed:
        e = rows.get(index)
        if e is None:
            continue
        where = f"`{e.module}`: {e.code.strip()}" if e.module else e.code.strip()
        out.append(Kind.PROJECTION_BYPASSED.found(index, (
            f"{e.op} #{index} ({where}) computes a projection whose result reaches nothing the model "
            "returns (no op reads it, or what reads it is dropped), while the tensor it projects is read by "
            "another op: that tensor went on in the projection's place, and the projection's weights reach "
            "nothing."),
            "Use the projection's result (return it, or pass it on) where its input is used now."))
    return out


def positions_shared_over_padding(analysis: Analysis) -> list[Diagnostic]:
    """A note where a table is looked up by one row of ids shared by every batch entry that varies along the
    tokens (``params["shared_ids"]``: ``arange(T)[None]``, positions) while the model was given a mask with a
    row padded in front (:attr:`.Analysis.padded_in_front`), the same token axis by name (sizes decide nothing):
    that row's first real token reads the position its first pad has in an unpadded row, so what it gives
    changes when padding is added in front (ndif-team/nnsight issue #672: GPT-2's ``wpe`` read by ``arange(T)``
    under a left-padded batch; ``cumsum(mask) - 1`` per row keeps them). Rotary positions are not lookups: a
    shift common to a row's tokens leaves their scores alone. A note (``?``), not an error: a model may have
    been trained so."""
    out = _rows_cut_for_every_entry(analysis)
    for e in analysis.events:
        if not e.params.get("shared_ids") or not e.inputs:
            continue
        tokens = e.inputs[0].dims[-1]
        masks = [m for m in analysis.padded_in_front if tokens and m[1] and m[1][-1] == tokens]
        if masks:
            name, dims, shape = masks[0]
            ids = fmt_named(e.inputs[0].dims, e.inputs[0].shape)
            out.append(Kind.POSITIONS_SHARED_OVER_PADDING.found(e.index, (
                f"{e.op} #{e.index} looks up a table by one row of ids {ids} shared by every batch entry, while the "
                f"model was given `{name}` {fmt_named(dims, shape)} with a row padded in front: that row's real tokens "
                "read other rows of the table than an unpadded row's same tokens (absolute positions counted from "
                "the padding), so the positions were not checked."),
                f"Count each row's positions from its first real token: position_ids = {name}.long().cumsum(-1) - 1, "
                f"then position_ids.masked_fill_({name} == 0, 1)."))
    return out


def _rows_cut_for_every_entry(analysis: Analysis) -> list[Diagnostic]:
    """The same note where a table made of parameters alone is cut to its first rows, one per token and shared
    by every batch entry (``[T, D]``, no batch axis), while a row of the mask given is padded in front: Whisper's
    ``embed_positions.weight[0:seq_len]`` under a left-padded batch (huggingface/transformers issue #20624)."""
    out = []
    for e in analysis.events_of(Family.SLICE):
        o = e.outputs[0] if e.outputs else None
        if not e.from_parameters or o is None:
            continue
        kept = [(label, analysis.namer.plain_role(label)) for label, n in zip(o.dims, o.shape) if n > 1]
        if [role for _, role in kept] != ["tokens", "features"]:
            continue
        masks = [m for m in analysis.padded_in_front if m[1] and m[1][-1] == kept[0][0]]
        if masks:
            name, dims, shape = masks[0]
            out.append(Kind.POSITIONS_SHARED_OVER_PADDING.found(e.index, (
                f"{e.op} #{e.index} cuts a table of the model's own into {fmt_named(o.dims, o.shape)}, one row per "
                f"token shared by every batch entry, while the model was given `{name}` {fmt_named(dims, shape)} "
                "with a row padded in front: that row's real tokens read other rows of the table than an unpadded "
                "row's same tokens (absolute positions counted from the padding), so the positions were not "
                "checked."),
                f"Count each row's positions from its first real token: position_ids = {name}.long().cumsum(-1) - 1, "
                "and look the table up by them."))
            break
    return out


def causal_over_packed_rows(analysis: Analysis) -> list[Diagnostic]:
    """A warning for each attention whose mask, read on its values, hides the future keys and nothing else while
    the model was given positions that restart at 0 inside a row (:attr:`.Analysis.packed_positions`: sequences
    packed in one row), the same token axis by name (sizes decide nothing): a causal mask alone lets each packed
    sequence read the ones before it (huggingface/transformers PR #46634: the packed sequences' block-diagonal
    mask built only when no 2-D ``attention_mask`` was passed, so an all-ones one dropped it). A warning, not an
    error: a model may let packed sequences see each other on purpose."""
    out = []
    for e in analysis.events:
        if e.params.get("hides_side") != "future" or not e.inputs or not e.outputs:
            continue
        tokens = ({t.dims[-2] for t in e.inputs[:2] if len(t.dims) >= 2} | {e.outputs[0].dims[-1]}) - {None}
        packed = [p for p in analysis.packed_positions if p[1] and p[1][-1] in tokens]
        if packed:
            name, dims, shape = packed[0]
            out.append(Kind.CAUSAL_OVER_PACKED_ROWS.found(e.index, (
                f"{e.op} #{e.index} applies a mask that hides the future keys and nothing else, while the model was "
                f"given `{name}` {fmt_named(dims, shape)} whose positions restart at 0 inside a row (sequences packed "
                "in one row): each packed sequence's queries read the keys of the sequences before it."),
                f"Keep each query to its own sequence: and the causal mask with `seq_id[:, :, None] == seq_id[:, None, "
                f":]`, where seq_id = ({name} == 0).cumsum(-1) (or pass the sequences' lengths to a varlen kernel)."))
    return out


def ids_read_by_two_tables(analysis: Analysis) -> list[Diagnostic]:
    """A note for each pair of tables looked up by one ids tensor and summed
    (:func:`~shapetrace.engine.lookups.ids_read_twice`; HKU-MedAI/MGCA issue #13: BERT's position table read by
    the token types): one of them was likely meant to read other ids. A note (``?``): which ids a table should
    take is not recorded."""
    events = {e.index: e for e in analysis.events}
    out = []
    for a, b in analysis.ids_read_twice:
        first, second = events[a], events[b]
        ids = fmt_named(second.inputs[0].dims, second.inputs[0].shape) if second.inputs else "?"
        out.append(Kind.IDS_READ_BY_TWO_TABLES.found(b, (
            f"{second.op} #{b} ({second.module}) reads the same ids {ids} as {first.op} #{a} ({first.module}), and "
            "the two lookups are added: two tables read by one ids tensor are one table of their sums, so one of "
            "them was likely meant to read other ids (positions: an arange over the tokens); not checked."),
            f"Give {second.module or 'the second table'} its own ids (position_ids = torch.arange(T)[None] for a "
            "position table)."))
    return out

