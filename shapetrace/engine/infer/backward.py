"""Heads an attention product proves, carried back to the tensors it was made from (part of
:func:`.corrections.corrections`).

The role signature of attention: scores ``q [..., H, T, E] @ k [..., H, E, S] -> [..., H, T, S]``.
Where the two token axes of a product are known (its rows are queries and its columns keys), the
batch is named in front, and the axis just before the queries is unnamed, with the declared number
of heads, that axis is the heads: each group attends over the tokens on its own. Latent attention
(DeepSeek-V2's MLA) splits its projections into heads of widths that are not D/H (``nope + rope``,
``v``), so nothing names them on the way; the product does. The name is then carried back, axis by
axis, through the ops that made each operand (transposes, splits, slices, the writes that filled a
``new_empty`` buffer) up to the view that split the projection, and the inference runs again with
those names pinned (from that view on: :func:`.state.corrected`).

Reads: the finished inference's axes of every product's result and operands, and the records that made
them (writes and the slices written through included). Adds: nothing to the state; returns the pins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine import axes as ax
from shapetrace.engine.axes import Axis
from shapetrace.engine.infer.writes import write_lines, written_axes
from shapetrace.engine.op_args import Call, baddbmm_operands
from shapetrace.engine.ops import (
    Family,
    arg,
    is_basic_indexing,
    is_matrix_product,
    lines_up_by_broadcast,
)
from shapetrace.engine.thawed import thaw_args
from shapetrace.engine.vocabulary import Role

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.infer.state import Inference

#: families whose name rules move whole axes around (or keep them): a name is carried back through them
CARRIED = frozenset({Family.AXIS_ORDER, Family.SPLIT, Family.SLICE, Family.CONTIGUOUS, Family.SIZE_ONE_AXIS,
                      Family.DROPOUT, Family.ELEMENTWISE, Family.MASK_FILL, Family.SOFTMAX})
#: what a name found at a join is also carried back through, where the op keeps the axis whole
_WHOLE_MOVES = frozenset({Family.RESHAPE, Family.EXPAND})
HEADS = "H"


def heads_from_products(inference: Inference, found: dict[int, tuple[Axis, ...]]) -> dict[int, tuple[Axis, ...]]:
    """Pins (node -> axes) naming the heads of every attention product whose batch axis is unnamed."""
    namer = inference.namer
    size = namer.dims.get(HEADS)
    if not size or size == 1:
        return {}
    walker = None   # made at the first product that needs it: it indexes every record
    for record in inference.capture.records:
        spec = getattr(record, "spec", None)
        if spec is None or not record.outs or len(record.ins) < 2:
            continue
        if spec.family is Family.FUSED_ATTENTION:
            out = _fused_attention_queries(inference, record)
        elif is_matrix_product(spec) and len(record.ins) == 2:
            out = inference.axes.get(record.outs[0])
            if not out or len(out) < 3 or (out[-2].role, out[-1].role) != ("query", "key"):
                continue
        elif spec.family is Family.JOIN:
            joined = _joined_heads(inference, record, size)
            if joined:
                walker = walker or NameWalker(inference, found, ax.root_axis(HEADS, size))
                for node, position in joined:
                    walker.back(node, position, whole_moves=True)
            continue
        elif lines_up_by_broadcast(spec) or spec.operands is baddbmm_operands:
            walker = walker or NameWalker(inference, found, ax.root_axis(HEADS, size))
            for node, position in _bias_heads(inference, record, size) + walker.folded_bias_heads(record):
                walker.back(node, position)
            continue
        else:
            continue
        if out and _heads_axis_unnamed(namer, out, size):
            walker = walker or NameWalker(inference, found, ax.root_axis(HEADS, size))
            for node in record.ins:
                walker.back(node, -3)
        elif out and len(out) >= 4 and namer.label(out[-3]) == HEADS:
            for node in record.ins[1:]:
                if _unnamed_heads_sized(inference, node, size):
                    walker = walker or NameWalker(inference, found, ax.root_axis(HEADS, size))
                    walker.back_to_copies(node, -3)
    return walker.pins if walker is not None else {}


def joined_names(inference: Inference, found: dict[int, tuple[Axis, ...]]) -> dict[int, tuple[Axis, ...]]:
    """Pins naming the parts of a join from one another: ``cat([cls_token.expand(B, -1, -1), x], dim=1)``
    lines every axis but the joined one up position by position (torch requires their sizes equal), so an
    axis that one part or the result names whole (``D`` from ``x``) is that axis in each part and in the
    result too; the name is carried back through the ops that keep it whole (the class token's ``expand``).
    Only a whole, plain name (``B``, ``D``), never a piece or a fold; where the parts and the result name an
    axis differently nothing is carried (the join's own finding says so). A name found from sizes alone stays
    one, flagged as the verdict flags it where sizes are equal."""
    namer, walkers, pins = inference.namer, {}, {}
    for record in inference.capture.records:
        spec = getattr(record, "spec", None)
        if spec is None or spec.family is not Family.JOIN or not record.outs or len(record.ins) < 2:
            continue
        out = found.get(record.outs[0]) or inference.axes.get(record.outs[0]) or ()
        args, kwargs = thaw_args(record.frozen)
        dim = arg(args, kwargs, 1, "dim", 0)
        if not out or not isinstance(dim, int):
            continue
        parts = [(n, found.get(n) or inference.axes.get(n) or ()) for n in dict.fromkeys(record.ins)]
        parts = [(n, axes) for n, axes in parts if len(axes) == len(out)]
        for p in range(len(out)):
            if p == dim % len(out) or out[p].size == 1:
                continue
            named = {namer.label(a): a for a in (out[p], *(axes[p] for _, axes in parts)) if whole_plain(namer, a)}
            if len(named) != 1:
                continue   # nothing to carry, or parts that disagree (the join's own finding)
            axis = next(iter(named.values()))
            for node, axes in ((record.outs[0], out), *parts):
                if axes[p].size == axis.size and namer.label(axes[p]) is None:
                    walker = walkers.setdefault(axis, NameWalker(inference, found, axis))
                    walker.back(node, p, whole_moves=True)
        for node, axis in _counted_parts(inference, out, parts, dim % len(out)):
            walkers.setdefault(axis, NameWalker(inference, found, axis)).back(node, dim % len(out), whole_moves=True)
    for walker in walkers.values():   # each names one axis: a node two of them reach takes both names
        for node, axes in walker.pins.items():
            before = found.get(node) or inference.axes.get(node) or ()
            merged = list(pins.get(node, before))
            for i, (mine, old) in enumerate(zip(axes, before)):
                if mine != old:
                    merged[i] = mine
            pins[node] = tuple(merged)
    return pins


def _counted_parts(inference: Inference, out, parts, dim: int) -> list[tuple[int, Axis]]:
    """Where a join is named along its joined axis (``1+4+N``: :func:`.provenance.joined_with_parameters`), the
    parts made from parameters only that it counted (DINOv2's ``register_tokens.expand(B, -1, -1)``), each with
    its count as the name of its joined axis (``4``). Joined along the tokens (``1+4+N``, Idefics2's latents
    ``T+3`` behind the context), a count is as many tokens: its root takes the tokens' role, so that a view
    which cuts the latents across the heads is the mix of tokens it is."""
    namer = inference.namer
    label = namer.label(out[dim])
    if label is None:
        return []
    found = [(node, ax.root_axis(str(axes[dim].size), axes[dim].size)) for node, axes in parts
             if axes[dim].size > 1 and namer.label(axes[dim]) is None
             and (node in inference.from_parameters or inference.capture.nodes[node].parameter)]
    if found and namer.role(ax.root_axis(label, out[dim].size).atoms[0].root) == Role.TOKENS:
        for _, axis in found:
            namer.declared_roles.setdefault(axis.atoms[0].root, Role.TOKENS)
    return found


def complex_tables(inference: Inference, found: dict[int, tuple[Axis, ...]]) -> dict[int, tuple[Axis, ...]]:
    """Pins naming a table of complex numbers multiplied onto complex pairs (Meta's rotary,
    ``view_as_complex(xq.reshape(*xq.shape[:-1], -1, 2)) * freqs_cis.view(1, T, 1, d/2)``): each entry turns
    one pair by construction (:mod:`.rotary` never checks this form), and broadcasting lines the table up with
    the pairs axis by axis, so an unnamed table axis of more than one entry that meets a named axis of the
    pairs is that axis (its frequencies are the pairs' axis), carried back through the views and the slice that
    made it; a table held by the model named by a size guess (:mod:`.guesses`, SAM 2's at B = T = d/2) is as
    unnamed. Only a product of two complex operands: a real table's layout is checked on its values instead."""
    namer, walkers = inference.namer, {}
    for record in inference.capture.records:
        spec = getattr(record, "spec", None)
        raw = getattr(record, "in_raw", ())   # (a call without a row keeps no layouts: no dtype to read)
        if spec is None or spec.scaling != "multiplies" or len(record.ins) != 2 or len(raw) != 2 \
                or not all(getattr(r[3], "is_complex", False) for r in raw):
            continue
        sides = [found.get(n) or inference.axes.get(n) or () for n in record.ins]
        guess = [n not in found and inference.guesses.made_from_a_guess(inference, n) for n in record.ins]
        for node, mine, other, mine_guessed, other_guessed in ((record.ins[0], *sides, *guess),
                                                               (record.ins[1], *sides[::-1], *guess[::-1])):
            if other_guessed:   # (a size guess names nothing by lining up)
                continue
            for back in range(-min(len(mine), len(other)), 0):
                axis = other[back]
                if mine[back].size == axis.size > 1 and namer.label(axis) is not None \
                        and (mine_guessed or namer.label(mine[back]) is None):
                    walker = walkers.setdefault(axis, NameWalker(inference, found, axis, over_guesses=True))
                    walker.back(node, back, whole_moves=True)
    pins: dict[int, tuple[Axis, ...]] = {}
    for walker in walkers.values():
        for node, axes in walker.pins.items():
            before = found.get(node) or inference.axes.get(node) or ()   # (only what this walker pinned is taken:
            pins[node] = tuple(mine if mine != old else kept   # another walker's pin on the node stays)
                               for mine, old, kept in zip(axes, before, pins.get(node, before)))
    return pins


#: elementwise records walked back from a stacked part to the entries it picks
_PART_DEPTH = 8


def stacked_pairs(inference: Inference, found: dict[int, tuple[Axis, ...]]) -> dict[int, tuple[Axis, ...]]:
    """Pins naming the new axis of a ``stack`` whose parts are elementwise arithmetic on the entries of one
    named axis picked one by one (torchtune's and ChatGLM's rotary, ``stack([x[..., 0] * c - x[..., 1] * s,
    x[..., 1] * c + x[..., 0] * s], -1)`` of pairs ``x [..., d/2, 2]``): part ``j`` is entry ``j`` of each pair
    turned within its pair, and the stack puts the new axis where that axis was, so the new axis is that axis
    (then ``flatten(3)`` gives ``d`` back), as ``x * cos + rotate_half(x) * sin`` keeps ``d``. Only where every
    part picks from that axis, its indices are exactly the parts' count, and exactly one named axis qualifies
    (a table's ``[..., 0]``/``[..., 1]`` of cos and sin are picked alike but have no name)."""
    namer = inference.namer
    made = {node: record for record in inference.capture.records if getattr(record, "spec", None) is not None
            for node in record.outs}
    pins: dict[int, tuple[Axis, ...]] = {}
    for record in inference.capture.records:
        spec = getattr(record, "spec", None)
        if spec is None or not spec.stacks or len(record.outs) != 1 or len(record.ins) < 2:
            continue
        out = found.get(record.outs[0]) or inference.axes.get(record.outs[0]) or ()
        args, kwargs = thaw_args(record.frozen)
        dim = arg(args, kwargs, 1, "dim", 0)
        if not out or not isinstance(dim, int) or namer.label(out[dim % len(out)]) is not None:
            continue
        dim %= len(out)
        picked = [_picks(inference, made, node, dim, len(out)) for node in record.ins]
        common = set.intersection(*(set(p) for p in picked))
        k = len(record.ins)
        axes = {found.get(src, inference.axes.get(src, ()))[dim] for src in common
                if sorted({j for p in picked for j in p[src]}) == list(range(k))}
        named = [a for a in axes if namer.label(a) is not None and a.size == len(record.ins)]
        if len(named) == 1:
            pins[record.outs[0]] = out[:dim] + (named[0],) + out[dim + 1:]
    return pins


def _picks(inference: Inference, made: dict, node: int, dim: int, rank: int) -> dict[int, list[int]]:
    """source node -> the indices of its axis ``dim`` (of ``rank`` axes) that ``node`` picks one by one
    (``x[..., j]``) through elementwise arithmetic."""
    found: dict[int, list[int]] = {}
    todo, seen = [(node, 0)], set()
    while todo:
        n, depth = todo.pop()
        record = made.get(n)
        if record is None or n in seen or depth > _PART_DEPTH:
            continue
        seen.add(n)
        spec = record.spec
        if spec.family is Family.ELEMENTWISE:
            todo.extend((i, depth + 1) for i in record.ins if isinstance(i, int))
        elif is_basic_indexing(spec) and record.ins:
            j = _picked_index(record, dim, rank)
            if j is not None:
                found.setdefault(record.ins[0], []).append(j)
    return {src: sorted(set(js)) for src, js in found.items()}


def _picked_index(record, dim: int, rank: int) -> int | None:
    """The one index ``x[..., j]`` (or ``x[:, :, j]``) picks along axis ``dim`` of an ``x`` of ``rank`` axes,
    keeping every other axis whole; None for any other subscript."""
    args, _ = thaw_args(record.frozen)
    index = args[1] if len(args) > 1 else None
    index = index if isinstance(index, tuple) else (index,)
    if sum(i is Ellipsis for i in index) > 1 or not all(i is Ellipsis or type(i) is int or i == slice(None)
                                                        for i in index):
        return None
    if Ellipsis in index:
        at = index.index(Ellipsis)
        index = index[:at] + (slice(None),) * (rank - len(index) + 1) + index[at + 1:]
    index = index + (slice(None),) * (rank - len(index))
    ints = [(p, i) for p, i in enumerate(index) if type(i) is int]
    return ints[0][1] if len(index) == rank and len(ints) == 1 and ints[0][0] == dim else None


def whole_plain(namer, axis: Axis) -> bool:
    """A whole axis named by one declared root (``D``, ``B``), not a piece, a fold, an unknown or a wrong view's mix."""
    root = axis.atoms[0].root if len(axis.atoms) == 1 else ""
    return len(axis.atoms) == 1 and axis.atoms[0].whole and root not in (ax.UNKNOWN, ax.COPIES) \
        and not root.startswith(ax.MIXED_PREFIX) and namer.label(axis) is not None


def _unnamed_heads_sized(inference: Inference, node: int, size: int) -> bool:
    axes = inference.axes.get(node) or ()
    return len(axes) >= 3 and axes[-3].size == size and inference.namer.label(axes[-3]) is None


def _bias_heads(inference: Inference, record, size: int) -> list[tuple[int, int]]:
    """``scores [B, H, T, S] + bias [1, H', T', S']``: broadcasting lines the bias up with the scores axis
    by axis, so an unnamed bias axis with H entries that meets the heads is the heads, the axis the bias
    is added along (a table made from parameters only, Swin's relative-position bias). Only where no
    other axis of the scores has H entries: at B = T = H nothing says which of the bias's axes is which
    once views have re-read it, so nothing is named."""
    namer = inference.namer
    ranked = [(node, inference.axes.get(node) or ()) for node in dict.fromkeys(record.ins)]
    scores = [(node, a) for node, a in ranked if len(a) >= 4 and _is_scores(namer, a)]
    if len(scores) != 1 or not lines_up_by_broadcast(record.spec):
        return []
    _, axes = scores[0]
    h = [i for i, a in enumerate(axes) if namer.label(a) == HEADS]
    if len(h) != 1 or any(a.size == size for i, a in enumerate(axes) if i != h[0]):
        return []
    back = h[0] - len(axes)   # from the right, as torch lines operands up
    found = []
    for node, other in ranked:
        if node == scores[0][0] or len(other) < -back:
            continue
        if other[back].size == size and namer.label(other[back]) is None:
            found.append((node, back))
    return found


def _joined_heads(inference: Inference, record, size: int) -> list[tuple[int, int]]:
    """``cat([scores [B, H, T, S], sinks [B, ?, T, 1]], dim=-1)`` (gpt-oss's per-head sink logit joined as
    one more key): every axis but the joined one is one axis in every part, so an unnamed axis of H entries
    beside the scores' heads is the heads. Only where no other axis of the scores has H entries (at B = T = H
    nothing says which is which)."""
    namer = inference.namer
    ranked = [(node, inference.axes.get(node) or ()) for node in dict.fromkeys(record.ins)]
    scores = [axes for _, axes in ranked if len(axes) >= 3 and _is_scores(namer, axes)]
    if len(scores) != 1:
        return []
    h = [i for i, a in enumerate(scores[0]) if namer.label(a) == HEADS]
    if len(h) != 1 or any(a.size == size for i, a in enumerate(scores[0]) if i != h[0]):
        return []
    args, kwargs = thaw_args(record.frozen)
    dim, ndim = arg(args, kwargs, 1, "dim", 0), len(scores[0])
    if not isinstance(dim, int) or dim % ndim == h[0]:
        return []
    return [(node, h[0]) for node, axes in ranked if len(axes) == ndim and axes[h[0]].size == size
            and namer.label(axes[h[0]]) is None]


def _is_scores(namer, axes: tuple[Axis, ...]) -> bool:
    return (axes[-2].role, axes[-1].role) == ("query", "key")


def _fused_attention_queries(inference: Inference, record) -> tuple[Axis, ...] | None:
    """SDPA's role signature, ``q [..., H, T, E] · k [..., H, S, E] · v [..., H, S, Ev]``: the queries'
    axes when their token axis is named (the axis before it is then the heads, as for a product)."""
    q = inference.axes.get(record.ins[0])
    if not q or len(q) < 4 or not inference.namer.is_token_root(_root(q[-2])):
        return None
    return q


def _root(axis: Axis) -> str:
    return axis.atoms[0].root if len(axis.atoms) == 1 else ""


def _heads_axis_unnamed(namer, out: tuple[Axis, ...], size: int) -> bool:
    """``[B, ?, T, S]``: the axis just before the queries is unnamed, has H entries, no axis is H yet,
    and the batch is accounted for by a named batch axis in front (a ``[?, T, S]`` product of a single
    head over an unnamed batch is not evidence of heads)."""
    if len(out) < 4 or out[-3].size != size or namer.label(out[-3]) is not None:
        return False
    labels = [namer.label(a) for a in out]
    return HEADS not in labels and any(lab and namer.role(lab) == "batch" for lab in labels[:-3])


class NameWalker:
    def __init__(self, inference: Inference, found: dict, axis: Axis, over_guesses: bool = False):
        self.inference, self.found, self.axis = inference, found, axis
        self.over_guesses = over_guesses   # a size guess's names (.guesses) yield to the walk as unnamed ones do
        self.guessed = lambda node: node not in found and inference.guesses.made_from_a_guess(inference, node)
        self.pins: dict[int, tuple[Axis, ...]] = {}
        self.made: dict[int, object] = {}
        self.writers: dict[int, list] = {}
        for record in inference.capture.records:
            spec = getattr(record, "spec", None)
            if spec is None:
                continue
            if spec.family is Family.WRITE and len(record.ins) >= 2:
                self.writers.setdefault(record.ins[0], []).append(record)
            for node in record.outs:
                if node not in record.ins:
                    self.made[node] = record
        self.slices: dict[int, list] = {}   # a buffer -> the ``buffer[index]`` views something is written into
        for record in inference.capture.records:
            spec = getattr(record, "spec", None)
            if spec is not None and is_basic_indexing(spec) and record.ins and record.outs and \
                    record.outs[0] in self.writers:
                self.slices.setdefault(record.ins[0], []).append(record)
        self.seen: set[tuple[int, int]] = set()

    def axes(self, node: int) -> tuple[Axis, ...]:
        return self.pins.get(node) or self.found.get(node) or self.inference.axes.get(node) or ()

    def back(self, node: int, position: int, whole_moves: bool = False) -> None:
        """Pin axis ``position`` of ``node`` as the walker's axis and follow it back to the ops that made it;
        ``whole_moves``: through reshapes and expands too, where they keep that axis whole (a parameter
        ``(H,)`` reshaped ``(1, -1, 1, 1)`` and expanded to ``(B, -1, T, 1)``)."""
        axes = self.axes(node)
        if not axes or not -len(axes) <= position < len(axes):
            return
        p = position % len(axes)
        if (node, p) in self.seen or len(self.seen) > 4096:
            return
        self.seen.add((node, p))
        if axes[p].size != self.axis.size or self.inference.namer.label(axes[p]) is not None \
                and not (self.over_guesses and self.guessed(node)):
            return
        if self.guessed(node):   # (a pin never carries a size guess's names: the walk again names the rest)
            axes = ax.unknown_axes(tuple(a.size for a in axes))
        self.pins[node] = axes[:p] + (self.axis,) + axes[p + 1:]
        for write in self.writers.get(node, ()):
            self._through_write(write, p, len(axes))
        for view in self.slices.get(node, ()):
            self._through_slice(view, p, len(axes))
        record = self.made.get(node)
        if record is not None and record.spec.family is Family.JOIN:
            self._through_join(record, p, len(axes))
        elif record is not None and record.spec.family is Family.ELEMENTWISE and len(record.ins) > 1:
            self._through_broadcast(record, p, len(axes), whole_moves)
        elif record is not None and (record.spec.family in CARRIED
                                     or whole_moves and record.spec.family in _WHOLE_MOVES):
            self.through_op(record, node, p, whole_moves)

    def back_to_copies(self, node: int, position: int) -> None:
        """The keys or values of multi-query attention lined up with named query heads: their axis there
        is the heads only where it was grown from one entry (``k.expand(-1, H, -1, -1)``: every query
        head reads the one key head), followed back through the ops that move whole axes, or where the
        walk ends where it would if no heads were named: at the view that cut unnamed features into them
        and the buffer the writes filled (DeepSeek's keys, once its queries are named through a latent
        width ``F``). Any other unnamed axis of H entries (a gather, a fold the names lost) is left as it is."""
        pins, seen = dict(self.pins), set(self.seen)
        self.back(node, position)
        added = [n for n in self.pins if self.pins[n] != pins.get(n)]
        ends = [n for n in added if self.made.get(n) is None or self.made[n].spec.family not in CARRIED]
        if not ends or not all(self._grown_from_one(n) or self._cut_from_unnamed(n, pins)
                               or self._filled(n) for n in ends):
            self.pins, self.seen = pins, seen

    def _filled(self, node: int) -> bool:
        """Is ``node`` a buffer whose values the walk reached through the writes that filled it (DeepSeek's
        ``key = k_pass.new_empty(...)`` written slice by slice)? Its axes are what was written there."""
        return node in self.writers or node in self.slices

    def _cut_from_unnamed(self, node: int, before: dict) -> bool:
        """Is ``node`` a view whose newly named axis is a piece cut from unnamed features (DeepSeek's
        ``kv_b_proj(latent).view(B, T, H, nope + v)``, its width no name has)? There the walk ends as it
        does where neither operand's heads are named: the view that split the projection. A whole unnamed
        axis (a gather's) or a fold the names lost (a mix) is no such piece."""
        record = self.made.get(node)
        if record is None or record.spec.family is not Family.RESHAPE:
            return False
        mine = before.get(node) or self.found.get(node) or self.inference.axes.get(node) or ()
        p = next((i for i, a in enumerate(self.pins[node]) if i < len(mine) and a != mine[i]), None)
        return p is not None and bool(mine[p].atoms) and all(
            a.root == ax.UNKNOWN and a.size < a.root_size for a in mine[p].atoms)

    def _grown_from_one(self, node: int) -> bool:
        """Is ``node`` an ``expand`` whose newly named axis was one entry (or new) in its operand?"""
        record = self.made.get(node)
        if record is None or record.spec.family is not Family.EXPAND or not record.ins:
            return False
        mine = self.found.get(node) or self.inference.axes.get(node) or ()
        theirs = self.inference.capture.nodes[record.ins[0]].shape
        p = next((i for i, a in enumerate(self.pins[node]) if i >= len(mine) or a != mine[i]), None)
        if p is None:
            return False
        q = p - (len(self.pins[node]) - len(theirs))
        return q < 0 or theirs[q] == 1

    def _through_broadcast(self, record, p: int, ndim: int, whole_moves: bool) -> None:
        """Axis ``p`` of an elementwise result of several tensors is that axis of each operand broadcasting lines
        up whole there (LayoutLMv3's ``rel_pos_x + rel_pos_y``: both carry the heads), not of the first alone."""
        nodes = self.inference.capture.nodes
        for operand, q in ((n, p - ndim + len(nodes[n].shape)) for n in record.ins if isinstance(n, int)):
            if q >= 0 and nodes[operand].shape[q] == self.axis.size:
                self.back(operand, q, whole_moves)

    def _through_join(self, record, p: int, ndim: int) -> None:
        """``cat(parts, dim)``: an axis other than ``dim`` is the same axis in every part of that rank
        (``cat((q_pass, q_rot), dim=-1)``: each part's heads are the result's heads)."""
        args, kwargs = thaw_args(record.frozen)
        dim = arg(args, kwargs, 1, "dim", 0)
        if not isinstance(dim, int) or p == dim % ndim:
            return
        for part in dict.fromkeys(record.ins):
            if len(self.axes(part)) == ndim:
                self.back(part, p)

    def _through_write(self, record, p: int, ndim: int) -> None:
        value = record.ins[-1]
        lined = write_lines(record, ndim, len(self.axes(value)))
        if p in lined and lined[p][1]:
            self.back(value, lined[p][0])

    def _through_slice(self, record, p: int, ndim: int) -> None:
        """``buffer[index]`` written into (``key[..., :nope].copy_(k_pass)``): an axis of the buffer the
        index keeps whole is the same axis of the view, and so of what is written into it."""
        view = record.outs[0]
        args, _ = thaw_args(record.frozen)
        lined = written_axes(args[1] if len(args) > 1 else None, ndim, len(self.axes(view)))
        if p in lined and lined[p][1]:
            self.back(view, lined[p][0])

    def folded_bias_heads(self, record) -> list[tuple[int, int]]:
        """A bias added to scores whose batch and heads are folded into one axis (Bloom's ALiBi:
        ``alibi.baddbmm(q, k)`` with ``alibi = (slopes[..., None] * positions).reshape(batch_size * num_heads,
        1, T)`` of ``[B, ?, T]``): broadcasting lines the bias's folded axis up with the scores' ``B·H``. Where
        the reshape that made it folded the same axes in the same order, each named as the scores' piece is
        and one unnamed with the heads' entries, that one is the heads (``B·? = B·H`` solved for ``?``).
        Returns ``(node, axis)`` of the unnamed axis before the fold."""
        namer, axes_of = self.inference.namer, self.axes
        if record.spec.operands is baddbmm_operands and len(record.ins) == 3:
            scores, biases = axes_of(record.outs[0]), record.ins[2:]
        else:
            ranked = [n for n in dict.fromkeys(record.ins) if len(axes_of(n)) >= 3 and _is_scores(namer, axes_of(n))]
            if len(ranked) != 1:
                return []
            scores, biases = axes_of(ranked[0]), [n for n in record.ins if n != ranked[0]]
        if len(scores) < 3 or not _is_scores(namer, scores):
            return []
        found = []
        for i, fold in enumerate(scores):
            if len(fold.atoms) < 2 or 1 in (a.size for a in fold.atoms) or self._pieces(fold).count(HEADS) != 1:
                continue   # (a fold of one piece, a batch of one: the order of the pieces is not exercised)
            for node in biases:
                hit = self._unfolded_heads(node, i - len(scores), fold)
                if hit is not None:
                    found.append(hit)
        return found

    def _unfolded_heads(self, node: int, back: int, fold: Axis) -> tuple[int, int] | None:
        """``(the reshape's input, its axis)`` that is the heads of ``fold`` in the bias ``node``, or None."""
        bias, record = self.axes(node), self.made.get(node)
        if len(bias) < -back or bias[back].size != fold.size or self.inference.namer.label(bias[back]) is not None \
                or record is None or not (record.spec.family is Family.RESHAPE or record.spec.repeats) \
                or len(record.ins) != 1:
            return None
        pieces = self._sources(record, node, back % len(bias))
        source = self.axes(record.ins[0])
        if pieces is None or len(pieces) != len(fold.atoms):
            return None
        heads = None
        for i, atom, piece in zip(pieces, fold.atoms, self._pieces(fold)):
            if i is None:   # (copies: the same values at every entry of the piece, which lines up with any)
                continue
            label = self.inference.namer.label(source[i])
            if source[i].size != atom.size or piece is None:
                return None
            if piece == HEADS and label is None:
                heads = i
            elif label != piece:
                return None
        return (record.ins[0], heads) if heads is not None else None

    def _pieces(self, fold: Axis) -> list[str | None]:
        """The name of each piece of a folded axis, major first (``B·H`` -> ``["B", "H"]``)."""
        return [self.inference.namer.label(Axis((atom,))) for atom in fold.atoms]

    def _sources(self, record, node: int, p: int) -> list[int | None] | None:
        """The operand axes folded, major first, into axis ``p`` of ``node`` (each whole; None for a piece of
        copies, ``repeat``'s), or None."""
        atoms = self._marked(record, node, p)
        if atoms is None or not all(a.root == ax.COPIES or a.whole and a.root.startswith("#0.") for a in atoms):
            return None
        return [None if a.root == ax.COPIES else int(a.root[3:]) for a in atoms]

    def _marked(self, record, node: int, p: int):
        """The atoms of axis ``p`` of ``node`` when the op runs on markers (``#k.i``: operand k's axis i)."""
        ins_axes = [self.axes(n) for n in record.ins]
        markers = [tuple(ax.root_axis(f"#{k}.{i}", a.size) for i, a in enumerate(axes))
                   for k, axes in enumerate(ins_axes)]
        shapes = [tuple(self.inference.capture.nodes[n].shape) for n in record.outs]
        args, kwargs = thaw_args(record.frozen)
        if record.spec.names is None:
            return None
        call = Call(record.spec.name, args, kwargs, [None] * len(markers), markers, shapes, self.inference.namer,
                    getattr(record, "params", None) or {})
        try:
            out = record.spec.names(call)
        except (IndexError, KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError):
            return None
        outs = out if isinstance(out, list) else [out]
        k = record.outs.index(node)
        if k >= len(outs) or outs[k] is None or p >= len(outs[k]):
            return None
        return outs[k][p].atoms

    def through_op(self, record, node: int, p: int, whole_moves: bool = False) -> None:
        """Which operand axis became axis ``p`` of ``node``: each operand's axes are replaced by
        markers (unnamed roots of their own), the op's name rule is run on them, and the marker found
        whole at ``p`` says."""

        ins_axes = [self.axes(n) for n in record.ins]
        markers = [tuple(ax.root_axis(f"#{k}.{i}", a.size) for i, a in enumerate(axes))
                   for k, axes in enumerate(ins_axes)]
        shapes = [tuple(self.inference.capture.nodes[n].shape) for n in record.outs]
        args, kwargs = thaw_args(record.frozen)
        spec = record.spec
        if spec.names is None:
            return
        call = Call(spec.name, args, kwargs, [None] * len(markers), markers, shapes, self.inference.namer,
                    getattr(record, "params", None) or {})
        try:
            out = spec.names(call)
        except (IndexError, KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError):
            return
        outs = out if isinstance(out, list) else [out]
        k = record.outs.index(node)
        if k >= len(outs) or outs[k] is None or p >= len(outs[k]):
            return
        atoms = outs[k][p].atoms
        if len(atoms) != 1 or not atoms[0].whole or not atoms[0].root.startswith("#"):
            return
        operand, _, i = atoms[0].root[1:].partition(".")
        if not (operand.isdigit() and i.isdigit()):
            return   # a part of the operand's axis (``#0.2[0:8]``, a slice): not the same axis
        self.back(record.ins[int(operand)], int(i), whole_moves)
