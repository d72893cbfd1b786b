"""One record, inferred: the steps each captured call goes through, in this order.

1. :func:`gets_a_row` — a call without a row of its own passes names on (:mod:`.names`) and stops;
   an addition onto scores becomes a score addition, ``x @ W`` of parameters a projection;
2. :func:`output_names` — the outputs' axes from the op's name rule (:mod:`.names`), a write's
   target (:mod:`.writes`), a fused stack decided (:mod:`.provenance`), a ``cat`` with parameters,
   then element provenance (:mod:`.elements`: a call that moves data, replayed on coordinates);
3. :func:`store_names` — the axes kept per node, ambiguities passed on, slices remembered;
4. :func:`.provenance.tag_step` — q, k, v tags carried on;
5. :func:`.rows.add_row` — the :class:`~shapetrace.engine.events.Event` of the call;
6. an einops chain opened (finished by :mod:`.einops` when the next record is not part of it).

Reads: one :class:`~shapetrace.engine.capture.OpRecord` or ``PassRecord`` and the state the earlier
records left. Adds: what each step says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine import axes as ax
from shapetrace.engine.capture import OpRecord, PassRecord
from shapetrace.engine.directions import (
    added_facts,
    added_operand,
    multiplied_facts,
    subtracted_facts,
    weighs_scores,
)
from shapetrace.engine.faults import faults_raise
from shapetrace.engine.infer.copies import joined_copies
from shapetrace.engine.infer.corrections import keep_ambiguity
from shapetrace.engine.infer.names import clashes, is_scores, names_of, onto_scores, pass_names
from shapetrace.engine.infer.provenance import (
    by_parameter_matrix_product,
    decide_stack,
    from_parameters_only,
    joined_with_parameters,
    one_part_unstacked,
    tag_step,
)
from shapetrace.engine.infer.rows import add_row, note_scaling
from shapetrace.engine.infer.seeds import joined_entries, note_entries
from shapetrace.engine.infer.sizes import (
    constructed_axes,
    grown_axes,
    grown_like_other,
    note_sizes_against_names,
    partly_read_axes,
    regrouped_one,
    repeated_axes,
    sliced_axes,
)
from shapetrace.engine.infer.writes import note_write, written
from shapetrace.engine.ops import (
    SCORE_ADD,
    SCORE_MUL,
    SCORE_SUB,
    Family,
    by_parameter_matrix,
    is_basic_indexing,
    record_params,
)
from shapetrace.engine.vocabulary import PROJECTED, Role

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.infer.state import Inference


def infer_op(state: Inference, index: int, record: OpRecord) -> None:
    """One call as the steps of this module's docstring, in order."""
    in_axes = [state.axes_of(n) for n in record.ins]
    state.elements.note(record)   # (a call without a row too: an index counted by arange, then offset)
    record = gets_a_row(state, record, in_axes)
    if record is None:
        return
    record, out_axes, params = output_names(state, record, in_axes)
    store_names(state, record, in_axes, out_axes)
    tags = tag_step(state, record, in_axes, params)
    event_index = add_row(state, index, record, in_axes, out_axes, params, tags)
    if record.einops is not None and len(record.outs) == 1:
        pending = state.pending_pattern
        opened = (record.einops[2], in_axes[0]) if pending is None or pending[0] != record.einops[0] else pending[4]
        state.pending_pattern = (record.einops[0], record.outs[0], event_index, record.einops[1], opened,
                                 record.einops[3])


