"""The verdict: one line that says exactly what was checked, and never a check mark it cannot back.

``✓`` only when every op that could carry a layout bug had its axes named (so the rules could read
what each axis holds), no rule found an error or a warning, no check failed and no name was guessed
from equal sizes. ``✗`` when a rule found an error, ``!`` when it found warnings only. Otherwise ``?``:
"checked N of M ops; not checked: …", naming the ops that could hide a bug. Notes never replace the
verdict; renderers print them under it.

Which ops could carry a layout bug: every op that moves, selects, joins, contracts, reduces or lines up
elements by broadcasting (a view, a transpose, a gather, a matmul, a softmax, a ``cumsum``, a masked
fill, an op shapetrace does not know...). Ops that keep every element where it is and compute it from
itself alone (``contiguous``, dropout) cannot, so they are not counted; nor can an op on module
parameters alone that makes a single number (no input's data passes through it).

>>> from shapetrace.engine.diagnostic import Diagnostic
>>> verdict_of([], [Diagnostic("error", "mixed-axis", 0, "m")]).line
'✗ 1 error: the findings above say where and how to fix it'

A run whose traced code raised is ``✗`` whatever its ops showed: the line says what it raised (its type
and message on one line, control characters stripped) and how many recorded ops ran before it.

>>> verdict_of([], [], exception=TypeError("bad\\nkey\\x1b[0m")).line
'✗ the traced code raised TypeError: bad key[0m (before any recorded op)'

A run stopped before its end (Ctrl-C, ``--max-ops``, ``--seconds``) is never ``✓``: what ran may be all
clear, but the rest of the code, the output included, was not seen. Its line says what stopped it.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shapetrace.engine.axes import TOKEN_ROOTS, coalesce, cut_from, indexed_join, top_level_terms
from shapetrace.engine.directions import causal_triangle
from shapetrace.engine.events import readers_of
from shapetrace.engine.mask_patterns import pattern_unread
from shapetrace.engine.ops import BROADCAST_FAMILIES, Family, family_of
from shapetrace.engine.reductions import ALONG, axes_along
from shapetrace.engine.stacked import ALONG_OPERAND, unpacked_stacks
from shapetrace.engine.untold_twins import softmax_along_untold_twins

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.diagnostic import Diagnostic
    from shapetrace.engine.events import Event

#: families whose ops keep every element in place and compute it from itself alone: no layout bug
_CANNOT_CARRY = frozenset({Family.CONTIGUOUS, Family.DROPOUT, Family.NONE})
#: notes that mean a check did not happen or a name was not proven: no ✓ with one of them
_UNPROVEN_NOTES = {"check-failed": "a check failed", "inference-failed": "the names of an op could not be worked out",
                   "ambiguous-sizes": "names were found from sizes alone, and equal sizes are ambiguous",
                   "order-of-equal-sizes": "a finding rests on the order of equal sizes (one reading of the "
                                           "input finds it, another does not)",
                   "direction-unchecked": "the values of a mask or bias on the scores were not read",
                   "mask-looks-ahead": "a mask keeps the keys just after each query and hides later ones (a causal "
                                       "mask off its diagonal, or a look-ahead window by design)",
                   "attends-over-channels": "a softmax over the features of a feature-by-feature product weighs "
                                            "the values' features (attention over channels by design, or one "
                                            "slip in the layout of q, k and v)",
                   "reduction-over-wrong-axis": "one scale of the attention scores was taken over the batch or "
                                                "the heads (and the keys), so the entries or heads are not apart",
                   "input-unread": "the model was given a tensor that no tensor op read",
                   "qk-norm-one-sided": "the queries and the keys meet normalised on one side only",
                   "pooled-read-unmeasured": "which token a causal model's pooled output reads was not measured "
                                             "on the values",
                   "positions-grouped": "which positions a chunked, blocked or strided mask groups together",
                   "lengths-unmeasured": "the pads of a mask the model builds from its lengths were not measured "
                                         "unread",
                   "norm-across-heads": "a norm runs across the heads of each token together (one norm over D, or "
                                        "a per-head norm widened by a slip)",
                   "mask-hides-own-key": "a mask hides each query's own key while it sees others (a window or "
                                         "chunk taken the wrong way round, or by design: XLNet, Reformer)",
                   "batch-picked": "one entry of the batch was picked and the others dropped for good",
                   "pooled-per-head": "the heads' outputs were averaged over the tokens with the heads kept "
                                      "apart (a readout per head, or a slip for a mean over the heads)",
                   "batch-reduced": "the batch was reduced into one while each token or feature was kept",
                   "causal-declared-unmasked": "a module declares itself causal and its attention over several "
                                               "queries applies no causal mask",
                   "window-width-unchecked": "a sliding window's width read on a mask's values is not one the "
                                             "model's modules hold, or one they hold is applied by no mask",
                   "positions-shared-over-padding": "a table of positions is read by one row shared by every entry "
                                                    "while a row of the mask given is padded in front",
                   "ids-read-by-two-tables": "one ids tensor looks up two tables that are then added",
                   "mask-unexercised": "a mask hid nothing on this input, and neither its layout nor its names "
                                       "prove that it lines up with the keys",
                   "batch-unexercised": "a view places an axis of one entry (the batch) against memory order, "
                                        "which only a run with more entries can check",
                   "rotary-pairing-unchecked": "a rotary table's values were not read",
                   "rotary-grid-positions": "a rotary turns each token by several positions (rows and columns), and "
                                            "which grid position each token takes is not read",
                   "dims-disagree": "the sizes given disagree with the code"}
#: said when no op that could carry a bug had its axes named (a renderer adds how to name them)
NOTHING_NAMED = "? nothing was checked: no axis could be named, so the table shows sizes only."
#: the all-clear's reason, after the count
ALL_CLEAR_REASON = "every axis keeps its meaning from input to output"


@dataclass(frozen=True)
class Verdict:
    """What one run's checks add up to (plain data).

    Attributes:
        mark: ``✓`` (all checked, nothing found), ``?`` (not all checked), ``!`` (warnings), ``✗`` (errors).
        checked: how many of the ops that could carry a layout bug had every axis named.
        total: how many ops could carry a layout bug.
        unchecked: ``(index, op)`` of each op that could carry one but had an unnamed axis.
        errors, warnings: how many findings of each severity.
        unproven: why names or checks are not proven (a failed check, names guessed from sizes).
        contracts: the dependency contracts measured on the values that held (``"batch entries stay
            apart"``...); a broken one is an error among the findings.
        unmeasured: the dependency contracts that were not measured, each with why.
        any_named: whether any axis of any recorded tensor has a name at all.
        on_values: how many of the checked ops a contract checked on the values where no name could (the
            ops that build a rotary table or a causal mask read and found right: :mod:`.value_checked`).
    """

    mark: str
    checked: int
    total: int
    unchecked: tuple[tuple[int, str], ...] = ()
    errors: int = 0
    warnings: int = 0
    unproven: tuple[str, ...] = ()
    contracts: tuple[str, ...] = field(default=())
    any_named: bool = True
    unmeasured: tuple[str, ...] = ()
    on_values: int = 0
    raised: str | None = None   #: what the traced code raised (``"ValueError: boom"``), None when nothing did
    ran_before: int = 0   #: how many recorded ops ran before it raised
    stopped: str | None = None   #: what stopped the run before its end (``"Ctrl-C"``, ``"--max-ops 50"``)

    @property
    def line(self) -> str:
        """The verdict in one line (renderers wrap it)."""
        return verdict_line(self)

    def to_dict(self) -> dict[str, Any]:
        return {"mark": self.mark, "line": self.line, "checked": self.checked, "total": self.total,
                "unchecked": [{"event": i, "op": op} for i, op in self.unchecked],
                "errors": self.errors, "warnings": self.warnings, "unproven": list(self.unproven),
                "contracts": list(self.contracts), "unmeasured": list(self.unmeasured), "raised": self.raised,
                "stopped": self.stopped}


def could_carry_a_layout_bug(event: Event) -> bool:
    """Can this op put an element where another axis's meaning is expected (or read it from there)?
    Not an op on parameters alone (the Differential Transformer's ``torch.sum(self.lambda_q1 *
    self.lambda_k1, dim=-1)``; torch's cross-attention splitting its packed ``in_proj_weight`` into the
    queries' rows and the keys' and values'): no input's data passes through it, and on random weights
    any arrangement of a weight is another weight; where its result meets the data (a product, a sum
    with the scores: checked there) is where a layout can go wrong. Except where it grows a parameter to
    the data's sizes (a class token expanded over the batch): that op lays it out against the data. Nor
    an expand of a tensor whose elements are all one value (``params["constant"]``: a buffer of zeros grown
    over the batch): any arrangement of it is itself."""
    return bool(event.outputs) and not event.noop and event.spec.family not in _CANNOT_CARRY \
        and not event.params.get("constant") \
        and not (event.from_parameters and (event.spec.family is not Family.EXPAND
                                            or all(math.prod(o.shape) == 1 for o in event.outputs))) \
        and not _same_layout_view(event)


def _same_layout_view(event: Event) -> bool:
    """Is this a view that reads its one operand exactly as it lies (the same shape, strides and offset:
    BERT's ``token_type_ids.expand(position_ids.shape[0], -1)`` of a ``[1, 32]`` buffer to ``[1, 32]``) and
    gives its axes the same names? Every element stays at its index and means what it meant: nothing is
    moved that a layout bug could move. (A ``view(T, B, D)`` of ``[B, T, D]`` at B = T lies the same but
    renames its axes: still counted.)"""
    if not event.view or len(event.inputs) != 1 or len(event.outputs) != 1:
        return False
    i, o = event.inputs[0], event.outputs[0]
    return (i.shape, i.stride, i.storage_offset, i.dims) == (o.shape, o.stride, o.storage_offset, o.dims)


def _named(event: Event, value_checked: frozenset[int] = frozenset(),
           discarded: frozenset[tuple[int, ...]] = frozenset()) -> bool:
    """Every axis of more than one entry of every result has a name (what the rules read), and so has
    every axis a reduction, normalisation, softmax or scan computes along (its role is what is checked),
    and every axis broadcasting lines up; or a contract read on the values checks its layout
    (:mod:`.value_checked`: a rotary table's, a causal mask's, and so the ops in ``value_checked`` made).
    A result in ``discarded`` (:func:`discarded_results`) needs no names: nothing read it; nor an axis in it
    (:func:`.stacked.unpacked_stacks`: a stack's count of its operands, unbound or reduced again along it)."""
    return event.checked_on_values or _axes_named(event, value_checked, discarded)


def _twins_swapped(event: Event) -> str | None:
    """Why the names cannot check an op that moves two axes of one name past each other (T5's bias
    ``permute([2, 1, 0])`` of ``[T, T, H]``: queries and keys trade places, and both read ``T``), or
    None. Which input axis each output axis is comes from the strides (a view's, exactly); where they
    cannot tell (equal strides), a move between same-named axes is not ruled out either."""
    if len(event.inputs) != 1 or len(event.outputs) != 1 or event.spec.memory != "view":
        return None   # (a copy's strides are its own layout, not where its axes came from)
    i, o = event.inputs[0], event.outputs[0]
    if len(i.shape) != len(o.shape) or sorted(i.shape) != sorted(o.shape) or tuple(i.shape) == tuple(o.shape) \
            and tuple(i.stride) == tuple(o.stride):
        return None
    twins = {d for d in o.dims if d is not None and sum(x == d and n > 1 for x, n in zip(o.dims, o.shape)) > 1}
    for name in twins - _told_apart_by_roles(o):
        sources = []
        for size, stride, label in zip(o.shape, o.stride, o.dims):
            if label != name or size == 1:
                continue
            found = [b for b, (n, st) in enumerate(zip(i.shape, i.stride)) if n == size and st == stride]
            sources.append(found[0] if len(found) == 1 else None)
        if None in sources or sources != sorted(sources):
            return f"#{event.index} {event.op} moves two axes both named {name} past each other, and names " \
                   "cannot tell which is which"
    return None


def _told_apart_by_roles(info) -> set[str]:
    """The names whose axes of more than one entry carry the roles ``query`` and ``key``, one each: the scores'
    product gave them (carried through moves and the softmax, never read off sizes), so which is which is known
    and the weighted-values rule reads them (timm's channels-first ``v @ attn.transpose(-2, -1)`` of ``[B, H,
    N, N]``)."""
    roles: dict[str, list] = {}
    for label, size, axis in zip(info.dims, info.shape, info.axes):
        if label is not None and size > 1:
            roles.setdefault(label, []).append(axis.role)
    return {label for label, found in roles.items()
            if sorted(str(getattr(role, "value", role)) for role in found) == ["key", "query"]}


def _cut_across_parts(event: Event) -> str | None:
    """Why the names cannot check a slice that cuts a join of two sequences off its parts' bounds (SD3's joint
    output ``T+S`` split at the text's length: ``(T+S)[5:17]`` holds image and text tokens), or None. A cut
    on the parts' bounds is those parts (``T``, ``S``: :func:`.axes.sliced`) and stays checked."""
    if event.spec.family not in (Family.SLICE, Family.SPLIT):
        return None
    for label in (d for o in event.outputs for d in o.dims if d):
        join = indexed_join(label)
        if join and sum(not term.isdigit() for term in top_level_terms(join)) > 1:
            return f"#{event.index} {event.op} cuts {join} off the bounds of its parts ({label}), " \
                   "and names cannot tell which tokens of which sequence it holds"
    return None


#: a cut of a join by bounds: ``(5+N)[1:11]``
_CUT = re.compile(r"\((?P<join>.+)\)\[(?P<start>\d+):(?P<stop>\d+)\]")


def _cut_keeping_counted(event: Event) -> str | None:
    """Why the names cannot check a slice of a join of counted entries (held by the model's own parameters:
    a class token and DINOv2's 4 register tokens, ``5+N``) and the input's tokens that keeps some of each
    (``x[:, 1:]`` is ``(5+N)[1:11]``: the patches with the registers, or the registers by a slip), or None. A
    cut to one part (``N``; ``(5+N)[1:5]``, counted entries only) is checked as before."""
    if event.spec.family is not Family.SLICE or not event.outputs or not event.inputs:
        return None
    sizes = {d: n for d, n in zip(event.inputs[0].dims, event.inputs[0].shape) if d}
    for label in event.outputs[0].dims:
        m = _CUT.fullmatch(label or "")
        terms = top_level_terms(m["join"]) if m and m["join"] in sizes else []
        data = [i for i, t in enumerate(terms) if not t.isdigit()]
        if len(data) != 1 or len(terms) < 2:
            continue
        at = sum(int(t) for t in terms[:data[0]])                                # where the input's tokens begin
        ends = sizes[m["join"]] - sum(int(t) for t in terms[data[0] + 1:])       # and end
        start, stop = int(m["start"]), int(m["stop"])
        if start < ends and stop > at and (start < at or stop > ends):
            return f"#{event.index} {event.op} keeps {label}, counted entries of the model's own next to the " \
                   "input's tokens, and names cannot tell whether the cut meant both"
    return None


def _pooled_apart(event: Event) -> str | None:
    """Why the names cannot check a reduction along a coarse piece of a token axis that keeps a finer piece
    of it (``x.view(B, 2, T // 2, D).mean(1)``: each result the mean of tokens j and j + T/2), or None. Which
    tokens meet there is set by how they were laid out before: Hiera's mask units are unrolled so that the
    tokens one query pools are that far apart, Funnel's pooling meant neighbours (``view(B, T // 2, 2,
    D).mean(2)``, along the finest piece: checked as before), and nothing recorded tells the two apart."""
    if event.spec.family is not Family.REDUCE or len(event.inputs) != 1 or not event.outputs:
        return None
    t = event.inputs[0]
    along = axes_along(Family.REDUCE.value, event.params, len(t.shape)) or ()
    kept = [a for j, axis in enumerate(t.axes) if j not in along for a in coalesce(axis.atoms)]
    for i in along:
        for atom in (coalesce(t.axes[i].atoms) if t.shape[i] > 1 else ()):
            if atom.root in TOKEN_ROOTS and not atom.whole \
                    and any(k.root == atom.root and k.stride < atom.stride for k in kept):
                return f"#{event.index} {event.op} reduces along {t.dims[i]} and keeps a finer piece of " \
                       f"{atom.root}: it meets tokens set apart, and names cannot tell whether they were laid out so"
    return None


def _padded_positions_cut(event: Event, made: dict[int, Event], causal: bool) -> str | None:
    """Why the names cannot check a slice that cuts the positions a padded convolution made from the tokens
    back to the tokens' count (Mamba's causal ``conv1d`` with ``padding = kernel - 1``: ``T`` in, ``N`` = T + 3
    out, ``[..., :T]`` keeps ``N[0:6]``), or None. The names are alike for every cut; which tokens kept position
    j read is the arithmetic of the cut's start s, the padding p and the kernel k: ``j + s - p`` to ``j + s - p +
    k - 1``. A window that ends at j (causal: Jamba's ``[..., :seq_len]``) is proven, and so is one centred on j
    (HuBERT's even kernel, one frame removed) where the code declares no causal mask; any other (Jamba's slip
    ``[..., -seq_len:]``: tokens j to j + 3, later ones) is not."""
    if event.spec.family is not Family.SLICE or len(event.inputs) != 1 or not event.sources \
            or event.sources[0] is None or not event.outputs:
        return None
    source = made.get(event.sources[0][0])
    if source is None or not source.inputs or not source.outputs:
        return None
    before, padded = source.inputs[0], source.outputs[event.sources[0][1]]
    if len(before.shape) != len(padded.shape) or len(padded.shape) != len(event.outputs[0].shape):
        return None
    for j, (token, grown, cut) in enumerate(zip(before.dims, padded.dims, event.outputs[0].dims)):
        where, base = cut_from(cut), (cut_from(token) or (token,))[0]
        if base in TOKEN_ROOTS and grown in TOKEN_ROOTS and where \
                and padded.shape[j] > before.shape[j] == event.outputs[0].shape[j] \
                and not _window_proven(source, j - len(padded.shape), where[1], causal):
            return f"#{event.index} {event.op} cuts {grown}, the positions #{source.index} {source.op} made " \
                   f"from {token}, back to {cut}, and names cannot tell which tokens they stand for"
    return None


def _window_proven(conv: Event, axis: int, start: int | None, causal: bool) -> bool:
    """Does a convolution's position ``axis`` (from the right), cut from ``start``, read for each kept position j
    the tokens up to j (causal) or a window centred on j (none declared causal)?"""
    weight, p = conv.params.get("weight"), conv.params.get("padding")
    dilation, stride = conv.params.get("dilation", 1), conv.params.get("stride", 1)
    if not isinstance(weight, list) or not isinstance(start, int) or start < 0 or -axis > len(weight) - 2:
        return False
    k, p, dilation, stride = weight[axis], _along(p, axis), _along(dilation, axis), _along(stride, axis)
    if not isinstance(p, int) or dilation != 1 or stride != 1:
        return False
    first, last = start - p, start - p + k - 1
    return last == 0 or not causal and first in (-((k - 1) // 2), -(k // 2))


def _along(value, axis: int):
    """A convolution's setting (one int for every position axis, or one per axis) for ``axis`` (from the right)."""
    if isinstance(value, int):
        return value
    return value[axis] if isinstance(value, list) and len(value) >= -axis else None


def _axes_named(event: Event, value_checked: frozenset[int] = frozenset(),
                discarded: frozenset[tuple[int, ...]] = frozenset()) -> bool:
    rows = _weight_rows(event)
    return all(name is not None for j, info in enumerate(event.outputs) if (event.index, j) not in discarded
               for k, (name, size) in enumerate(zip(info.dims, info.shape))
               if size > 1 and (event.index, j, k) not in discarded and (j, k) != rows) \
        and _along_named(event, discarded) and _operands_named(event, value_checked)


#: why a run whose ids held a table's declared padding index and that hid no keys is not proven (:func:`_pads_unhidden`)
PADS_LOOKED_UP = ("pad tokens entered (a table's padding index was looked up) and no mask hid any key, so whether the "
                  "pads are read was not measured")


def _pads_unhidden(events: Sequence[Event]) -> bool:
    """Did pad tokens enter (``params["pads_looked_up"]``: a table's declared padding index among its ids) while no
    op could hide a key from any query: no mask fill, no fused attention given a mask, no mask added to scores
    (``params["hides"]``, read on its values)? Then whether real tokens read the pads is a contract on the values
    no name checks (DaoyuanLi2816/Molecule-Generator PR #22: ``nn.TransformerEncoder`` called without its
    ``src_key_padding_mask``). Where a mask was applied, its lining up with the scores is checked by the rules."""
    return any(e.params.get("pads_looked_up") for e in events) \
        and not any(e.spec.family is Family.MASK_FILL or e.params.get("has_mask") or e.params.get("hides")
                    or e.params.get("hides_side") for e in events)


def _weight_rows(event: Event) -> tuple[int, int] | None:
    """``(0, last axis)`` for a projection by a module's own weight (``nn.Linear``) that reads a named axis: its new
    width is the weight's rows, whatever their name (``F``, or none where its size is also a declared name's: a
    query width 16 = 2·d_k is not told from a fused head pair by its size). Any order of a weight's rows is another
    weight, so no layout bug lives in the width this op makes; the ops that then split, move or meet it have names
    to check of their own (a ``view`` into heads, a sum with named data). None for any other op (a computed weight's
    rows are data: ``F.linear(q, k)`` makes keys)."""
    if not event.params.get("module_weight") or len(event.outputs) != 1 or not event.inputs:
        return None
    read = event.inputs[0]
    if not read.shape or read.dims[-1] is None and read.shape[-1] > 1:
        return None
    return 0, len(event.outputs[0].shape) - 1


def discarded_results(events: Sequence[Event]) -> frozenset[tuple[int, int]]:
    """``(event index, result position)`` of the results of an op with several that the code threw away
    while it read another (``out, _ = self.lstm(x)``: the final states ``[layers·directions, B, hidden]``;
    ``values, _ = scores.max(-1)``: the indices). No later op read them, so no element of theirs reached
    anything a layout bug could spoil, and their axes need no names for the op to count as checked. A
    result the code returned unread is not told from one it dropped, so an op none of whose results was
    read keeps needing names on every one (the last op of a forward)."""
    read = set(readers_of(events))
    whole = {index for e in events for rows in e.joined for index in rows}
    return frozenset((e.index, j) for e in events if len(e.outputs) > 1 and e.index not in whole
                     and any((e.index, k) in read for k in range(len(e.outputs)))
                     for j in range(len(e.outputs)) if (e.index, j) not in read)


def _operands_named(event: Event, value_checked: frozenset[int]) -> bool:
    """Are the axes broadcasting lines up named in every operand (a mask's or a bias's as much as the
    scores'), or was the operand made by an op whose layout its values checked? An operand axis with no
    name met another axis, and nothing checked that the two agree."""
    if family_of(event.op) not in BROADCAST_FAMILIES:
        return True
    sources = event.sources or (None,) * len(event.inputs)
    return all(name is not None for info, source in zip(event.inputs, sources)
               if source is None or source[0] not in value_checked
               for name, size in zip(info.dims, info.shape) if size > 1)


def _value_checked(events: Sequence[Event]) -> frozenset[int]:
    return frozenset(e.index for e in events if e.checked_on_values)


def _along_named(event: Event, discarded: frozenset[tuple[int, ...]] = frozenset()) -> bool:
    """Are the axes this op computes along known and named (True for an op that computes along none)? An axis
    in ``discarded`` as ``(index, ALONG_OPERAND, axis)`` needs none (:func:`.stacked.unpacked_stacks`)."""
    how = family_of(event.op).value
    if how not in ALONG or not event.inputs or event.params.get("elementwise"):
        return True
    t = event.inputs[0]
    along = axes_along(how, event.params, len(t.shape))
    return along is not None and all(t.dims[i] is not None or (event.index, ALONG_OPERAND, i) in discarded
                                     for i in along if t.shape[i] > 1)


def unchecked_ops(events: Sequence[Event]) -> list[int]:
    """The indices of the ops that could carry a layout bug and made a tensor with an unnamed axis."""
    checked, discarded = _value_checked(events), discarded_results(events) | unpacked_stacks(events)
    return [e.index for e in events if could_carry_a_layout_bug(e) and not _named(e, checked, discarded)]


#: the longest exception message a verdict line quotes
MESSAGE_LIMIT = 300


def one_line(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` on one line: line breaks and tabs become spaces, other control and format characters
    (an ANSI escape's ESC, a bidi override) are dropped, and it is cut at ``limit`` characters."""
    kept = "".join(" " if ch in "\n\r\t\v\f" else ch for ch in text
                   if ch in "\n\r\t\v\f" or unicodedata.category(ch) not in ("Cc", "Cf"))
    kept = re.sub(" {2,}", " ", kept).strip()
    return kept if len(kept) <= limit else kept[:limit - 1].rstrip() + "…"


def exception_message(exc: BaseException) -> str:
    """``str(exc)``, or what went wrong getting it: traced code's exception may have a ``__str__`` that
    raises, and that must not become shapetrace's own failure."""
    try:
        return str(exc)
    except BaseException as inner:  # noqa: BLE001 - any class, even a KeyboardInterrupt-like one
        return f"(its message cannot be shown: str() raised {type(inner).__name__})"


def raised_text(exc: BaseException) -> str:
    """``TypeError: its message`` on one line (:func:`one_line`); the type alone when the message is empty."""
    message = one_line(exception_message(exc))
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def verdict_of(events: Sequence[Event], diagnostics: Sequence[Diagnostic],
               contracts: Sequence[str] = (), unmeasured: Sequence[str] = (),
               exception: BaseException | None = None, stopped: str | None = None) -> Verdict:
    """The verdict of a run from its events, its findings, the dependency contracts that held and those
    not measured, what the traced code raised (``✗``: a run that raised is never all clear) and what
    stopped it before its end (``?`` at best: the rest of the code was not seen)."""
    candidates = [e for e in events if could_carry_a_layout_bug(e)]
    unnamed = set(unchecked_ops(events))
    unchecked = tuple((e.index, e.op) for e in candidates if e.index in unnamed)
    errors = sum(d.severity == "error" for d in diagnostics)
    warnings = sum(d.severity == "warning" for d in diagnostics)
    unproven = tuple(dict.fromkeys(_UNPROVEN_NOTES[d.kind] for d in diagnostics if d.kind in _UNPROVEN_NOTES))
    unproven += tuple(why for check in (_twins_swapped, _cut_across_parts, _cut_keeping_counted, _pooled_apart,
                                             softmax_along_untold_twins)
                      for why in map(check, candidates) if why)
    made = {e.index: e for e in events}
    causal = any(causal_triangle(e) or e.params.get("is_causal") or e.params.get("mask_pattern") == "causal"
                 for e in events)
    unproven += tuple(why for e in candidates if (why := _padded_positions_cut(e, made, causal)))
    unproven += (PADS_LOOKED_UP,) if _pads_unhidden(events) else ()
    unproven += tuple(why for e in events if (why := pattern_unread(e)))
    if errors or exception is not None:
        mark = "✗"
    elif warnings:
        mark = "!"
    elif unchecked or unproven or not candidates or stopped:
        mark = "?"
    else:
        mark = "✓"
    named = any(d for e in events for t in (*e.inputs, *e.outputs) for d in t.dims)
    on_values = sum(e.checked_on_values and not _axes_named(e) for e in candidates)
    raised = None if exception is None else raised_text(exception)
    return Verdict(mark, len(candidates) - len(unchecked), len(candidates), unchecked, errors, warnings,
                   unproven, tuple(contracts), named, tuple(unmeasured), on_values=on_values, raised=raised,
                   ran_before=sum(not e.error for e in events), stopped=stopped)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _ops_list(unchecked: Sequence[tuple[int, str]], limit: int = 4) -> str:
    shown = ", ".join(f"#{i} {op}" for i, op in unchecked[:limit])
    return shown + (f" and {len(unchecked) - limit} more" if len(unchecked) > limit else "")


def _coverage(v: Verdict) -> str:
    """``checked 9 of 12 ops; not checked (unnamed axes): #3 __getitem__, …``"""
    text = f"checked {v.checked:,} of {_plural(v.total, 'op')} that could carry a layout bug{_on_values(v)}"
    if v.unchecked:
        text += f"; not checked (unnamed axes): {_ops_list(v.unchecked)}"
    return text


def verdict_line(v: Verdict) -> str:
    """The one verdict line (see the module's docstring for what each mark means)."""
    if v.raised is not None:
        return _raised_line(v)
    if v.mark == "✗":
        return f"✗ {_findings(v)}"
    if v.mark == "!":   # (what was not proven is said beside the warnings too)
        return f"! no errors, {_plural(v.warnings, 'warning')}; {_coverage(v)}{_unproven(v)}{_values(v)}"
    if v.stopped is not None:
        return _stopped_line(v)
    if v.mark == "✓":
        return f"✓ checked all {_plural(v.total, 'op')} that could carry a layout bug{_on_values(v)}: " \
               f"{ALL_CLEAR_REASON}{_values(v)}"
    if not v.total:
        return "? nothing was checked: no op that could carry a layout bug was recorded"
    if not v.any_named:   # (the heads contract is measured without names: what held is said)
        return NOTHING_NAMED.removesuffix(".") + _values(v) if v.contracts or v.unmeasured else NOTHING_NAMED
    return f"? {_coverage(v)}{_unproven(v)}; no errors or warnings in what was checked{_values(v)}"


def _unproven(v: Verdict) -> str:
    """``; not proven: …`` for each reason a name or check is not proven, or nothing; one reason said of several ops
    of one kind is said once (``each of #76, #78 __getitem__ keeps (T+1)[1:6], …``)."""
    ops: dict[tuple[str, str] | str, list[str]] = {}
    for reason in v.unproven:
        m = _ABOUT_AN_OP.fullmatch(reason)
        ops.setdefault((m["op"], m["rest"]) if m else reason, []).extend([m["index"]] if m else [])
    said = [key if isinstance(key, str) else f"{'each of ' if len(found) > 1 else ''}#{', #'.join(found)} {key[0]}"
            f"{key[1]}" for key, found in ops.items()]
    return "".join(f"; not proven: {reason}" for reason in said)


#: a reason about one op: ``#76 __getitem__ keeps (T+1)[1:6], …``, ``#35 scaled_dot_product_attention's mask …``
_ABOUT_AN_OP = re.compile(r"#(?P<index>\d+) (?P<op>[\w.]+)(?P<rest>\W.*)", re.S)


def _on_values(v: Verdict) -> str:
    """`` (6 of them on the values of the rotary tables or causal masks they build)`` or nothing."""
    return f" ({v.on_values} of them on the values of the rotary tables or causal masks they build)" \
        if v.on_values else ""


def _findings(v: Verdict) -> str:
    """``1 error and 2 warnings: the findings above say where and how to fix them``"""
    found = _plural(v.errors, "error") if v.errors else ""
    if v.warnings:
        found += (" and " if found else "") + _plural(v.warnings, "warning")
    them = "it" if v.errors + v.warnings == 1 else "them"
    return f"{found}: the findings above say where and how to fix {them}"


def _raised_line(v: Verdict) -> str:
    """``✗ the traced code raised ValueError: boom (after 4 recorded ops)`` (and the findings, if any)."""
    when = f"after {_plural(v.ran_before, 'recorded op')}" if v.ran_before else "before any recorded op"
    found = f"; {_findings(v)}" if v.errors or v.warnings else ""
    return f"✗ the traced code raised {v.raised} ({when}){found}"


def _stopped_line(v: Verdict) -> str:
    """``? stopped by --max-ops 50 after 50 recorded ops, the rest of the code not seen: checked 50 of …``"""
    head = f"? stopped by {v.stopped} after {_plural(v.ran_before, 'recorded op')}, the rest of the code not seen"
    if not v.total:
        return f"{head}: no op that could carry a layout bug ran before it"
    return f"{head}: {_coverage(v)}{_unproven(v)}; no errors or warnings in what was checked{_values(v)}"


def _values(v: Verdict) -> str:
    """``; held on the values: …; not measured: …`` (the dependency contracts), or nothing."""
    held = f"; held on the values: {', '.join(v.contracts)}" if v.contracts else ""
    return held + (f"; not measured: {', '.join(v.unmeasured)}" if v.unmeasured else "")
