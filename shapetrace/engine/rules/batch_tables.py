"""A table of the model's own cut to the batch's length: a warning that leaves ``!``.

Batch entries are independent and in no order: nothing a model computes for one entry may depend on where it
sits in the batch. A tensor that entered the traced code with no name (a buffer or a parameter: a position
table, a frequency table) and is cut along one of its axes to a length read from the batch (``pe[:x.size(0)]``:
the PyTorch tutorial's ``PositionalEncoding``, written for sequence-first input, fed batch-first; songyangco/
GETNext issue #2) hands entry b the table's row b: each entry gets another position, and the tokens of one
entry none. The name of the cut axis is the proof (:mod:`~shapetrace.engine.infer.sizes`: a length read from
an axis carries its name), never a size; a table the trace names on any axis (a cache whose batch slots a
write named) is not meant, nor a table cut to the batch's length along two axes (a causal triangle ``tril[:T, :T]``
where the input fits ``[T, B, D]`` too and T is read from it), nor a table indexed by a tensor (``k_pool[slot_ids]``:
each entry gets the row its index names, NVIDIA/TensorRT-LLM PR #2682's fix, tests/corpus/reports24).

A warning, not an error: a buffer laid out per batch slot and read before anything is written into it during
the run (a static cache sized for a larger batch, traced at a later step) is cut the same way on purpose.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import Family

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic


def table_cut_to_batch(analysis: Analysis) -> list[Diagnostic]:
    """A warning for each cut of an unnamed entered tensor whose result has a batch axis it did not have."""
    out = []
    for e in analysis.events_of(Family.SLICE):
        if not e.inputs or not e.outputs or (e.sources and e.sources[0] is not None) or len(e.inputs) > 1:
            continue   # (a table indexed by a tensor, ``pool[slot_ids]``, gives each entry the row its index says)
        table, cut = e.inputs[0], e.outputs[0]
        if any(table.dims) or len(table.shape) != len(cut.shape):
            continue
        batch = [j for j, label in enumerate(cut.dims) if analysis.namer.plain_role(label) == "batch"]
        if len(batch) != 1 or not 0 < cut.shape[batch[0]] < table.shape[batch[0]]:
            continue   # (a square table cut [:n, :n] to one length twice is a table over pairs: not meant)
        k = batch[0]
        what = "so batch entry b gets the table's entry b, and what each entry gets depends on its place in the " \
            "batch" if cut.shape[k] > 1 else "one entry: it broadcasts, so every token gets the table's first entry"
        out.append(Kind.TABLE_CUT_TO_BATCH.found(e.index, (
            f"{e.op} #{e.index} cuts the table {fmt_named(table.dims, table.shape)}, which has no batch axis, to "
            f"{fmt_named(cut.dims, cut.shape)}: axis {k} is cut to the batch's length ({cut.dims[k]}), {what}."),
            "Cut the table along the axis it indexes with that axis's length: a position table with the tokens' "
            "(pe[:x.size(1)] on batch-first [B, T, D] input), then broadcast it over the batch."))
    return out


def picked_at_length(analysis: Analysis) -> list[Diagnostic]:
    """A warning for each table entry picked at a tensor's length and added to every token of that tensor
    (:func:`~shapetrace.engine.lookups.picked_at_length`: DiffPoseTalk issue #20, ``x + self.pe[:, x.shape[1], :]``).
    A warning: an embedding of the length itself, added to every token on purpose, is picked the same way."""
    out = []
    for pick, added, length in analysis.picked_at_length:
        e = analysis.events[pick]
        table, row = e.inputs[0], e.outputs[0]
        out.append(Kind.PICKED_AT_LENGTH.found(e.index, (
            f"{e.op} #{e.index} picks one entry of the table {fmt_named(table.dims, table.shape)} at {length}, a "
            f"length read from the tensor that an `{added}` adds it to: the entry "
            f"{fmt_named(row.dims, row.shape)} broadcasts over that tensor's {length} tokens, so every token gets the "
            f"entry at position {length}, one past the last, and none its own position."),
            "Cut the table to the length instead of picking at it: pe[:, :x.size(1)] gives token t the entry t."))
    return out