def gets_a_row(state: Inference, record: OpRecord, in_axes) -> OpRecord | None:
    """The record as it is shown (an addition onto scores, a product by a parameter matrix), or None
    for a call without a row: its names were passed on, and nothing more is done for it."""
    spec = record.spec
    if not spec.row:
        if spec.additive and onto_scores(state, in_axes):
            added = added_operand(record.kept, [is_scores(axes) for axes in in_axes])
            record = record._replace(spec=SCORE_ADD, params=added_facts(added, _result_shape(record)))
        elif spec.subtractive and onto_scores(state, in_axes) and (taken := subtracted_facts(
                record.kept, [raw[0] for raw in record.in_raw], [is_scores(axes) for axes in in_axes],
                _result_shape(record))):
            record = record._replace(spec=SCORE_SUB, params=taken)
        elif spec.scaling == "multiplies" and weighs_scores(in_axes):
            weighed = multiplied_facts(record.kept, in_axes, _result_shape(record))
            record = record._replace(spec=SCORE_MUL, params=weighed)
        elif _one_shape(record) or not clashes(state, record, in_axes):
            pass_names(state, spec, record.ins, record.outs, [r[0] for r in record.out_raw], record.frozen, in_axes)
            return None
    by_matrix = record.spec.contraction == "matrix" or (record.spec.by_subscripts and projects_last_axis(
        record_params(record.spec, *record.frozen).get("subscripts")))
    if by_matrix and by_parameter_matrix_product(state, record):
        record = record._replace(spec=by_parameter_matrix(record.spec))
    return record


def projects_last_axis(parsed: dict | None) -> bool:
    """Subscripts that sum the first operand's last axis against a matrix's first and keep the rest in order,
    ``x @ W`` spelled as an einsum or a ``tensordot`` (DeepCTR's ``tensordot(inputs, W_Query, dims=([-1], [0]))``,
    ``'abc,cd->abd'``)."""
    if not parsed or len(parsed["inputs"]) != 2 or len(parsed["inputs"][1]) != 2 or not parsed["inputs"][0]:
        return False
    (x, w), out = parsed["inputs"], parsed["output"]
    return w[0] == x[-1] and w[1] not in x and out == x[:-1] + w[1]


def _one_shape(record: OpRecord) -> bool:
    """A product of operands of one shape (recorded for its values: ``scores * mask``): nothing is lined
    up by broadcasting, so no clash of names gives it a row."""
    raw = record.in_raw
    return record.spec.scaling == "multiplies" and len(raw) == 2 and raw[0][0] == raw[1][0]


def output_names(state: Inference, record: OpRecord, in_axes) -> tuple[OpRecord, list, dict]:
    """``(record, axes of each output, params)``: a write's result is its target (with the names the
    write proves noted); other calls' outputs are named by the op's rule, then refined."""
    spec = record.spec
    family = spec.family
    if family is Family.WRITE and len(record.ins) >= 2:
        record = written(state, record, in_axes)
    if record.error is None and spec.separates and in_axes:
        decide_stack(state, spec, record, in_axes[0], len(record.outs))
    if record.error is None and family is Family.WRITE:
        out_axes, params = [in_axes[0]], record.params or {}
    elif record.error is None:
        out_axes, params = names_of(state, spec, record, unguessed_index(state, record, in_axes),
                                    [r[0] for r in record.out_raw])
    else:
        out_axes, params = [], record.params or {}
    if family is Family.JOIN and out_axes:
        out_axes = joined_entries(state, record, in_axes,
                                  [joined_with_parameters(state, record.ins, in_axes, out_axes[0], params)], params)
        out_axes = joined_copies(state, record, in_axes, out_axes, params)
    if spec.family is Family.PROJECTION and out_axes and out_axes[0]:
        out_axes[0] = one_part_unstacked(state, record, out_axes[0])
    if record.error is None and out_axes:
        out_axes = state.elements.axes(record, in_axes, out_axes, state.axes_of,
                                        lambda node: state.guesses.made_from_a_guess(state, node))
        rolled = state.elements.rolled(record, in_axes, out_axes) if record.spec.replay else {}
        if rolled:
            params = {**params, "rolled": rolled}
        flipped = state.elements.reversed(record, in_axes, out_axes) if record.spec.replay else ()
        if flipped:
            params = {**params, "reversed": flipped}
        if record.spec.repeats:
            out_axes = repeated_axes(state, record, out_axes)
        if record.spec.sized:
            out_axes = grown_axes(state, record, out_axes)
        elif record.spec.shape_of_other and record.spec.family is Family.EXPAND:
            out_axes = grown_like_other(record, in_axes, out_axes)
        elif is_basic_indexing(record.spec):
            out_axes = sliced_axes(state, record, out_axes)
        elif record.spec.family is Family.RESHAPE:
            note_sizes_against_names(state, record, out_axes)
            regrouped = regrouped_one(state, record, in_axes, out_axes)
            if regrouped:
                params = {**params, "regrouped_one": regrouped}
    state.elements.note(record)
    if state.pins and out_axes:
        out_axes = [_pinned(state, state.pins.get(node), axes) for node, axes in zip(record.outs, out_axes)]
    return record, out_axes, params


