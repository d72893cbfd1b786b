"""Names an elementwise op proves for its operands: what broadcasting lines up is one axis (part of
:func:`.corrections.corrections`).

``x + self.pe[:, :x.size(1)]`` (the Annotated Transformer's and the PyTorch tutorial's positional encoding) adds
a table cut from a buffer to the named input: torch lines the operands' trailing axes up position by position,
and an axis of more than one entry must equal the one it meets, so the table's axis of 32 entries that meets
``D`` holds one value per feature: it is ``D`` there, as a join's parts are its result's axes
(:func:`.backward.joined_names`). Only the operand a cut of a tensor that entered the traced code without names
made (a buffer's or a parameter's rows, a lookup ``wte.weight[idx]``), or an op fed such tensors alone (a
position table looked up by a buffer of positions read whole, CLIP's ``position_embedding(position_ids)``), only
a whole, plain name (``B``, ``T``, ``D``) or a convolution's whole grid of patches (``N``, ``Hp·Wp`` in order),
never a piece or another fold, and never for an axis of one entry (that one
is broadcast). The table itself keeps no name (:mod:`..rules.batch_tables` reads that a table with no name was
cut to the batch's length), and nothing is carried further back: a longer walk reached rotary tables, masks and
positions whose values other rules read, and changed 53 of their outcomes. One exception, walked only through
reshapes and casts to a held float table's ``index_select`` and only for a features axis (lib15: XGLM's and
M2M100's sinusoidal rows looked up by positions the forward computes): :func:`_rows_of_a_held_table`.

Reads: the finished inference's axes of every broadcasting elementwise op's operands. Adds: nothing to the
state; returns the pins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.axes import COPIES, GRID_ROOTS, MIXED_PREFIX, UNKNOWN, Axis
from shapetrace.engine.infer.backward import NameWalker, whole_plain
from shapetrace.engine.ops import Family, is_matrix_product

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.infer.state import Inference


def broadcast_names(inference: Inference, found: dict[int, tuple[Axis, ...]]) -> dict[int, tuple[Axis, ...]]:
    """Pins naming each unnamed axis of a table cut (a slice of a tensor that entered the traced code without
    names: a buffer, a parameter) from the axis it meets in the other operand of an elementwise op."""
    # a table the model's constructor made (setup: a sinusoidal table joined from its sine and cosine halves) is
    # such a buffer too, as it is where the model was built before the trace
    namer, records, setup = inference.namer, inference.capture.records, inference.capture.setup
    made = {n: r for i, r in enumerate(records) if i not in setup
            for n in getattr(r, "outs", ()) if n not in getattr(r, "ins", ())}
    entered = {n for r in records for n in getattr(r, "ins", ())} - set(made)
    pins: dict[int, tuple[Axis, ...]] = {}
    for record in records:
        spec = getattr(record, "spec", None)
        if spec is None or spec.family is not Family.ELEMENTWISE or not spec.broadcasts or not record.outs:
            continue
        operands = list(dict.fromkeys(record.ins))
        if len(operands) != 2:
            continue
        shapes = [pins.get(n) or found.get(n) or inference.axes.get(n) or () for n in operands]
        for (node, mine), theirs in ((operands[0], shapes[0]), shapes[1]), ((operands[1], shapes[1]), shapes[0]):
            if not _table(made.get(node), entered):
                _rows_of_a_held_table(inference, found, made, entered, node, mine, theirs, pins)
                continue   # (only a table's cut or lookup: what the table itself is, no use says)
            named = list(mine)
            for p, axis in enumerate(mine):
                q = p + len(theirs) - len(mine)                                    # lined up from the right
                if q >= 0 and axis.size > 1 and axis.size == theirs[q].size and namer.label(axis) is None \
                        and (whole_plain(namer, theirs[q]) or _whole_grid(namer, theirs[q])):
                    named[p] = theirs[q]
            if named != list(mine):
                pins[node] = tuple(named)
    return pins


def contracted_names(inference: Inference, found: dict[int, tuple[Axis, ...]]) -> dict[int, tuple[Axis, ...]]:
    """Pins naming a held table's unnamed axis that a matrix product sums against a named one: ``q [T, B·H, d_k] @
    table[:T, :T].permute(0, 2, 1) [T, d_k', T]`` (NEZHA's and Shaw et al.'s relative positions, a buffer of one
    vector per distance) pairs each entry of the table's ``d_k'`` with the same entry of the queries' ``d_k``: one
    axis, as a broadcast's lined-up axes are. Only a table a module holds (a buffer, a parameter) reached from the
    product through slices and axis moves alone, only from a name (a whole axis or a head's width ``d_k``, never a
    mix); the walk pins the table itself, so every other cut of it (the value-side ``table[:T, :T]``) is named too."""
    namer, records, setup, nodes = inference.namer, inference.capture.records, inference.capture.setup, \
        inference.capture.nodes
    made = {n: r for i, r in enumerate(records) if i not in setup
            for n in getattr(r, "outs", ()) if n not in getattr(r, "ins", ())}
    built = {n for i in setup for n in getattr(records[i], "outs", ())}   # (what the constructor made under the trace)
    pins: dict[int, tuple[Axis, ...]] = {}
    for record in records:
        spec = getattr(record, "spec", None)
        if spec is None or not is_matrix_product(spec) or len(record.ins) != 2 or record.ins[0] == record.ins[1]:
            continue
        a, b = (pins.get(n) or found.get(n) or inference.axes.get(n) or () for n in record.ins)
        if len(a) < 2 or len(b) < 2:
            continue
        for node, position, mine, theirs in ((record.ins[1], -2, b[-2], a[-1]), (record.ins[0], -1, a[-1], b[-2])):
            if mine.size != theirs.size or namer.label(mine) is not None or not sound_name(namer, theirs) \
                    or not _held_table(node, made, nodes, built):
                continue
            walker = NameWalker(inference, {**found, **pins}, theirs)
            walker.back(node, position)
            for n, axes in walker.pins.items():
                pins.setdefault(n, axes)
    return pins


def sound_name(namer, axis: Axis) -> bool:
    """A named axis that is no unknown, no copies and no wrong view's mix (``D``, ``d_k``, ``T``)."""
    return namer.label(axis) is not None and bool(axis.atoms) and \
        not any(a.root in (UNKNOWN, COPIES) or a.root.startswith(MIXED_PREFIX) for a in axis.atoms)


