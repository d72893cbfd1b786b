"""Seeds: names for a tensor that enters the traced code, from the declared sizes.

Reads: the capture's node facts (shape, parameter or not), the declared sizes and their order.
Adds: ``state.axes`` of each entered node, ``state.sequences`` (which token tensor is ``T``, which
``S``), ``state.ambiguous`` (a shape that fits more than one seed), ``state.size_choices`` (the declared names of
equal size a seed chose between), ``state.seeded_by_size`` and
``state.seeded`` (which nodes were named so). Where ``state.readings`` pins another fitting seed for an
entered node (:mod:`shapetrace.engine.readings`: a finding checked under every reading of equal sizes),
that seed names it instead of the first that fits.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from shapetrace.engine import axes as ax
from shapetrace.engine.axes import Axis
from shapetrace.engine.axis_compute import taken_width
from shapetrace.engine.vocabulary import INPUT_FEATURES

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.infer.state import Inference


def seed(state: Inference, node: int, facts) -> tuple[Axis, ...] | None:
    """Names for a tensor that enters the traced code (an input, not a parameter, not made here).

    Its shape is matched against the declared sizes: ``[B, T, D]``, ``[B, T]`` (token ids),
    ``[B, H, T, d_k]``, a feature map ``[B, D, Hp, Wp]`` where its grid is declared... The first token
    tensor to enter is ``T``; with ``S`` declared, a
    second, different one is ``S`` (cross-attention), even when the two lengths are equal.
    """
    shape = facts.shape
    if len(shape) < 1 or facts.parameter or not state.dims:
        return None
    seq = sequence_name(state, node, shape)
    fitting = batch_seed(state, node, shape) if len(shape) == 1 else \
        fitting_seeds(state, shape, seq) or own_width_seed(state, shape, seq)
    if facts.held:
        fitting = held_seeds(fitting, seq)
    if not fitting:
        return None
    names = fitting[0]
    state.size_choices.update(equal_size_choices(state, fitting))
    if len(fitting) > 1:
        state.ambiguous[node] = node   # [4, 4] at B = T = 4: [B, T] or [T, B]; a later use may decide
        chosen = state.readings.get(node)
        names = list(chosen) if chosen is not None and list(chosen) in fitting else names
    axes = tuple(ax.Axis() if n == "1" else ax.unknown_axis(s) if n == WIDTH else ax.root_axis(n, s)
                 for n, s in zip(names, shape))
    axes = state.interned.setdefault(axes, axes)
    state.axes[node] = axes
    if "T" in names or "S" in names:
        state.sequences.setdefault(node, "S" if "S" in names else "T")
    state.seeded_by_size = True
    state.seeded.add(node)
    return axes


def built_argument(state: Inference, node: int, found: tuple[Axis, ...]) -> tuple[Axis, ...]:
    """A tensor argument of the model's first outermost call that the script built before the call (``shapetrace
    trace FILE`` records the file's own ``build()``: fairseq's ``arange(T)[None, :] >= lengths[:, None]`` padding
    mask), read for the first time inside the call with no axis named, or named in part by the one seed that fits
    (BART's causal triangle plus a padding part): seeded as it would be had it entered whole (the model takes it as
    its input, as it does when built outside the trace). ``found`` otherwise."""
    first = state.capture.module_calls.first_call
    if first is None or state.index < first.start or node in state.seeded \
            or not any(argument.node == node for argument in first.arguments):
        return found
    labels = [None if axis.atoms and all(a.root == ax.COPIES for a in axis.atoms) else state.namer.label(axis)
              for axis in found]   # (copies of one entry, flux's ids.repeat(B, 1, 1): the same for any name)
    if all(label is not None or axis.size == 1 for label, axis in zip(labels, found)):
        return found   # (named whole: by its makers, or by shapetrace.name)
    if any(label is not None for label in labels):   # (BART's mask: a [T, T] triangle plus a named [B, 1, 1, T] part)
        shape = state.capture.nodes[node].shape
        fitting = fitting_seeds(state, shape, sequence_name(state, node, shape))
        if len(fitting) != 1 or any(label is not None and label != name for label, name in zip(labels, fitting[0])):
            return found
    return seed(state, node, state.capture.nodes[node]) or found


def held_seeds(fitting: list[list[str]], seq: str) -> list[list[str]]:
    """The seeds of a tensor a running module holds (a buffer: a causal triangle ``[block_size, block_size]``, a
    table), which the readings of equal sizes never try (:func:`.readings.ambiguous_inputs`): where one fitting
    seed has no batch axis, the seeds with one are dropped (at B = T = 4 a ``[4, 4]`` buffer read ``[B, T]`` gave a
    false broadcast-mismatch against the scores it masks); and a seed that only ever stands beside others (a
    square ``[T, T]``) names nothing alone. A cache the module holds per batch entry (Meta's Llama ``cache_k``,
    ``[max_batch, max_seq, H, d_k]``) fits no seed without its batch axis and keeps its seeds."""
    batch_free = [names for names in fitting if "B" not in names]
    if not batch_free or len(batch_free) == len(fitting):
        return fitting
    return [] if all(names in _only_another_reading(seq) for names in batch_free) else batch_free


def batch_seed(state: Inference, node: int, shape: tuple[int, ...]) -> list[list[str]]:
    """``[B]`` for a tensor of one axis as long as the batch given to the model's first outermost call beside its
    input, one value per batch entry (a diffusion timestep, a sequence's length), where no other declared name
    has that size (at B = H a ``[4]`` is a batch's steps or a head's scales: the sizes cannot say) and the batch
    has more than one entry. Not a tensor the code makes (Griffin's ``arange(half)`` of a rotary, at half = B), nor
    the cumulative lengths of sequences packed in a row (:func:`.unread.token_offsets`: OLMo-core's ``cu_doc_lens`` of
    two documents is 3 long, and at a batch of 3 the sizes alone would call it ``[B]``)."""
    sizes = [size for name, size in state.namer.dims.items() if state.namer.role(name) is not None]
    batch, first = _size(state, "B"), state.capture.module_calls.first_call
    if batch is None or batch < 2 or shape != (batch,) or sizes.count(batch) != 1 or first is None:
        return []
    return [["B"]] if any(argument.node == node and not argument.offsets for argument in first.arguments) else []


def own_width_seed(state: Inference, shape: tuple[int, ...], seq: str) -> list[list[str]]:
    """``[B, T, F_in]`` for a tensor that enters as a batch of token sequences of features of a width no
    declared or derived name has (a trajectory's states ``[B, T, 3]``, a series' variates, a table's fields):
    the input's own features (:data:`~.vocabulary.INPUT_FEATURES`), which a module's projection then reads as
    a patch embedding's steps are read (:func:`.axis_compute.linear_axes`). Batch then tokens, in that order,
    each at a size no other declared name has (at B = H, which axis is the batch sizes cannot say). A width of
    one entry (a return-to-go per step, or a flag, a mask's broadcast axis) is ``[B, T, 1]``: its last axis has
    no name (nothing says it is features). Channels first, as torch's ``Conv1d`` takes a sequence, ``[B, F_in, T]``
    (Stable Audio's latents ``[B, 8, T]``), where the tokens are the last axis. Tried only where no declared seed
    fits: a width that is a declared size (or a derived name's) is that name's or none."""
    if len(shape) != 3 or shape[-1] < 1:
        return []
    sizes = [size for name, size in state.namer.dims.items() if state.namer.role(name) is not None]
    own = [n for n in (["B", seq, INPUT_FEATURES], ["B", INPUT_FEATURES, seq])   # (channels last, or first)
           if all(size > 1 and _size(state, name) == size and sizes.count(size) == 1
                  for name, size in zip(n, shape) if name != INPUT_FEATURES)]
    if [n for n in own if n[-1] == INPUT_FEATURES] and shape[-1] == 1:
        return [["B", seq, "1"]]
    width = shape[own[0].index(INPUT_FEATURES)] if len(own) == 1 else 0
    return [] if width <= 1 or taken_width(state.namer, width) else own


def note_entries(state: Inference, ins, outs) -> None:
    """``outs`` noted as made from entered data alone where every input is such data and named by no seed:
    an argument of the model's call that fits no declared shape (Bark's coarse ids ``(B, T_c)``), or computed
    from such arguments only (``coarse + SEMANTIC_VOCAB``). A loop, not ``all()`` over a generator."""
    made = state.from_entries
    for n in ins:
        if n not in made and not _came_in(state, n):
            return
    made.update(n for n in outs if n not in ins)


def _came_in(state: Inference, node: int) -> bool:
    """Is ``node`` a tensor argument of the model's first outermost call that entered the traced code whole and
    no seed named (Bark's ``semantic`` and ``coarse``)? Not a tensor the code made before or inside the call
    (a rotary table's ``arange``, positions expanded over the batch), nor a parameter or a buffer."""
    first = state.capture.module_calls.first_call
    if first is None or node in state.seeded or not state.capture.nodes[node].entered:
        return False
    return any(argument.node == node for argument in first.arguments)


def joined_entries(state: Inference, record, in_axes, out_axes: list, params) -> list:
    """A ``cat`` of parts made from entered data alone, joined along an axis no part names (no part fits a
    declared shape), is the tensor that enters, assembled: seeded as one (:func:`seed`) where its shape fits,
    as it would be had it entered whole, and where the seed keeps every name the join already has. Bark's coarse
    model joins its semantic history ``(B, T_s)`` and its coarse ids ``(B, T_c)`` into the ``(B, T)`` it embeds.
    A part made from a parameter, or computed by the model from a named tensor, keeps the join to its own rules."""
    if len(record.outs) != 1 or len(in_axes) < 2 or not out_axes or not out_axes[0]:
        return out_axes
    joined, dim = out_axes[0], (params or {}).get("dim", 0)
    if not isinstance(dim, int) or not -len(joined) <= dim < len(joined):
        return out_axes
    made, nodes, label = state.from_entries, state.capture.nodes, state.namer.label
    for n, axes in zip(record.ins, in_axes):
        if n not in made and not _came_in(state, n) or len(axes) != len(joined) or label(axes[dim]) is not None:
            return out_axes
    if label(joined[dim]) is not None:
        return out_axes
    seeded = seed(state, record.outs[0], nodes[record.outs[0]])
    if seeded is None or any(label(a) is not None and label(a) != label(s) for a, s in zip(joined, seeded)):
        return out_axes
    return [seeded]


def equal_size_choices(state: Inference, fitting: list[list[str]]) -> set[tuple[str, str]]:
    """The pairs of declared names of equal size that naming by one of ``fitting`` chose between:
    where two fitting seeds put different names of equal size on one axis (``[B, T]`` or ``[T, B]`` of
    ``[4, 4]`` at B = T = 4), and ``(T, S)`` for a sequence at S = T (which one entered is a guess).
    A seed that fits alone chose nothing, whatever other sizes are equal (B = H_kv = 2 for ``[B, T, D]``)."""
    coinciding = state.namer.coinciding_sizes()
    chosen = {(a, b) for a, b in coinciding if "T" in (a, b) and "S" in (a, b)
              and any(n in ("T", "S") for n in fitting[0])}
    for other in fitting[1:]:
        differ = {frozenset((a, b)) for a, b in zip(fitting[0], other) if a != b}
        chosen.update((a, b) for a, b in coinciding if frozenset((a, b)) in differ)
    return chosen


def sequence_name(state: Inference, node: int, shape: tuple[int, ...]) -> str:
    """``T`` for the first sequence to enter; ``S`` for a second one when ``S`` is declared."""
    if node in state.sequences:
        return state.sequences[node]
    if "S" in state.dims and "T" in state.sequences.values():
        return "S" if state.dims["S"] in shape else "T"
    if "T" not in state.dims or (state.dims["T"] not in shape and "S" in state.dims):
        return "S"
    return "T"


def fitting_seeds(state: Inference, shape: tuple[int, ...], seq: str) -> list[list[str]]:
    """Every seed that fits ``shape``, the first-preferred first (``[B, T, D]`` before ``[T, B, D]``)."""
    found: list[list[str]] = []
    names = seed_names(state, shape, seq)
    while names is not None:
        found.append(names)
        names = seed_names(state, shape, seq, skip=found)
    # A square of the sequence's length (a causal triangle, a bias table or an index of literal sizes) is
    # named by no size alone; but where B = T makes it fit [B, T] too, a finding must also hold were it
    # [T, T] (BART's triangle at B = T = 4 read [B, T] gave a false broadcast-mismatch). So is a pair
    # representation, a token by token grid of features [B, T, T, D] (OpenFold's triangle attention, the
    # Crossformer's [B, variates, segments, D]): where B = T = H makes it fit [B, H, T, D] or [B, T, H, D]
    # too, a finding must also hold were it that grid.
    return [] if all(names in _only_another_reading(seq) for names in found) else found


#: a seed's axis of any width but the model's, left unnamed (a pair representation's own width, OpenFold's c_z)
WIDTH = "*"


def _only_another_reading(seq: str) -> list[list[str]]:
    """Seeds that never name a tensor alone, only stand beside others as another reading of equal sizes."""
    return [[seq, seq], ["B", seq, seq, "D"], ["B", seq, seq, WIDTH], [seq, "N", "B"], [seq, "N", "B", "D"]]


def seed_names(state: Inference, shape: tuple[int, ...], seq: str,
               skip: list[list[str]] | None = None) -> list[str] | None:
    declared = state.seed_order[:len(shape)]   # the declared order, with this tensor's sequence name
    other = "S" if seq == "T" else "T"
    patterns = [[seq if n == other and seq not in declared else n for n in declared]]
    leads = (["B", seq], ["B", "H", seq], ["B", "H_kv", seq], ["B", seq, "H"], ["B", seq, "H_kv"], [seq, "B"])
    patterns += [["B", seq, seq], ["B", "H", seq, seq]]   # masks and scores: a token axis twice
    own = [[n] for n, role in state.namer.declared_roles.items() if role == "features"]   # (``C:features=24``)
    for lead in leads:   # batch-first before seq-first: [T, B, D] is named only where [B, T, D] does not fit
        for tail in ([], ["D"], ["d_k"], ["D_kv"], ["3*D"], ["2*D"], ["H*d_k"], *own):
            patterns.append(lead + tail)
    patterns.append([seq, seq])   # a square [T, T]: only ever another reading (:func:`fitting_seeds`)
    patterns.append(["B", seq, seq, "D"])   # a pair representation [B, T, T, D]: the same
    patterns.append(["B", seq, seq, WIDTH])   # ... of its own width (OpenFold's c_z), left unnamed: the same
    patterns += [["B", "1", seq, seq], ["B", "1", "1", seq]]   # transformers' 4-D masks, [B, 1, T, T] and [B, 1, 1, T]
    patterns.append(["B", "D", seq])   # a sequence channels first, as torch's Conv1d takes it (tortoise's [B, C, T])
    patterns.append(["B", "1", "D"])   # one token's features (a decoding step's input): the token axis has one entry
    patterns.append(["1", "B", "D"])   # the same step fed sequence-first (ChatGLM's and fairseq's [T, B, D] at T = 1)
    if [s for n, s in state.dims.items() if state.namer.role(n) is not None].count(_size(state, "B")) == 1:
        patterns.append(["1", "B"])   # its token ids, sequence-first (not at B = T: positions [1, T] fit too)
        patterns.append(["B", "1"])   # ... and batch-first, as ``generate`` feeds the next ids (not at B = T either)
    if "N" in state.dims and seq != "N":
        patterns += [["B", "N", seq], ["B", "N", seq, "D"]]   # a batch of sets of sequences (ids, or features)
        patterns += [[seq, "N", "B"], [seq, "N", "B", "D"]]   # (only another reading of them at B = T)
    # (NRMS's clicked titles [B, N, T], the Crossformer's variates of segments [B, N, T, D]: each of the N a
    # sequence of its own, wherever N stands among the declared names; at B = T which end is the batch sizes
    # cannot say, so the batch last stands beside them as another reading, never a seed alone)
    grids = [grid for grid in (["Hp", "Wp"], ["Fp", "Hp", "Wp"]) if all(g in state.dims for g in grid)]
    patterns += [["B", "D", *grid] for grid in grids] + [["B", *grid, "D"] for grid in grids]
    if _size(state, "B") != 1:   # (at B = 1 the batch's own map is that map)
        patterns += [["1", "D", *grid] for grid in grids] + [["1", *grid, "D"] for grid in grids]
    # (one map for every batch entry, as SAM's ``image_pe`` [1, D, Hp, Wp] enters before it is repeated over
    # the batch: its leading axis has one entry and no name)
    # (a feature map, channels first as torch's convolutions make it, [B, D, Hp, Wp], or last as Swin's windows
    # and Video Swin's clips read it, [B, Hp, Wp, D] and [B, Fp, Hp, Wp, D]: its grid declared)
    flat = ["*".join(grid) for grid in grids if _size(state, "*".join(grid)) != state.dims.get(seq)] \
        + (["N"] if "N" in state.dims else [])
    patterns += [["B", f, "D"] for f in flat] + [[f, "B", "D"] for f in flat]
    # (a grid as many as the sequence's tokens is those tokens, PVT's [B, T, D] at T = Hp·Wp: no second reading)
    # (the same map flattened into its tokens, batch-first or sequence-first as nn.MultiheadAttention takes a
    # DETR or Mask2Former memory ``src.flatten(2).permute(2, 0, 1)``, [Hp*Wp, B, D]: its grid declared; and N
    # tokens declared, the one-axis grid, wherever N stands among the declared names: DETR's object queries
    # [B, N, D] beside a memory S declared after N)
    for names in patterns:
        if skip and names in skip:
            continue
        if len(names) == len(shape) and all(_size(state, n) == s or n == WIDTH and s != _size(state, "D")
                                            for n, s in zip(names, shape)):
            named = [n for n in names if n not in ("1", WIDTH)]
            if len(set(named)) == len(named) or named.count(seq) == 2 and len(set(named)) == len(named) - 1:
                return names
    return None


def _size(state: Inference, name: str) -> int | None:
    """A seed name's size: ``"1"`` is an axis of one entry (a mask's broadcast axis)."""
    if name == "1":
        return 1
    if name in _FLAT_GRIDS:   # (a flattened grid, Hp*Wp)
        sizes = [state.namer.size_of(n) for n in name.split("*")]
        return None if None in sizes else math.prod(sizes)   # type: ignore[arg-type]
    return state.namer.size_of(name)


_FLAT_GRIDS = frozenset({"Hp*Wp", "Fp*Hp*Wp"})