def _pinned(state: Inference, pin, axes):
    """A node's pin over the axes this walk found for it: the pin, except where it holds no name for an axis that
    this walk, with the other pins in place, names as tokens (a pin made from the first walk keeps that walk's
    unknowns beside the names it proves: Idefics2's mask ``cat([mask, ones(B, n_latents)])``, unnamed on the first
    walk, is ``T+3`` once its latents are counted). Widths a pin leaves unnamed on purpose stay so."""
    if pin is None or len(pin) != len(axes):
        return axes if pin is None else pin
    label, role = state.namer.label, state.namer.role
    merged = tuple(a if label(p) is None and p.size == a.size and label(a) is not None and role(label(a)) == Role.TOKENS
                   else ax.unknown_axis(p.size) if _contradicted(state, p, a) else p for p, a in zip(pin, axes))
    return pin if merged == pin else state.interned.setdefault(merged, merged)


def _contradicted(state: Inference, pin: ax.Axis, axis: ax.Axis) -> bool:
    """Does this walk name the axis otherwise than its pin, each a whole name of the same size (a table's ``T``
    repeated, ``2*T``, where its use lined it up with keys ``S``)? Then which is true rests on the sizes alone:
    the axis keeps neither. A fused grouped-query reading (``D+2*D_kv``) the pin replaced is no contradiction:
    the pin is the width's other reading, taken because no use proved the fused one (:mod:`.widths`)."""
    label = state.namer.label
    mine, theirs = label(pin), label(axis)
    return mine is not None and theirs is not None and mine != theirs and pin.size == axis.size \
        and theirs not in ax.FUSED_HEAD_ROOTS \
        and not _blocks_of(state, pin, theirs) and not _pieces_over_size(mine, theirs)


def _pieces_over_size(mine: str, theirs: str) -> bool:
    """Is the pin a sum of pieces its uses proved (:mod:`.pieces`: ``D+D_kv+D_kv+F[128:192]``) over a name the
    walk read off the width's size alone (a multiple, ``3*D``, or a width of its own, ``F``)? The pieces say
    where the width is cut; the size alone says nothing of it."""
    count = theirs.split("*", 1)[0]
    return len(ax.top_level_terms(mine)) > 1 and (theirs == PROJECTED or count.isdigit() and "+" not in theirs)


def _blocks_of(state: Inference, pin: ax.Axis, joined: str) -> bool:
    """Is the walk's ``d_k+d_k+d_k+d_k`` (a join of k equal parts) the pin's ``H·d_k`` (k blocks of that part,
    block-major: :mod:`.module_heads`)? Both say the same layout; the pin says what the blocks are."""
    parts = joined.split("+")
    return len(pin.atoms) == 2 and len(parts) == pin.atoms[0].size and pin.atoms[0].whole \
        and set(parts) == {state.namer.atom_label(pin.atoms[1])}


