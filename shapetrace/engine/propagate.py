"""How axis names flow through each op: the ``names`` functions of the op registry.

Every function takes one :class:`~shapetrace.engine.op_args.Call` (the op, its operands, their axes,
and torch's output shapes) and returns the axes of each output: one tuple, or a list of tuples
for ops with several outputs. The tracer checks every result against torch's shapes; a function
that cannot prove a name returns an unnamed axis (:func:`~shapetrace.engine.axes.unknown_axis`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from shapetrace.engine import axes as ax
from shapetrace.engine import axis_compute, axis_moves, axis_reshape
from shapetrace.engine.axes import Axis

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.op_args import Call

Axes = tuple[Axis, ...]


def _ints(values) -> list[int]:
    """``permute(0, 2, 1)``, ``permute((0, 2, 1))`` or ``permute(dims=[...])`` -> ``[0, 2, 1]``."""
    if len(values) == 1 and hasattr(values[0], "__len__"):
        values = values[0]
    return [int(v) for v in values]


def _rest(c: Call, name: str) -> list[int] | None:
    if len(c.args) > 1:
        return _ints(c.args[1:])
    value = c.kwargs.get(name)
    return _ints([value]) if value is not None else None


# -- identity and broadcasting ---------------------------------------------------------------

def same(c: Call) -> Axes:
    """Same shape, same meaning per axis (contiguous, softmax, norms, roll, flip, dropout)."""
    return tuple(c.in_axes[0])


def broadcast(c: Call) -> Axes:
    return axis_compute.broadcast_axes(c.in_axes, c.shapes[0])


def first_broadcast(c: Call) -> Axes:
    """``masked_fill``: the output is the first operand's shape (the mask only broadcasts into it); an axis
    the first operand leaves unnamed takes the name of the mask's axis lined up with it where the mask is not
    broadcast there (torch's ``_canonical_mask``: ``zeros_like(mask, dtype=float).masked_fill_(mask, -inf)``)."""
    return axis_compute.broadcast_axes(c.in_axes[:2], c.shapes[0])


def of_values(c: Call) -> Axes:
    """``torch.searchsorted(sorted_sequence, values)``: one slot index per value, so the result has the values'
    shape and their axes (OLMo-core's document ids of the tokens, ``searchsorted(cu_doc_lens, arange(T))``:
    ``T``); unnamed where the values are a number."""
    if len(c.in_axes) > 1 and len(c.in_axes[1]) == len(c.shapes[0]):
        return tuple(c.in_axes[1])
    return ax.unknown_axes(c.shapes[0])


# -- the view family -----------------------------------------------------------------------------

def reshape(c: Call) -> Axes:
    return _padding_cut(c.in_axes[0], axis_reshape.reshape_axes(c.in_axes[0], c.shapes[0], c.namer, _read_alone(c)),
                        c.namer)


def _padding_cut(src: Axes, out: Axes, namer) -> Axes:
    """A view that cuts tokens padded by a few entries (``T+1``, :func:`pad`) across rows: the skew that turns
    diagonals into columns (Transformer-XL's ``_rel_shift``, Longformer's ``_pad_and_transpose_last_two_dims``:
    ``[.., T+1, T]`` viewed ``[.., T, T+1]``) shifts each row by one more than the last, so the new axes hold
    relative offsets, not tokens: they are left unnamed (never a mix of tokens, never a name). Only a padded token
    axis next to another token axis (the queries' and keys' pair) counts: a pad beside anything else stays a mix.
    Tokens are read by role, so a derived or cut token axis counts as a declared one does (Squeezeformer's frames
    halved by a stride, ``1+T/2`` beside ``T/2``)."""
    padded = {a.atoms[0].root for i, a in enumerate(src) if _pads_tokens(a, namer)
              and any(_token_axis(b, namer) for b in src[max(i - 1, 0):i] + src[i + 1:i + 2])}
    if not padded or all(a in out for a in src if a.atoms and a.atoms[0].root in padded):
        return out
    whole = {_PIECE.sub("", p) for p in padded}   # (a mix names the pieces' axes: ``1+T/2`` is spelled ``1+T``)
    def cut(axis: Axis) -> bool:
        return axis not in src and any(t.root in padded or (t.root.startswith(ax.MIXED_PREFIX) and any(
            _PIECE.sub("", p) in whole for p in t.root.lstrip(ax.MIXED_PREFIX).split("*"))) for t in axis.atoms)
    return tuple(ax.unknown_axis(a.size) if cut(a) else a for a in out)


def _read_alone(c: Call) -> frozenset[int]:
    """The output axes whose size the code read from one axis (``tgt_len`` in ``view(tgt_len, bsz * H,
    d)``): the code says each is that axis alone, so no axis of one entry is merged into it."""
    from shapetrace.engine.sizes import SizeOf  # (here: only a traced call reads sizes; torch is loaded then)

    sizes = c.args[1] if len(c.args) == 2 and isinstance(c.args[1], (tuple, list)) else c.args[1:]
    sizes = sizes or c.kwargs.get("shape", ())
    if len(sizes) != len(c.shapes[0]):
        return frozenset()
    return frozenset(j for j, n in enumerate(sizes) if type(n) is SizeOf and n != 1)


def transpose(c: Call) -> Axes:
    a = c.in_axes[0]
    d0, d1 = c.arg(1, "dim0"), c.arg(2, "dim1")
    return axis_moves.permute_axes(a, axis_moves.transpose_order(len(a), int(d0), int(d1)))


def swap_last(c: Call) -> Axes:
    a = c.in_axes[0]
    return tuple(a) if len(a) < 2 else axis_moves.permute_axes(a, axis_moves.transpose_order(len(a), -2, -1))


def t(c: Call) -> Axes:
    """``t()``: a matrix's two axes swap; 0-d and 1-d tensors are returned as they are."""
    a = c.in_axes[0]
    return tuple(reversed(a)) if len(a) == 2 else tuple(a)


def reverse(c: Call) -> Axes:
    """``x.T`` reverses every axis (for any number of axes)."""
    return tuple(reversed(c.in_axes[0]))


def permute(c: Call) -> Axes:
    a = c.in_axes[0]
    order = _rest(c, "dims")
    return axis_moves.permute_axes(a, [d % len(a) for d in order])


def movedim(c: Call) -> Axes:
    a = list(c.in_axes[0])
    src, dst = c.arg(1, "source"), c.arg(2, "destination")
    src = [src] if isinstance(src, int) else list(src)
    dst = [dst] if isinstance(dst, int) else list(dst)
    n = len(a)
    src, dst = [s % n for s in src], [d % n for d in dst]
    order: list[int | None] = [None] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(n) if i not in src)
    return axis_moves.permute_axes(a, [o if o is not None else next(rest) for o in order])