def _held_table(node: int, made: dict, nodes, built: set[int]) -> bool:
    """Is ``node`` a cut of a buffer or parameter a module holds (or the constructor built, traced by ``shapetrace
    trace``), through slices and axis moves alone? A cut, as ``broadcast_names`` reads one: a weight multiplied
    whole (Falcon's ``x @ W``) is a projection, whose input width no pin needs (and a pin would walk again)."""
    cut = False
    while node in made:
        record = made[node]
        if record.spec.family not in (Family.SLICE, Family.AXIS_ORDER, Family.CONTIGUOUS) or len(record.ins) != 1:
            return False
        cut, node = cut or record.spec.family is Family.SLICE, record.ins[0]
    return cut and (node in built or node < len(nodes) and nodes[node].entered
                    and (nodes[node].parameter or nodes[node].held))


#: ops that look rows of their first operand up by integer positions (their second)
_ROW_LOOKUPS = frozenset({"index_select"})


def _rows_of_a_held_table(inference, found, made, entered, node, mine, theirs, pins) -> None:
    """A held float table's rows looked up by positions the trace computed (XGLM's, M2M100's and Speech2Text's
    sinusoidal buffer, ``weights.index_select(0, positions.view(-1)).view(B, T, -1)``), reshaped, then added to
    named features: the table's column axis that meets a whole features axis (``D``) is that axis, pinned back
    through the reshapes to the lookup (never into the table, nor any other role: rotary tables meet ``d_k``,
    masks and biases the tokens, and other rules read those)."""
    namer, at = inference.namer, node
    for _ in range(4):   # back through reshapes and one-operand casts (``.view``, ``.detach()``, ``.to``)
        record = made.get(at)
        if record is None or record.spec.family not in (Family.RESHAPE, Family.ELEMENTWISE) or len(record.ins) != 1:
            break
        at = record.ins[0]
    record = made.get(at)
    if record is None or record.spec.name not in _ROW_LOOKUPS or len(record.ins) != 2 or record.ins[0] not in entered \
            or _positions(record):
        return
    for p, axis in enumerate(mine):
        q = p + len(theirs) - len(mine)
        if q >= 0 and axis.size > 1 and axis.size == theirs[q].size and namer.label(axis) is None \
                and whole_plain(namer, theirs[q]) and namer.plain_role(namer.label(theirs[q])) == "features":
            walker = NameWalker(inference, {**found, **pins}, theirs[q])
            walker.back(node, p, whole_moves=True)
            for n, axes in walker.pins.items():
                if n not in entered:
                    pins[n] = axes


def _table(record, entered: set[int]) -> bool:
    """Was a node made from tables alone: a cut of one tensor that entered the traced code without names, or a
    lookup by integer positions every operand of which entered so (CLIP's and SigLIP's
    ``self.position_embedding(self.position_ids)``: a parameter's rows looked up by a ``[1, N]`` buffer of
    positions, read whole, the lookup itself fed nothing the call was given)?"""
    if record is None or not record.ins:
        return False
    if record.spec.family is Family.SLICE:
        return record.ins[0] in entered
    return all(n in entered for n in record.ins) and _positions(record)


def _positions(record) -> bool:
    """Is the record's first operand integer (positions or ids: a lookup of rows), not a float table of its own
    (``torch.ones(6, 6).tril()``: a mask that rules/masks reads on its values, and names would hide)?"""
    raw = getattr(record, "in_raw", ())
    dtype = raw[0][3] if raw and len(raw[0]) > 3 else None
    return dtype is not None and not dtype.is_floating_point and not dtype.is_complex and str(dtype) != "torch.bool"


def _whole_grid(namer, axis: Axis) -> bool:
    """A convolution's whole grid of patches flattened in order (``Hp·Wp``: the patches ``N`` of a ViT's stem): a
    table that meets it holds one value per patch, as one that meets ``T`` holds one per token."""
    return tuple(a.root for a in axis.atoms) in (GRID_ROOTS[2], GRID_ROOTS[3]) \
        and all(a.whole for a in axis.atoms) and namer.label(axis) is not None
