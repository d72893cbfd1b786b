"""Axis names through compute ops: ``linear``, convolutions, products, ``einsum``, attention kernels.
Pure Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shapetrace.engine.axes import (
    COPIES,
    GRID_ROOTS,
    MIXED_PREFIX,
    UNKNOWN,
    Atom,
    Axis,
    base_names,
    coalesce,
    cut_from,
    patch_steps,
    root_axis,
    sizes_of,
    unknown_axes,
    unknown_axis,
)
from shapetrace.engine.vocabulary import FEATURE_WIDTHS, INPUT_FEATURES, OWN_WIDTHS, PROJECTED, Role

#: the heads merged back where a head's width is set apart from D / H (Gemma's ``o_proj`` input)
MERGED_HEADS = "H*d_k"

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.namer import Namer


# ---------------------------------------------------------------------------
# compute ops
# ---------------------------------------------------------------------------

def broadcast_axes(inputs: Sequence[Sequence[Axis]], out_shape: Sequence[int]) -> tuple[Axis, ...]:
    """Elementwise ops: each output axis takes its name from an input that is not broadcast there (and
    its role, query or key, from any input whose same axis has one: ``position_bias + scores``)."""
    out = []
    n = len(out_shape)
    for j, size in enumerate(out_shape):
        chosen = None
        for axes in inputs:
            k = j - (n - len(axes))
            if 0 <= k < len(axes) and axes[k].size == size and (size == 1 or axes[k].atoms):
                varies = size > 1 and not _copies(axes[k])   # (copies never replace an axis whose values vary)
                if axes[k].atoms and (chosen is None or _adds_a_role(chosen, axes[k])
                                      or _is_unknown(chosen) and (varies or size == 1)
                                      or varies and _copies(chosen)):
                    chosen = axes[k]
        if chosen is not None and size > 1 and _projected_met(inputs, n, j, chosen):
            chosen = None
        if chosen is None and size == 1:   # a decode step's one query keeps its role through the scale and mask
            chosen = next((a for axes in inputs for k in [j - (n - len(axes))]
                           if 0 <= k < len(axes) and (a := axes[k]).size == 1 and a.role and not a.atoms), None)
        out.append(chosen if chosen is not None else unknown_axis(size))
    return tuple(out)


def _projected_met(inputs: Sequence[Sequence[Axis]], n: int, j: int, chosen: Axis) -> bool:
    """Does broadcasting line a projection's own width (``F``: :func:`projected_width`, a name with no
    role) up with an axis named otherwise at output axis ``j`` (angles computed from the data, ``cat((theta,
    theta))``, against a head's features ``d_k``)? No rule can judge that pairing, so the result's axis is
    not named by either: what follows is not checked."""
    met = [axes[j - (n - len(axes))] for axes in inputs if 0 <= j - (n - len(axes)) < len(axes)]
    met = [a for a in met if a.size > 1 and a.atoms and not _is_unknown(a)]
    return any(a.atoms != chosen.atoms for a in met) and not _pieces_of_projections(met) and any(
        n in OWN_WIDTHS for a in met for atom in a.atoms for n in base_names(atom.root))


def _pieces_of_projections(met: Sequence[Axis]) -> bool:
    """Are the axes broadcasting lines up all pieces of projections' own widths (Mamba's gate ``F[0:128]``
    times its conv branch ``F[128:256]``, two cuts of one ``in_proj``'s output; a gated unit's value and gate
    halves)? Feature i of one meets feature i of the other as the weights' rows were laid out, and any order
    of those rows is another weight: the pairing is the code's own, and no layout slip can spoil it. An input's
    own width (``F_in``: the data's features) or a declared name among them is judged as before."""
    bases = set()
    for axis in met:
        if len(axis.atoms) != 1:
            return False
        cut = cut_from(axis.atoms[0].root)
        bases.add(cut[0] if cut else axis.atoms[0].root)
    return bases == {PROJECTED}


def _adds_a_role(chosen: Axis, other: Axis) -> bool:
    """Is ``other`` the same axis as ``chosen`` with the role ``chosen`` lacks?"""
    return chosen.role is None and other.role is not None and other.atoms == chosen.atoms


def _copies(axis: Axis) -> bool:
    """Copies alone (``repeat``'s or ``expand``'s copy index: one value along the axis). Met by an axis whose values
    vary (NEZHA's ``range_mat - range_mat.t()``: copies of positions minus positions), the result varies too: it is
    that axis, not copies."""
    return bool(axis.atoms) and all(a.root == COPIES for a in axis.atoms)


def _is_unknown(axis: Axis) -> bool:
    return any(a.root == UNKNOWN for a in axis.atoms)


def linear_axes(axes: Sequence[Axis], out_features: int, namer: Namer,
                structural: bool = True) -> tuple[Axis, ...]:
    """``linear`` keeps the leading axes and names the new feature axis by what the weight does to
    the input's features: the same width (``D``), three or two times it (fused ``3*D``/``2*D``),
    or ``H*d_k`` when heads are narrower than the model. An input's own features (``F_in``: a width no
    declared name has, :mod:`.infer.seeds`) are read as a patch embedding's steps are: the width made is
    named by its size alone where that is a projection's (``D``), else ``F``, never ``F_in`` again (the
    input's features are not what the weight makes of them). An input whose features are unnamed, or a
    weight that is not a module's parameter, gives unnamed features."""
    last_in = axes[-1] if axes else Axis()
    source = _features_label(last_in, namer)
    if source is None and axes and patch_steps(axes, len(axes) - 1, namer):
        source = PATCH_STEPS   # (a patch embedding makes the model's features, as a conv stem does)
    if source is None and last_in.size == 1 and not last_in.atoms:
        source = ONE_NUMBER    # (one number per position, its only feature: a return-to-go's embedding)
    if not structural or source is None:
        return tuple(axes[:-1]) + (unknown_axis(out_features),)
    root = namer.feature_root_for_size(out_features)
    if root is None and out_features == last_in.size and not namer.width_clashes(out_features) \
            and source not in _NEW_WIDTHS:
        root = source
    if root is None and source == MERGED_HEADS and namer.width_clashes(out_features):
        root = "D"   # the merged heads projected back to the model's width (o_proj), never keys or values
    last = root_axis(root, out_features) if root else projected_width(namer, out_features)
    if source == PATCH_STEPS:   # (each patch read whole: the patches ``T/P`` are the sequence from here on)
        axes = [_patches(a, last_in, namer) for a in axes]
    return tuple(axes[:-1]) + (last,)


def _patches(axis: Axis, steps: Axis, namer: Namer) -> Axis:
    """The patches axis (``T/P``, the outer piece beside the steps ``T%P`` a patch embedding reads) as a whole
    token axis of its own: its entries are whole patches once their steps are read as features."""
    (step,) = steps.atoms
    if len(axis.atoms) != 1 or axis.atoms[0].root != step.root or axis.atoms[0].stride != step.size:
        return axis
    label = namer.label(axis)
    return Axis((Atom(label, axis.size, 1, axis.size),), axis.role) if label else axis


#: what :func:`linear_axes` reads a patch embedding's input as (:func:`.axes.patch_steps`): features of no name
PATCH_STEPS = "patch steps"
#: what :func:`linear_axes` reads a slice of a width of no declared name as (``F_in[2:14]``: Pix2Struct's patches
#: after their row and column ids): features still, of no name of their own
SLICED_WIDTH = "a slice of a width of its own"
#: what :func:`linear_axes` reads an axis of one entry with no name as (``[B, T, 1]``): a weight's one column
ONE_NUMBER = "one number"
#: features a projection's output never takes the name of, at any width: it makes a width of its own
_NEW_WIDTHS = (PATCH_STEPS, INPUT_FEATURES, SLICED_WIDTH, ONE_NUMBER)


def projected_width(namer: Namer, width: int) -> Axis:
    """The new axis of a module's projection (or embedding table) that no name fits: ``F``, the features
    it made, where no declared or derived name has that size (else unnamed: which of two names of one
    size it is, sizes cannot say). Any order of a weight's rows is another weight, so what the axis holds
    is proven by where it came from; its size only rules names out. ``F`` declared at another size: unnamed."""
    if width == 1 or namer.size_of(PROJECTED) not in (None, width) or taken_width(namer, width, weight=True):
        return unknown_axis(width)
    return root_axis(PROJECTED, width)


def taken_width(namer: Namer, width: int, weight: bool = False) -> bool:
    """Is ``width`` the size of a declared or derived name (other than ``F``), a sum of them or a width a
    projection of features may have? Then a width of that size may be that name's: it is no width of its own.
    ``weight``: the width is a module's weight's rows, made before any batch was seen, so never a batch's name
    (ESIM's classifier ``Linear(D, 2)`` at B = 2 makes its own 2 classes)."""
    taken = {size for name, size in namer.dims.items()
             if name != PROJECTED and not (weight and namer.role(name) == Role.BATCH)} | set(namer.sum_sizes.values())
    return width in taken or any(namer.size_of(n) == width for n in (*namer.decompositions, *FEATURE_WIDTHS))


def _features_label(axis: Axis, namer: Namer) -> str | None:
    """The axis's label where it names features (what a projection's width is read off), else None: a
    width another projection made (``F``, role-less) is features to the next one (an MLP's second layer),
    and so is an input's own width (``F_in``) to the module that reads it, or a range of either
    (:data:`SLICED_WIDTH`)."""
    label = namer.label(axis) if axis.atoms else None
    if label is None:
        return None
    if namer.role(label.lstrip(MIXED_PREFIX)) == "features" or label in OWN_WIDTHS:
        return label
    cut = cut_from(label)
    return SLICED_WIDTH if cut is not None and cut[0] in OWN_WIDTHS else None




def conv_axes(axes: Sequence[Axis], out_shape: Sequence[int], namer: Namer,
              structural: bool = True, weight: Sequence[int] | None = None,
              tiles: Sequence[bool] = ()) -> tuple[Axis, ...]:
    """``conv1d/2d/3d``: ``[B, C_in, *positions]`` becomes ``[B, C_out, *positions']``.

    The batch axis is the input's (or ``B`` where the declared size fits); the channels are named
    like a projection's features (``D`` when the width is the model's), or keep the input's where the
    filter (``weight``, ``[C_out, C_in/groups, *kernel]``) is depthwise with one output per channel
    (``Conv2d(H, H, k, groups=H)``: channel i reads channel i alone); each output position axis keeps
    the input's name where the size is unchanged and either it is tokens (a same-padded conv over
    tokens) or the kernel is one wide along it (nothing is computed along it: Nystromformer's ``(k, 1)``
    kernel over ``[B, H, T, d_k]`` keeps ``d_k``); a named axis of another role that the kernel runs
    along gets no name; the rest is the patch grid (``Hp``, ``Wp``: a ViT stem; unnamed where those are
    declared with another size), which flattened in order is ``N``. A declared grid axis (``Hp``) whose
    windows tile it exactly (``tiles``) holds one entry per block of neighbours: its coarse piece (``Hp``
    reduced by 2 is ``Hp/2``, as pooling names it). An unbatched input, or a filter that is not a module's
    parameter, names positions and batch only."""
    spatial = len(out_shape) - 2
    roots = GRID_ROOTS.get(spatial)
    if roots is None or len(axes) != len(out_shape):
        return unknown_axes(tuple(out_shape))
    batch = axes[0] if namer.label(axes[0]) is not None else (
        root_axis("B", out_shape[0]) if namer.size_of("B") in (None, out_shape[0]) else unknown_axis(out_shape[0]))
    kernel = tuple(weight[2:]) if weight and len(weight) == len(out_shape) else (None,) * spatial
    channels = _conv_channels(axes[1], out_shape[1], namer, structural, weight)
    tiled = tuple(tiles) if len(tiles) == spatial else (False,) * spatial
    positions = [_coarse(src, size, extent, namer) if tile else None
                 for src, size, extent, tile in zip(axes[2:], out_shape[2:], kernel, tiled)]
    positions = [found or _conv_position(src, root, size, extent, namer)
                 for found, src, root, size, extent in zip(positions, axes[2:], roots, out_shape[2:], kernel)]
    return (batch, channels, *positions)


def _conv_channels(src: Axis, width: int, namer: Namer, structural: bool, weight: Sequence[int] | None) -> Axis:
    """A depthwise filter with one output per channel keeps the channels; else a projection's width."""
    if weight and len(weight) > 2 and weight[1] == 1 and weight[0] == src.size == width:
        return src
    feature = namer.feature_root_for_size(width) if structural else None
    if feature not in (None, "D") and _features_label(src, namer) is None:
        feature = None   # a fused width (3·D, 2·d_k) is read off projected features, never off pixels or audio
    return root_axis(feature, width) if feature else unknown_axis(width)


#: the roles of a split into heads: a conv that runs along one of them (a ``(1, k)`` filter over ``d_k``)
#: makes no grid of patches. An image's pixel axes named ``D`` at the declared sizes (8×8 pixels at D = 8:
#: lesson 10's stem) are a reading of sizes, not features, and still become ``Hp``, ``Wp``.
SPLIT_ROLES = frozenset({Role.HEADS, Role.HEAD_FEATURES})


_GRID_NAMES = frozenset(GRID_ROOTS[2] + GRID_ROOTS[3])   # (a plane or a clip; N, the one-axis grid, is tokens)


def _coarse(src: Axis, size: int, extent: int | None, namer: Namer) -> Axis | None:
    """The coarse piece of a named position axis of one piece cut into blocks of ``extent`` neighbours (a
    window tiling it: stride = kernel), or None."""
    atoms = coalesce(src.atoms)
    if not extent or extent == 1 or len(atoms) != 1 or atoms[0].size != size * extent \
            or namer.label(src) not in _GRID_NAMES:
        return None   # (a grid declared, or T read as one; pieces of N keep the conv's own naming: a new grid)
    a = atoms[0]
    return Axis((Atom(a.root, a.root_size, a.stride * extent, size),))


def _conv_position(src: Axis, root: str, size: int, extent: int | None, namer: Namer) -> Axis:
    label = namer.label(src)
    if label is not None and src.size == size and (extent == 1 or namer.is_token_root(src.atoms[0].root)):
        return src
    if label is not None and namer.role(src.atoms[0].root) in SPLIT_ROLES:
        return unknown_axis(size)                  # a conv along the heads or their features is no grid
    grid = namer.size_of(root) in (None, size)     # PVT's strided reduction of a declared Hp is not Hp
    return root_axis(root, size) if grid else unknown_axis(size)


def matmul_axes(a: Sequence[Axis], b: Sequence[Axis], out_shape: Sequence[int],
                namer: Namer) -> tuple[Axis, ...]:
    """``a @ b``: batch axes broadcast, ``a``'s rows and ``b``'s columns stay, the inner pair is contracted."""
    a2 = list(a) if len(a) > 1 else [Axis()] + list(a)
    b2 = list(b) if len(b) > 1 else list(b) + [Axis()]
    batch_len = len(out_shape) - (len(a) > 1) - (len(b) > 1)
    batch = broadcast_axes([a2[:-2], b2[:-2]], out_shape[:batch_len]) if batch_len else ()
    row, col = a2[-2], b2[-1]
    if _is_token(col, namer) and (_is_token(row, namer) or _one_query(row, a2[-1], namer)):
        row, col = row.with_role("query"), col.with_role("key")
    else:
        row, col = row.with_role(None), col.with_role(None)
    tail = ([row] if len(a) > 1 else []) + ([col] if len(b) > 1 else [])
    return tuple(batch) + tuple(tail)


def _one_query(row: Axis, inner: Axis, namer: Namer) -> bool:
    """A decode step's single query against its keys: an unnamed row of size 1 whose features, the
    contracted axis, are a head's (``[B, H, 1, d_k] @ [B, H, d_k, T+1]``): the row is the query axis."""
    label = namer.label(inner)
    return row.size == 1 and namer.label(row) is None and label is not None \
        and namer.role(label) == Role.HEAD_FEATURES


def _is_token(axis: Axis, namer: Namer) -> bool:
    label = namer.label(axis)
    return label is not None and namer.role(label) == "tokens"


def einsum_axes(parsed: dict, operands: Sequence[Sequence[Axis]], namer: Namer) -> tuple[Axis, ...] | None:
    """Names for ``einsum`` from its parsed subscripts (``{"inputs": [...], "output": ...}``)."""
    terms, rhs = parsed["inputs"], parsed["output"]
    if len(terms) != len(operands):
        return None
    by_letter: dict[str, tuple[int, Axis]] = {}
    for k, (term, axes) in enumerate(zip(terms, operands)):
        if len(term) != len(axes):
            return None
        for letter, axis in zip(term, axes):
            if letter not in by_letter or (by_letter[letter][1].size == 1 and axis.size != 1):
                by_letter[letter] = (k, axis)
    if any(c not in by_letter for c in rhs):
        return None
    out = [by_letter[c][1].with_role(None) for c in rhs]
    found = _query_and_key(terms, rhs, by_letter, namer) if len(rhs) >= 2 and len(operands) == 2 else []
    for i, role in found or _scores_kept(terms, operands, rhs):
        out[i] = out[i].with_role(role)
    return tuple(out)


def _scores_kept(terms: Sequence[str], operands: Sequence[Sequence[Axis]], rhs: str) -> list[tuple[int, str]]:
    """The query and key axes of an operand that are scores, where the output keeps both whole and no other
    operand has their letters (x-transformers' talking heads, ``einsum('b h i j, h k -> b k i j', dots, W)``:
    the heads mixed, the queries and keys as they were)."""
    for term, axes in zip(terms, operands):
        roles = {a.role: letter for letter, a in zip(term, axes) if a.role in ("query", "key")}
        if len(roles) != 2 or any(roles[r] in other for r in roles for other in terms if other is not term):
            continue
        if all(roles[r] in rhs for r in roles):
            return [(rhs.index(letter), role) for role, letter in roles.items()]
    return []


#: the role of the two token axes of scores whose operands' order and layout disagree on which are the keys
UNTOLD = "query-or-key"


def _query_and_key(terms: Sequence[str], rhs: str, by_letter: dict, namer: Namer) -> list[tuple[int, str]]:
    """The keys: the one token axis of the output that only the second operand has; the queries: the one
    other token axis the first operand has (``bhid,bhjd->bhij``; Transformer-XL's ``ibnd,jbnd->ijbn``;
    windows ``bhtd,bhtdw->bhtw``), wherever they sit in the output; nothing when either is not one.

    Neither role, but :data:`UNTOLD` on both, when the two token axes each come from one operand alone and
    the output puts the second operand's first: the operands' order says one reading and the scores' own
    layout (queries, then keys) the other. Keras's ``einsum("aecd,abcd->acbe", key, query)`` takes the keys
    first, and a port that wrote ``(query, key)`` computes the same layer with the two kernels relabelled."""
    tokens = [i for i, c in enumerate(rhs) if _is_token(by_letter[c][1], namer)]
    keys = [i for i in tokens if rhs[i] in terms[1] and rhs[i] not in terms[0]]
    queries = [i for i in tokens if rhs[i] in terms[0] and i not in keys]
    if len(keys) != 1 or len(queries) != 1:
        return []
    if keys[0] < queries[0] and rhs[queries[0]] not in terms[1]:
        return [(queries[0], UNTOLD), (keys[0], UNTOLD)]
    return [(queries[0], "query"), (keys[0], "key")]


def einsum_contracted(parsed: dict) -> list[str]:
    """Letters summed over: in an input, not in the output."""
    return [c for c in dict.fromkeys("".join(parsed["inputs"])) if c not in parsed["output"]]


def sdpa_axes(q: Sequence[Axis], v: Sequence[Axis], shape: Sequence[int]) -> tuple[Axis, ...]:
    """``scaled_dot_product_attention``: the queries' axes with the values' features."""
    out = tuple(a.with_role(None) for a in q[:-1]) + (v[-1],)
    return out if sizes_of(out) == tuple(shape) else unknown_axes(shape)