def unguessed_index(state: Inference, record: OpRecord, in_axes):
    """``in_axes`` with a lookup's index unnamed where it was made from a size guess (:mod:`.guesses`):
    ``embedding(buckets)`` of a ``[T, T]`` buffer seeded ``[B, T]`` at B = T must not hand that guess
    on as the table rows' names, as an index pick does not (:class:`.elements._Picks`)."""
    if not record.spec.looks_up or not in_axes or not state.guesses.made_from_a_guess(state, record.ins[0]):
        return in_axes
    return [ax.unknown_axes(tuple(a.size for a in in_axes[0])), *in_axes[1:]]


def store_names(state: Inference, record: OpRecord, in_axes, out_axes) -> None:
    """Each output's axes kept (an in-place op's node keeps its own), what is made from parameters
    only, an ambiguous guess passed on, and the slice a basic index took (for writes through it)."""
    if record.ins and from_parameters_only(state, record.ins):
        state.from_parameters.update(record.outs)
    if record.ins:
        note_entries(state, record.ins, record.outs)
    for node, axes in zip(record.outs, out_axes):
        if node not in state.axes or node not in record.ins:
            state.axes[node] = axes
        elif record.spec.inplace and len(axes) == len(state.axes[node]):   # (its own axes, named where unnamed)
            own = state.axes[node]
            named = tuple(o if not _unnamed(o) or _unnamed(a) or o.size != a.size else a for o, a in zip(own, axes))
            if named != own:
                state.rename(node, named)
    if state.ambiguous:
        keep_ambiguity(state, record.ins, record.outs, in_axes, out_axes)
    if is_basic_indexing(record.spec) and record.outs and record.ins:
        state.sliced_from[record.outs[0]] = (record.ins[0], record)


def _unnamed(axis) -> bool:
    return not axis.atoms or all(a.root == ax.UNKNOWN for a in axis.atoms)


def op_unnamed(state: Inference, index: int, record: OpRecord, exc: Exception) -> None:
    """The inference failed on one op (a fault of shapetrace): its results are left unnamed, its
    row still shows, and the run's other ops are inferred as usual; the diagnostics say so
    (:mod:`.faults`; with ``SHAPETRACE_STRICT=1`` the fault is raised instead)."""
    unnamed_outputs(state, record.outs, [r[0] for r in record.out_raw], exc)
    if index in state.event_of_record:
        return   # the row was made before the fault
    in_axes = [state.axes_of(n) for n in record.ins]
    out_axes = [state.axes[n] for n in record.outs]
    event_index = add_row(state, index, record, in_axes, out_axes, record.params or {}, None)
    state.unnamed_by_failure.append((event_index, f"{type(exc).__name__}: {exc}"))


def unnamed_outputs(state: Inference, outs, shapes, exc: Exception) -> None:
    if faults_raise():
        raise exc
    for node, shape in zip(outs, shapes):
        state.axes[node] = ax.unknown_axes(tuple(shape))


def infer_pass(state: Inference, record: PassRecord) -> None:
    state.elements.note(record)   # (``arange``, ``+ offset``: an index the trace counts, :mod:`.counted`)
    if not record.ins and record.spec.sized:   # a tensor built from sizes read from axes (:mod:`.sizes`)
        built = constructed_axes(state, record) or partly_read_axes(state, record)
        if built is not None:   # else it is seeded as a tensor that enters the code (:mod:`.seeds`)
            state.axes.update(dict.fromkeys(record.outs, built))
        return
    in_axes = [state.axes_of(n) for n in record.ins]
    if record.spec.family is Family.WRITE and len(record.ins) >= 2:
        note_write(state, record, in_axes)
    pass_names(state, record.spec, record.ins, record.outs, record.out_shapes, record.frozen, in_axes)
    if record.spec.scaling:
        note_scaling(state, record, in_axes)


def _result_shape(record: OpRecord) -> tuple[int, ...]:
    """The shape of a call's first result (``()`` for a call that raised: it has none)."""
    return tuple(record.out_raw[0][0]) if record.out_raw else ()