def expand(c: Call) -> Axes:
    return axis_moves.expand_axes(c.in_axes[0], c.shapes[0], c.namer)


def unsqueeze(c: Call) -> Axes:
    return axis_moves.unsqueeze_axes(c.in_axes[0], int(c.arg(1, "dim")))


def squeeze(c: Call) -> Axes:
    return axis_moves.squeeze_axes(c.in_axes[0], c.shapes[0])


def complex_pairs(c: Call) -> Axes:
    """``view_as_complex``: ``[..., d_k/2, 2]`` -> ``[..., d_k/2]``: each pair of reals is one number,
    so the last axis goes and the one before it keeps its names (the pairs of d_k)."""
    return tuple(c.in_axes[0][:-1])


def real_pairs(c: Call) -> Axes:
    """``view_as_real``: ``[..., d_k/2]`` -> ``[..., d_k/2, 2]``: the two reals of each number are the
    finer piece of the same root (stride half the pairs'); unnamed where that piece is not whole."""
    axes = tuple(c.in_axes[0])
    last = axes[-1] if axes else ax.Axis()
    if len(last.atoms) == 1 and last.atoms[0].stride % 2 == 0 and ax.UNKNOWN != last.atoms[0].root:
        a = last.atoms[0]
        return axes + (ax.Axis((ax.Atom(a.root, a.root_size, a.stride // 2, 2),)),)
    return axes + (ax.unknown_axis(2),)


def windows(c: Call) -> Axes:
    """``Tensor.unfold(dim, size, step)``: the axis becomes the windows, and a last axis of ``size``
    the positions in each. Windows that tile the axis (``step == size``) split it like a view
    (``T`` -> ``T/w`` windows of ``T%w`` pieces). Windows sliding by one over tokens padded by
    ``size - 1`` in all (``l+T+r``) are one per token, in order: that axis is ``T``, and the positions
    in each are ``T~w``, the ``w`` tokens around it (local attention's keys). Other overlapping
    windows are left unnamed."""
    axes = list(c.in_axes[0])
    dim = int(c.arg(1, "dimension", c.arg(1, "dim", 0))) % len(axes)
    size, step = int(c.arg(2, "size")), int(c.arg(3, "step"))
    count = c.shapes[0][dim]
    src = axes[dim]
    if step == size and count * size == src.size and len(src.atoms) == 1:
        a = src.atoms[0]
        axes[dim] = ax.Axis((ax.Atom(a.root, a.root_size, a.stride * size, count),))
        return tuple(axes) + (ax.Axis((ax.Atom(a.root, a.root_size, a.stride, size),)),)
    tokens = _padded_tokens(src, c.namer) if step == 1 else None
    if tokens is not None and tokens[1] == size - 1 and count == c.namer.size_of(tokens[0]):
        axes[dim] = ax.root_axis(tokens[0], count)
        return tuple(axes) + (ax.root_axis(f"{tokens[0]}~{size}", size),)
    axes[dim] = ax.unknown_axis(count)
    return tuple(axes) + (ax.unknown_axis(size),)


_PIECE = re.compile(r"[/%]\d+")


def _pads_tokens(axis: Axis, namer) -> bool:
    """Is ``axis`` one whole ``l+X+r`` whose one named part indexes tokens (``1+T``, ``1+T/2``)?"""
    if len(axis.atoms) != 1 or not axis.atoms[0].whole:
        return False
    parts = axis.atoms[0].root.split("+")
    named = [p for p in parts if not p.isdigit()]
    return len(parts) > 1 and len(named) == 1 and namer.role(named[0]) == "tokens"


def _token_axis(axis: Axis, namer) -> bool:
    """Is ``axis`` one token axis, whole or a cut of one (``T``, ``T/2``, ``N[0:4]``, ``1+T``)?"""
    return len(axis.atoms) == 1 and namer.role(axis.atoms[0].root) == "tokens"


def _padded_tokens(axis: Axis, namer) -> tuple[str, int] | None:
    """``(T, l + r)`` for an axis ``l+T+r`` (tokens padded on both sides, :func:`pad`), else None."""
    if len(axis.atoms) != 1 or not axis.atoms[0].whole:
        return None
    parts = axis.atoms[0].root.split("+")
    named = [p for p in parts if not p.isdigit()]
    if len(named) != 1 or namer.size_of(named[0]) is None or namer.role(named[0]) != "tokens":
        return None
    return named[0], sum(int(p) for p in parts if p.isdigit())


def strided(c: Call) -> Axes:
    """``as_strided(size, stride)``: names from the operand's own strides (:func:`~.axes.strided_axes`);
    a new storage offset, or an operand whose layout was not captured, names nothing."""
    layout = c.inputs[0] if c.inputs else None
    offset = c.arg(3, "storage_offset")
    if layout is None or (offset is not None and offset != layout[2]):
        return ax.unknown_axes(c.shapes[0])
    out_strides = [int(s) for s in c.arg(2, "stride")]
    return axis_reshape.strided_axes(c.in_axes[0], tuple(layout[1]), c.shapes[0], out_strides, c.namer)


def narrow(c: Call) -> Axes:
    a = list(c.in_axes[0])
    dim = int(c.arg(1, "dim")) % len(a)
    start = c.params.get("start")
    a[dim] = ax.sliced(a[dim], c.shapes[0][dim], c.namer, start)
    return tuple(a)


def select(c: Call) -> Axes:
    return axis_moves.unbind_axes(c.in_axes[0], int(c.arg(1, "dim")))


def unbind(c: Call) -> list[Axes]:
    dim = int(c.arg(1, "dim", 0))
    return [axis_moves.unbind_axes(c.in_axes[0], dim)] * len(c.shapes)


def split(c: Call) -> list[Axes]:
    dim = int(c.arg(2, "dim", 0))
    return axis_moves.split_axes(c.in_axes[0], dim, [s[dim % len(s)] for s in c.shapes], c.namer)


def glu(c: Call) -> Axes:
    """``F.glu(x, dim)``: the first half of axis ``dim`` times the sigmoid of the second, so the result's axis is
    one of the two pieces a split of that axis in two gives (``2*D`` -> ``D``: a conformer's pointwise GLU)."""
    shape = c.shapes[0]
    dim = int(c.arg(1, "dim", -1) if c.arg(1, "dim", -1) is not None else -1) % len(shape)
    return axis_moves.split_axes(c.in_axes[0], dim, [shape[dim], shape[dim]], c.namer)[0]


def getitem(c: Call) -> Axes:
    """Basic indexing keeps, drops, slices or adds axes; one advanced index replaces its axis."""
    index = c.args[1]
    items = index if isinstance(index, tuple) else (index,)
    masks = [i for i, item in enumerate(items) if _is_mask(item)]
    if masks:
        return _masked(c.in_axes[0], items, masks, c.shapes[0])
    out = axis_moves.index_axes(c.in_axes[0], [_index_kind(i) for i in items], list(items), c.shapes[0], c.namer)
    return out if out is not None else ax.unknown_axes(c.shapes[0])


def _is_mask(item) -> bool:
    return str(getattr(item, "dtype", "")) in ("torch.bool", "torch.uint8") and getattr(item, "ndim", 0) > 0


def _masked(axes, items, masks: list[int], shape) -> Axes:
    """``x[mask]``, ``x[:, mask]``: a boolean mask over ``k`` axes keeps as many entries as it holds, in
    one unnamed axis (its count depends on the values, so no size can name it); the axes before it
    (whole slices only) and after it keep their names."""
    first = masks[0]
    if len(masks) > 1 or any(_index_kind(i) != "full" for i in items[:first]) or \
            any(_index_kind(i) in ("adv", "...") for i in items[first + 1:]):
        return ax.unknown_axes(shape)
    k = items[first].ndim
    out = tuple(axes[:first]) + (ax.unknown_axis(shape[first]),) + tuple(axes[first + k:])
    return out if len(out) == len(shape) else ax.unknown_axes(shape)


def _index_kind(item) -> str:
    if item is None:
        return "none"
    if item is Ellipsis:
        return "..."
    if isinstance(item, bool):
        return "adv"
    if isinstance(item, int) or (hasattr(item, "__index__") and getattr(item, "ndim", 1) == 0
                                 and getattr(item, "dtype", None) is not None and not item.dtype.is_floating_point
                                 and str(item.dtype) != "torch.bool"):
        return "int"
    if isinstance(item, slice):
        return "full" if item == slice(None) else "slice"
    return "adv"


# -- copies ----------------------------------------------------------------------------------------

def cat(c: Call) -> Axes:
    return axis_moves.cat_axes(c.in_axes, int(c.arg(1, "dim", 0)), c.namer)


def stack(c: Call) -> Axes:
    return axis_moves.stack_axes(c.in_axes, int(c.arg(1, "dim", 0)))


def repeat(c: Call) -> Axes:
    return axis_moves.repeat_axes(c.in_axes[0], _rest(c, "repeats"), c.namer)


def tile(c: Call) -> Axes:
    reps = _rest(c, "dims")
    reps = [1] * (len(c.in_axes[0]) - len(reps)) + reps
    return axis_moves.repeat_axes(c.in_axes[0], reps, c.namer)


def repeat_interleave(c: Call) -> Axes:
    reps = c.arg(1, "repeats")
    if not isinstance(reps, int):
        return ax.unknown_axes(c.shapes[0])
    return axis_moves.repeat_interleave_axes(c.in_axes[0], reps, c.arg(2, "dim"), c.namer)


def pad(c: Call) -> Axes:
    """Padded axes change size: a whole token axis grown on both sides is ``l+T+r`` (the positions
    around the tokens: a local window's padding); any other loses its name; the others keep theirs."""
    src, shape = c.in_axes[0], c.shapes[0]
    amounts = c.arg(1, "pad")
    out = []
    for i, (a, s) in enumerate(zip(src, shape)):
        if a.size == s:
            out.append(a)
            continue
        j = len(src) - 1 - i   # F.pad's pairs run from the last axis backwards
        pair = tuple(amounts[2 * j:2 * j + 2]) if isinstance(amounts, (list, tuple)) else ()
        out.append(_padded_axis(a, pair, s, c.namer))
    return tuple(out)


def _padded_axis(axis: Axis, pair: tuple, size: int, namer) -> Axis:
    label = namer.label(axis) if len(axis.atoms) == 1 and axis.atoms[0].whole else None
    if label is None or len(pair) != 2 or not all(isinstance(p, int) and p >= 0 for p in pair) or \
            namer.role(label) != "tokens" or "+" in label or axis.size + sum(pair) != size:
        return ax.unknown_axis(size)
    left, right = pair
    return ax.root_axis("+".join(([str(left)] if left else []) + [label] + ([str(right)] if right else [])), size)


def gather(c: Call) -> Axes:
    """``gather(x, dim, index)``: the result's axes are the index's; along ``dim`` each entry is the one the
    index's entry there asks for, so where ``x``'s axis there has no name (a table: BERT's buffered
    token-type ids, gathered at the position ids of the tokens) it takes the index's name there (``T``),
    else none here (a pick of named positions is named by :mod:`.infer.elements`: ``N[ids_keep]``)."""
    src, shape = c.in_axes[0], c.shapes[0]
    dim = int(c.arg(1, "dim")) % max(len(shape), 1)
    index = c.in_axes[1] if len(c.in_axes) > 1 else ()
    # (gather's index has the input's rank; index_select's is 1-d, its one axis the picked one)
    asked = index[dim] if len(index) == len(shape) else index[0] if len(index) == 1 else None
    return tuple(_asked(a, asked, s) if i == dim else ax.unknown_axis(s) if a.size != s else a
                 for i, (a, s) in enumerate(zip(src, shape)))


def _asked(picked: Axis, asked: Axis | None, size: int) -> Axis:
    """Along a gather's ``dim``: the index's axis where the picked axis has no name and the index's has one."""
    if asked is None or asked.size != size or not asked.atoms or picked.atoms and not _unnamed(picked) \
            or _unnamed(asked):
        return ax.unknown_axis(size)
    return asked


def _unnamed(axis: Axis) -> bool:
    return not axis.atoms or all(a.root == ax.UNKNOWN for a in axis.atoms)


def take_along_dim(c: Call) -> Axes:
    """``take_along_dim(x, idx, dim)``: a gather along ``dim`` (no ``dim``: of the flattened tensor)."""
    dim = c.arg(2, "dim")
    if dim is None or len(c.in_axes[0]) != len(c.shapes[0]):
        return ax.unknown_axes(c.shapes[0])
    dim = int(dim) % max(len(c.shapes[0]), 1)
    return tuple(ax.unknown_axis(s) if i == dim or a.size != s else a
                 for i, (a, s) in enumerate(zip(c.in_axes[0], c.shapes[0])))


def index_select(c: Call) -> Axes:
    return gather(c)


# -- compute ---------------------------------------------------------------------------------------

def linear(c: Call) -> Axes:
    weight = c.arg(1, "weight")
    return axis_compute.linear_axes(c.in_axes[0], c.shapes[0][-1], c.namer, _weight_is_module(weight))


def addmm(c: Call) -> Axes:
    """``addmm(bias, x, W)``: GPT-2's Conv1D, a projection of x's last axis by W of shape [in, out]."""
    x = c.in_axes[0]
    return axis_compute.linear_axes(x, c.shapes[0][-1], c.namer, True)


def parameter_product(c: Call) -> Axes:
    """``x @ W`` where ``W`` is a 2-d matrix made from module parameters only (``input @ self.weight.T``:
    Falcon's FalconLinear computes nn.Linear this way): a projection of x's last axis, named as
    ``linear`` names it."""
    return axis_compute.linear_axes(c.in_axes[0], c.shapes[0][-1], c.namer, True)


def _weight_is_module(weight) -> bool:
    """A parameter (nn.Linear's weight) is structure; a computed weight is not."""
    return getattr(weight, "requires_grad", False) or type(weight).__name__ == "Parameter"


def conv(c: Call) -> Axes:
    """``F.conv1d/2d/3d(x, weight, ...)``: see :func:`~shapetrace.engine.axes.conv_axes`; ``tiles``: the
    spatial axes its windows tile exactly (stride = kernel, no padding, no dilation: PVT's and SegFormer's
    spatial reduction ``Conv2d(D, D, kernel_size=r, stride=r)``)."""
    weight = c.params.get("weight")
    n = len(weight) - 2 if weight else 0
    stride, padding, dilation = (_per_axis(c.arg(i, key, d), n) for i, key, d in
                                 ((3, "stride", 1), (4, "padding", 0), (5, "dilation", 1)))
    tiles = tuple(stride is not None and padding is not None and dilation is not None and stride[j] == weight[2 + j]
                  and padding[j] == 0 and dilation[j] == 1 for j in range(n)) if n > 0 else ()
    out = axis_compute.conv_axes(c.in_axes[0], c.shapes[0], c.namer, _weight_is_module(c.arg(1, "weight")),
                                 weight, tiles)
    if n == 0 or None in (stride, padding, dilation) or len(out) != n + 2:
        return out
    return out[:2] + tuple(_unpadded(src, got, weight[2 + j], stride[j], padding[j], dilation[j], c.namer)
                           for j, (src, got) in enumerate(zip(c.in_axes[0][2:], out[2:])))


def _unpadded(src: Axis, got: Axis, kernel: int, stride: int, padding: int, dilation: int, namer) -> Axis:
    """A conv over tokens padded by hand (``l+T+r``, :func:`pad`: ``padding_mode='circular'`` pads this way
    before its conv, Informer's ``TokenEmbedding``; a causal conv pads ``k - 1`` on the left) whose window
    spans exactly the padding (stride 1, no padding of its own, ``dilation·(kernel - 1) = l + r``): output
    position i is the window around token i, so the output is the tokens again (``T``), not a new grid. Such a
    conv over an axis whose padding dropped its name (Non-stationary Transformer's circular ``series_conv`` over
    the variates) makes no grid either: its output is left unnamed."""
    if stride != 1 or padding != 0 or kernel == 1:
        return got
    if namer.label(src) is None:
        return ax.unknown_axis(got.size)
    padded = _padded_tokens(src, namer)
    if padded is None or dilation * (kernel - 1) != padded[1] or got.size != namer.size_of(padded[0]):
        return got
    return ax.root_axis(padded[0], got.size)


def matmul(c: Call) -> Axes:
    return axis_compute.matmul_axes(c.in_axes[0], c.in_axes[1], c.shapes[0], c.namer)


def baddbmm(c: Call) -> Axes:
    return axis_compute.matmul_axes(c.in_axes[0], c.in_axes[1], c.shapes[0], c.namer)


def einsum(c: Call) -> Axes:
    parsed = c.params.get("subscripts")
    out = axis_compute.einsum_axes(parsed, c.in_axes, c.namer) if parsed else None
    return out if out is not None else ax.unknown_axes(c.shapes[0])


def outer(c: Call) -> Axes:
    """``torch.outer(a, b)``: entry (i, j) is ``a[i] * b[j]``, so axis 0 is ``a``'s axis and axis 1 is ``b``'s."""
    if len(c.in_axes) == 2 and all(len(axes) == 1 for axes in c.in_axes):
        return (c.in_axes[0][0], c.in_axes[1][0])                                  # (len(a), len(b))
    return ax.unknown_axes(c.shapes[0])


def sdpa(c: Call) -> Axes:
    return axis_compute.sdpa_axes(c.in_axes[0], c.in_axes[2] if len(c.in_axes) > 2 else c.in_axes[0], c.shapes[0])


def embedding(c: Call) -> Axes:
    """Token ids ``[B, T]`` become ``[B, T, D]``: one feature vector (of the model's width) per id; a
    table narrower than the model (ALBERT's and ELECTRA's embedding width) makes ``F`` where no other
    name has its width (:func:`.axis_compute.projected_width`)."""
    ids = c.in_axes[0]
    width = c.shapes[0][-1]
    feature = ax.root_axis("D", width) if c.namer.size_of("D") == width else \
        axis_compute.projected_width(c.namer, width)
    return tuple(ids) + (feature,)


def one_hot(c: Call) -> Axes:
    """``F.one_hot(idx, n)``: ``idx``'s axes, then an axis of the ``n`` classes (no name: what the indices
    count is not known from the call)."""
    return tuple(c.in_axes[0]) + (ax.unknown_axis(c.shapes[0][-1]),)


def reduce(c: Call) -> Axes:
    src = list(c.in_axes[0])
    dims = c.params.get("dim")
    if dims is None:
        return ax.unknown_axes(c.shapes[0]) if c.shapes[0] else ()
    dims = [dims] if isinstance(dims, int) else list(dims)
    gone = {d % len(src) for d in dims} if src else set()
    if c.params.get("keepdim"):
        return tuple(Axis() if i in gone else a for i, a in enumerate(src))
    return tuple(a for i, a in enumerate(src) if i not in gone)


def fits(axes: Sequence[Axis], shape: Sequence[int]) -> bool:
    """Do these axes describe a tensor of ``shape`` (the check the tracer makes on every result)?"""
    return len(axes) == len(shape) and all(a.size == s or (not a.atoms and s == 1) for a, s in zip(axes, shape)) \
        and math.prod(shape) == math.prod(a.size for a in axes)


def recurrent(c: Call) -> list[Axes]:
    """``lstm``, ``gru``, ``rnn_tanh``, ``rnn_relu`` (what ``nn.LSTM``, ``nn.GRU`` and ``nn.RNN`` call): the
    output keeps the input's leading axes where they are (sequence and batch in either order, ``batch_first``
    or not; a packed sequence's one axis) and ends in new features, named as a module's projection names its
    width (:func:`~.axis_compute.linear_axes`: ``2*hidden`` of a bidirectional layer is ``D`` only where it
    is D's width and no other name's); the final states (``layers·directions, B, hidden``) are left unnamed."""
    out = c.shapes[0]
    x = c.in_axes[0]
    if len(x) != len(out) or tuple(s.size for s in x[:-1]) != tuple(out[:-1]):
        return [ax.unknown_axes(s) for s in c.shapes]
    return [axis_compute.linear_axes(x, out[-1], c.namer, True)] + [ax.unknown_axes(s) for s in c.shapes[1:]]


def pool(c: Call) -> Axes:
    """``F.avg_pool1d/2d/3d``, ``F.max_pool1d/2d/3d`` (one result): the last n axes pooled, the rest kept. A
    pooled axis of one piece whose windows tile it exactly (kernel = stride, no padding, no dilation) holds one
    entry per block of neighbours: its coarse piece (``T`` pooled by 2 is ``T/2``, as ``view(B, T // 2, 2,
    D).mean(2)`` names it); a kernel and stride of 1 keeps the axis; anything else is unnamed."""
    x, out = c.in_axes[0], c.shapes[0]
    n = int(c.op[-2]) if c.op[-2:-1].isdigit() else 0
    if not n or len(x) != len(out) or len(out) < n or len(c.shapes) != 1:
        return ax.unknown_axes(out)   # (max_pool's return_indices: two results, left unnamed)
    kernel, stride = _per_axis(c.arg(1, "kernel_size"), n), _per_axis(c.arg(2, "stride", None), n)
    stride = stride if stride is not None else kernel
    padding, dilation = _per_axis(c.arg(3, "padding", 0), n), _per_axis(c.kwargs.get("dilation", 1), n)
    if None in (kernel, stride, padding, dilation) or any(padding) or any(d != 1 for d in dilation):
        return ax.unknown_axes(out)
    lead = len(out) - n
    axes = list(x[:lead])
    for axis, k, s, size in zip(x[lead:], kernel, stride, out[lead:]):
        atoms = ax.coalesce(axis.atoms)
        if k == s == 1 and axis.size == size:
            axes.append(axis)
        elif k == s and len(atoms) == 1 and atoms[0].size == size * s:
            a = atoms[0]
            axes.append(ax.Axis((ax.Atom(a.root, a.root_size, a.stride * s, size),)))
        else:
            axes.append(ax.unknown_axis(size))
    return tuple(axes)


def resample(c: Call) -> Axes:
    """``F.interpolate`` of ``[N, C, *positions]``: the batch and channel axes keep their names; a position axis
    of unchanged size keeps its own, a resized one is another grid (Mask2Former's predicted masks brought to the
    memory's size), unnamed."""
    x, out = c.in_axes[0], c.shapes[0]
    if len(c.shapes) != 1 or len(x) != len(out) or len(out) < 3:
        return ax.unknown_axes(out)
    return tuple(a if i < 2 or a.size == size else ax.unknown_axis(size) for i, (a, size) in enumerate(zip(x, out)))


def adaptive_pool(c: Call) -> Axes:
    """``F.adaptive_avg_pool1d/2d/3d``, ``F.adaptive_max_pool1d/2d/3d`` (one result): the last n axes pooled to
    the asked grid, the leading ones (batch, channels) kept; a pooled axis of unchanged size keeps its name (each
    cell its own window), a resized one is another grid, unnamed (GCViT's global query pooled to the window)."""
    x, out = c.in_axes[0], c.shapes[0]
    n = int(c.op[-2]) if c.op[-2:-1].isdigit() else 0
    if not n or len(x) != len(out) or len(out) <= n or len(c.shapes) != 1:
        return ax.unknown_axes(out)   # (return_indices: two results, left unnamed)
    lead = len(out) - n
    return tuple(a if i < lead or a.size == size else ax.unknown_axis(size) for i, (a, size) in enumerate(zip(x, out)))


def _per_axis(value, n: int) -> tuple[int, ...] | None:
    """A pooling argument for each of n axes (an int, or a sequence of n ints), or None."""
    if isinstance(value, int):
        return (value,) * n
    if isinstance(value, (tuple, list)) and len(value) == n and all(isinstance(v, int) for v in value):
        return tuple(value)
    return None
