"""The op registry's one table: an :class:`~.opspec.OpSpec` per torch op, each holding every fact the
engine keeps about it (how names flow, view or copy, its family, how it is replayed, its rule on the
meta device, whether it scales, picks, adds onto scores, or only reads metadata).

An op is found by the function the capture sees (:func:`.ops.callable_index`): under its name and
``aliases`` in ``torch``, ``torch.Tensor`` and ``torch.nn.functional``, or, where another function shares
its ``__name__``, as the one function its ``callable`` names (``F.unfold`` copies, ``Tensor.unfold`` views).
Adding an op means adding one entry here. Nothing in this module runs torch ops.
"""

from __future__ import annotations

from collections.abc import Callable

from shapetrace.engine import blocks, grids
from shapetrace.engine import propagate as pr
from shapetrace.engine.directions import baddbmm_params, fill_params, sdpa_params, triangle_params, where_params
from shapetrace.engine.op_args import (
    _constant_params,
    _conv_params,
    _dim_params,
    _dropout_params,
    _einsum_params,
    _is_tensor,
    _linear_params,
    _lookup_params,
    _norm_params,
    _number,
    _reduce_params,
    _scale_params,
    _scan_params,
    _shape_params,
    _softmax_params,
    _tensordot_params,
    addmm_operands,
    all_operands,
    arg,
    baddbmm_operands,
    first_operand,
    linear_operands,
)
from shapetrace.engine.opspec import Family, OpSpec, ReduceDtype
from shapetrace.engine.reductions import extreme_params, reduce_each, same_shape, second_dim_params, spread_params

F = Family


def _in_place_views(fn: Callable | None, words: str, *names: str, params: Callable | None = None) -> list[OpSpec]:
    """In place: the tensor itself gets new metadata (the same storage, no data moves)."""
    return [OpSpec(n, "view", fn, params=params, inplace=True, words=words) for n in names]


def _elementwise(meta: str, *names: str, **facts) -> list[OpSpec]:
    """Elementwise ops: names broadcast silently, no row of their own; ``meta``: their rule on meta."""
    return [OpSpec(n, "new", pr.broadcast, row=False, words="elementwise", family=Family.ELEMENTWISE, meta=meta,
                   **facts) for n in names]


def _meta_only(meta: str, *names: str, **facts) -> list[OpSpec]:
    """Ops the engine knows only by their rule on the meta device: no row, no names (none is proven)."""
    return [OpSpec(n, "new", None, row=False, meta=meta, **facts) for n in names]


def _cheap(*names: str, reads_values: bool = False) -> list[OpSpec]:
    """Calls that only read metadata, or hand the values to Python (``reads_values``): not recorded at all."""
    return [OpSpec(n, "new", None, row=False, cheap=True, reads_values=reads_values) for n in names]



def _reduction(name: str, words: str, params: Callable = _reduce_params, names: Callable = reduce_each,
               meta: str = "reduce", **facts) -> OpSpec:
    """An op that reduces or normalises along axes (family REDUCE; :mod:`.reductions` reads its axes)."""
    return OpSpec(name, "new", names, params=params, words=words, family=F.REDUCE, meta=meta, **facts)

_SPLIT_DIM = {"params": lambda a, k: {"dim": arg(a, k, 2, "dim", 0)}, "cuts_at": 2}
_REORDER = "reorders the axes (strides reorder, no data moves)"
_GROWS = "repeats values along size-1 axes with stride 0"
_RESHAPES = "a new shape: a view when the strides allow, else a copy"
_SWAPS = "swaps two axes of this tensor in place"
# -- the backward's sentences (OpSpec.backward: {out} the incoming grad, {in0} {in1} the operands' grads) --
_GRAD_RESHAPE = "the incoming grad {out} is reshaped back to {in0}: {how0}"
_GRAD_ORDER = "the grad of an axis reorder is the same reorder undone: {out} → {in0}, {how0}"
_GRAD_EXPAND = "the grad of an expand sums over the repeated axes: {out} → {in0}, a new tensor"
_GRAD_SIZE_ONE = "the size-1 axis is taken back out of the incoming grad: {out} → {in0}, {how0}"
_GRAD_PRODUCT = "dY {out}; dA = dY · Bᵀ {in0}; dB = Aᵀ · dY {in1}"

ENTRIES: list[OpSpec] = [
    # -- the view family: same storage, new shape and strides ------------------------------
    OpSpec("view", "view", pr.reshape, params=_shape_params, words="same memory read with a new shape",
           stride_bound=True, family=F.RESHAPE, backward=_GRAD_RESHAPE, chain="method"),
    OpSpec("view_as", "view", pr.reshape, words="same memory read with a new shape", stride_bound=True,
           shape_of_other=True, family=F.RESHAPE, backward=_GRAD_RESHAPE),
    OpSpec("reshape", "maybe", pr.reshape, params=_shape_params, words=_RESHAPES, family=F.RESHAPE,
           backward=_GRAD_RESHAPE, chain="method"),
    OpSpec("reshape_as", "maybe", pr.reshape, words=_RESHAPES, shape_of_other=True, family=F.RESHAPE,
           backward=_GRAD_RESHAPE),
    OpSpec("flatten", "maybe", pr.reshape, words="merges axes into one", family=F.RESHAPE,
           backward=_GRAD_RESHAPE, chain="method"),
    OpSpec("unflatten", "view", pr.reshape, words="splits one axis into several", family=F.RESHAPE,
           backward=_GRAD_RESHAPE, chain="method"),
    *(OpSpec(name, "view", pr.transpose, words="swaps two axes (strides swap, no data moves)", family=F.AXIS_ORDER,
             backward=_GRAD_ORDER,
             params=lambda a, k: {"dims": [arg(a, k, 1, "dim0"), arg(a, k, 2, "dim1")]}, chain=chain)
      for name, chain in (("transpose", "method"), ("swapaxes", ""), ("swapdims", ""))),
    OpSpec("permute", "view", pr.permute, words=_REORDER, family=F.AXIS_ORDER, backward=_GRAD_ORDER, chain="method"),
    *(OpSpec(n, "view", pr.movedim, words="moves axes to new positions", family=F.AXIS_ORDER, backward=_GRAD_ORDER)
      for n in ("movedim", "moveaxis")),
    OpSpec("t", "view", pr.t, words="swaps the two axes of a matrix", family=F.AXIS_ORDER, backward=_GRAD_ORDER),
    OpSpec("T", "view", pr.reverse, words="reverses the order of all axes", family=F.AXIS_ORDER,
           backward=_GRAD_ORDER, getter=True),
    OpSpec("mT", "view", pr.swap_last, words="swaps the last two axes", family=F.AXIS_ORDER,
           backward=_GRAD_ORDER, getter=True,
           chain="attribute"),
    OpSpec("mH", "view", pr.swap_last, words="swaps the last two axes", family=F.AXIS_ORDER,
           backward=_GRAD_ORDER, getter=True),
    OpSpec("adjoint", "view", pr.swap_last, words="swaps the last two axes", family=F.AXIS_ORDER, backward=_GRAD_ORDER),
    OpSpec("H", "new", None, row=False, getter=True),   # (the conjugate transpose of a matrix: not named)
    OpSpec("broadcast_to", "view", pr.expand, words=_GROWS, family=F.EXPAND, backward=_GRAD_EXPAND,
           params=_constant_params, params_read_values=True),
    OpSpec("expand_as", "view", pr.expand, words=_GROWS, shape_of_other=True, family=F.EXPAND, backward=_GRAD_EXPAND,
           params=_constant_params, params_read_values=True),
    OpSpec("expand", "view", pr.expand, words=_GROWS, sized="grown", family=F.EXPAND,
           backward=_GRAD_EXPAND, replay="Tensor.expand", params=_constant_params, params_read_values=True,
           chain="method"),
    OpSpec("arange", "new", None, row=False, words="counts 0, 1, ... n - 1", sized="count"),
    *(OpSpec(name, "new", None, row=False, words="a new tensor of a shape", sized="shape")
      for name in ("zeros", "ones", "empty")),
    OpSpec("full", "new", None, row=False, words="a new tensor of a shape", sized="sequence"),
    # (the same made by a method of another tensor, which gives only the dtype and the device: Transformer-XL's
    # ``word_emb.new_ones(qlen, klen)`` mask, a buffer ``k.new_zeros(B, H, 0, d)``)
    *(OpSpec(name, "new", None, row=False, words="a new tensor of a shape", sized="shape", on_self=True)
      for name in ("new_zeros", "new_ones", "new_empty")),
    OpSpec("new_full", "new", None, row=False, words="a new tensor of a shape", sized="sequence", on_self=True),
    # (a new tensor of another's shape: each axis indexes what the other's axis does, as zeros(n) of a size read
    # from an axis does; Mistral's ``triu(ones_like(mask), diagonal=...)`` window over the mask's [T, T])
    *(OpSpec(name, "new", pr.broadcast, row=False, words="a new tensor of another's shape")
      for name in ("zeros_like", "ones_like", "full_like", "empty_like")),
    *(OpSpec(name, "new", None, row=False, words="a new tensor of a shape", sized="shape", meta="factory")
      for name in ("rand", "randn")),
    *_meta_only("factory", "randint", integer_result=True),
    OpSpec("unsqueeze", "view", pr.unsqueeze, params=_dim_params(), words="adds an axis of size 1",
           family=F.SIZE_ONE_AXIS, backward=_GRAD_SIZE_ONE, chain="method"),
    OpSpec("squeeze", "view", pr.squeeze, words="removes axes of size 1", family=F.SIZE_ONE_AXIS,
           backward=_GRAD_SIZE_ONE, chain="method"),
    OpSpec("narrow", "view", pr.narrow, words="keeps a range along one axis", family=F.SLICE, chain="method",
           params=lambda a, k: {"dim": arg(a, k, 1, "dim"), "start": _number(arg(a, k, 2, "start")),
                                "length": _number(arg(a, k, 3, "length"))}),
    OpSpec("select", "view", pr.select, params=_dim_params(), words="picks one index along an axis, dropping it",
           family=F.SLICE, picks=True, cuts_at=1, chain="method"),
    OpSpec("__getitem__", "maybe", pr.getitem, words="indexing", family=F.SLICE, picks=True, indexes=True,
           replay="Tensor.__getitem__"),
    OpSpec("unbind", "view", pr.unbind, params=_dim_params(), words="cuts a tensor into its slices along an axis",
           family=F.SPLIT, cuts_at=1, replay="torch.unbind"),
    *(OpSpec(name, "view", pr.split, words="cuts an axis into pieces", family=F.SPLIT, replay=f"torch.{name}",
             **_SPLIT_DIM) for name in ("split", "chunk", "tensor_split")),
    OpSpec("split_with_sizes", "view", pr.split, words="cuts an axis into pieces", family=F.SPLIT,
           replay="Tensor.split_with_sizes", params=_SPLIT_DIM["params"]),
    OpSpec("glu", "new", pr.glu, row=False, params=_dim_params(), words="gates one half of an axis by the other"),
    OpSpec("diagonal", "view", None, words="the diagonal"),
    # writes into a tensor (a cache): a row each (the table shows where a cache is filled, and a write
    # that puts tokens where heads belong is reported there); the names they prove are read after the run
    OpSpec("__setitem__", "copy", None, inplace=True, write="index", words="writes values into part of this tensor",
           family=F.WRITE),
    OpSpec("index_copy_", "copy", None, inplace=True, write="rows", words="writes rows at the given indices",
           family=F.WRITE),
    OpSpec("copy_", "copy", None, inplace=True, write="whole", words="copies values into this tensor", family=F.WRITE),
    # out of place: a copy of the first tensor, the given values written in at the indices (its axes, its names;
    # the adding ones, index_add and scatter_add, are sums over what lands on each entry, left unnamed)
    *(OpSpec(name, "copy", pr.same, words="a copy with values written in at the given indices")
      for name in ("scatter", "index_copy")),
    OpSpec("view_as_complex", "view", pr.complex_pairs, words="reads each pair of reals as one complex number"),
    OpSpec("view_as_real", "view", pr.real_pairs, words="reads each complex number as its pair of reals"),
    OpSpec("unfold", "view", pr.windows, words="windows along an axis (overlapping ones share memory)",
           callable="torch.Tensor.unfold", replay="Tensor.unfold"),
    OpSpec("as_strided", "view", pr.strided, words="any shape and strides over the same memory",
           replay="torch.as_strided", reads_storage=True),
    *_in_place_views(pr.transpose, _SWAPS, "transpose_", "swapaxes_", "swapdims_"),
    *_in_place_views(pr.t, "swaps the two axes of this matrix in place", "t_"),
    *_in_place_views(pr.unsqueeze, "adds an axis of size 1 to this tensor in place", "unsqueeze_",
                     params=_dim_params()),
    *_in_place_views(pr.squeeze, "removes axes of size 1 from this tensor in place", "squeeze_"),
    *_in_place_views(None, "gives this tensor any shape and strides in place", "as_strided_"),
    *_in_place_views(None, "gives this tensor a new shape in place (its values may be lost)", "resize_"),
    *_in_place_views(None, "points this tensor at other memory", "set_"),
    # -- copies: the same values in a new buffer -----------------------------------------------
    OpSpec("contiguous", "maybe", pr.same, words="lays the values out row-major (a copy unless they already are)",
           family=F.CONTIGUOUS,
           backward="the incoming grad {out} passes back unchanged: the grad of a copy is the grad itself (no copy "
                    "here; a backward that reshapes it after the transpose may copy)", chain="method"),
    OpSpec("clone", "copy", pr.same, words="copies the values into a new buffer"),
    OpSpec("repeat", "copy", pr.repeat, words="tiles the tensor", sized="grown", repeats=True,
           backward="the grad of a repeat sums the tiles back: {out} → {in0}, a new tensor", replay="Tensor.repeat"),
    OpSpec("tile", "copy", pr.tile, words="tiles the tensor", replay="torch.tile", repeats=True),
    OpSpec("repeat_interleave", "copy", pr.repeat_interleave, words="repeats each element in place",
           replay="torch.repeat_interleave", repeats=True),
    OpSpec("cat", "copy", pr.cat, shows_first=True, params=lambda a, k: {"dim": arg(a, k, 1, "dim", 0)},
           words="joins tensors along an axis", operands=all_operands, family=F.JOIN, replay="torch.cat",
           meta="cat", aliases=("concat", "concatenate")),
    OpSpec("stack", "copy", pr.stack, shows_first=True, stacks=True,
           params=lambda a, k: {"dim": arg(a, k, 1, "dim", 0)},
           words="stacks tensors along a new axis", operands=all_operands, replay="torch.stack", meta="cat"),
    OpSpec("roll", "copy", pr.same, words="rotates the values along axes (same names, shifted positions)",
           replay="torch.roll"),
    OpSpec("flip", "copy", pr.same, words="reverses the order along axes", replay="torch.flip"),
    OpSpec("pad", "copy", pr.pad, words="adds padding around axes", replay="torch.nn.functional.pad"),
    OpSpec("gather", "copy", pr.gather, words="picks values along an axis by index", params=_dim_params(),
           replay="torch.gather", picks_by_index=True),
    OpSpec("take_along_dim", "copy", pr.take_along_dim, words="picks values along an axis by index",
           params=_dim_params(2), replay="torch.take_along_dim", picks_by_index=True),
    OpSpec("index_select", "copy", pr.index_select, words="picks slices along an axis by index",
           params=_dim_params(), replay="torch.index_select", picks_by_index=True),
    *(OpSpec(name, "copy", pr.first_broadcast, params=fill_params, words="fills masked positions",
             inplace=name.endswith("_"), params_read_values=True, family=F.MASK_FILL, meta="masked_fill")
      for name in ("masked_fill", "masked_fill_")),
    OpSpec("where", "new", pr.broadcast, words="picks from two tensors by a condition", family=F.ELEMENTWISE,
           meta="where", params=where_params, params_read_values=True),
    OpSpec("tril", "copy", pr.same, words="keeps the lower triangle", family=F.TRIANGLE, meta="tri",
           params=triangle_params),
    OpSpec("triu", "copy", pr.same, words="keeps the upper triangle", family=F.TRIANGLE, meta="tri",
           params=triangle_params),
    # -- compute: new values -------------------------------------------------------------------------
    OpSpec("linear", "new", pr.linear, shows_first=True, params=_linear_params, operands=linear_operands,
           words="a linear projection of the last axis", family=F.PROJECTION,
           backward="dY {out}; dx = dY · W {in0}; dW = dYᵀ · x, summed over {summed}: {weight}; "
                    "db = dY summed over {summed}: {bias}", meta="linear"),
    OpSpec("addmm", "new", pr.addmm, params=_scale_params, operands=addmm_operands,
           words="bias + x @ W (a projection written as a matrix product)", family=F.PROJECTION),
    OpSpec("mm", "new", pr.matmul, rank=2, words="matrix product", family=F.PRODUCT,
           backward=_GRAD_PRODUCT, contraction="matrix",
           meta="matmul"),
    OpSpec("bmm", "new", pr.matmul, rank=3, words="batched matrix product", family=F.PRODUCT,
           backward=_GRAD_PRODUCT, contraction="matrix",
           meta="matmul"),
    OpSpec("baddbmm", "new", pr.baddbmm, params=baddbmm_params, params_read_values=True, operands=baddbmm_operands,
           words="base + a @ b, batched", family=F.PRODUCT, contraction="matrix"),
    OpSpec("matmul", "new", pr.matmul, copies_inside=True, words="matrix product", family=F.PRODUCT,
           backward=_GRAD_PRODUCT,
           contraction="matrix", meta="matmul", aliases=("__matmul__",)),
    # ``a.__rmatmul__(b)`` is ``b @ a``: the same op with its operands the other way round
    OpSpec("matmul", "new", pr.matmul, words="matrix product", family=F.PRODUCT,
           backward=_GRAD_PRODUCT, copies_inside=True,
           contraction="matrix", meta="matmul", reversed=True, aliases=("__rmatmul__",),
           callable="torch.Tensor.__rmatmul__",
           operands=lambda a, k: [t for t in (a[1:2] + a[:1]) if _is_tensor(t)]),
    *(OpSpec(f"conv{n}d", "new", pr.conv, params=_conv_params, operands=first_operand,
             words="slides a filter over the positions: channels in, channels out") for n in (1, 2, 3)),
    *(OpSpec(f"{kind}_pool{n}d", "new", pr.pool, operands=first_operand,
             words=f"pools each window of neighbours into its {'mean' if kind == 'avg' else 'largest entry'}")
      for kind in ("avg", "max") for n in (1, 2, 3)),
    *(OpSpec(f"adaptive_{kind}_pool{n}d", "new", pr.adaptive_pool, operands=first_operand,
             words=f"pools the positions to a fixed grid, each cell the {'mean' if kind == 'avg' else 'largest entry'}"
                   " of its window: batch and channels kept")
      for kind in ("avg", "max") for n in (1, 2, 3)),
    OpSpec("interpolate", "new", pr.resample, operands=first_operand,
           words="resamples a map's positions (nearest, bilinear, ...): batch and channels kept"),
    # what ``nn.LSTM``/``nn.GRU``/``nn.RNN`` call (``torch._VF``): the sequence, then states and weights
    *(OpSpec(name, "new", pr.recurrent, operands=first_operand,
             words="a recurrent layer run along the sequence: each step's new features from its input and the "
                   "last step's state") for name in ("lstm", "gru", "rnn_tanh", "rnn_relu")),
    OpSpec("einsum", "new", pr.einsum, params=_einsum_params, operands=all_operands, words="einsum",
           shows_first=True, contraction="subscripts", family=F.PRODUCT, meta="einsum"),
    OpSpec("tensordot", "new", pr.einsum, params=_tensordot_params, operands=all_operands,
           words="sums products over the paired axes (an einsum)", contraction="subscripts", family=F.PRODUCT),
    OpSpec("scaled_dot_product_attention", "new", pr.sdpa, params=sdpa_params, params_read_values=True,
           short="sdpa", words="softmax(q @ kᵀ · scale) @ v in one kernel", family=F.FUSED_ATTENTION, meta="sdpa"),
    OpSpec("softmax", "new", pr.same, params=_softmax_params, words="normalises into weights that sum to 1",
           family=F.SOFTMAX,
           backward="dx = y ⊙ (dy − Σ dy ⊙ y along the softmax axis) {in0}: the weights y the forward made "
                    "are saved for it", meta="softmax"),
    OpSpec("log_softmax", "new", pr.same, params=_softmax_params, words="log of softmax", family=F.SOFTMAX,
           meta="softmax"),
    *_meta_only("softmax", "_softmax"),
    OpSpec("cumsum", "new", pr.same, params=_scan_params, words="running sums along one axis", family=F.SCAN),
    OpSpec("cumprod", "new", pr.same, params=_scan_params, words="running products along one axis", family=F.SCAN),
    OpSpec("layer_norm", "new", pr.same, params=_norm_params, words="normalises each token's features",
           family=F.NORMALISE, meta="norm"),
    OpSpec("rms_norm", "new", pr.same, params=_norm_params, words="normalises each token's features",
           family=F.NORMALISE, meta="norm"),
    OpSpec("group_norm", "new", pr.same, words="normalises groups of channels", meta="norm"),
    # (each channel by statistics over the batch and positions, or kept ones: the input's axes, no row of its own)
    *(OpSpec(name, "new", pr.same, row=False, words="normalises each channel", meta="norm", operands=first_operand)
      for name in ("batch_norm", "instance_norm")),
    *_meta_only("norm", "local_response_norm"),
    # ``F.embedding(ids, weight)``; ``torch.embedding(weight, ids)`` takes its operands the other way round
    OpSpec("embedding", "new", pr.embedding, words="looks up one vector per token id", meta="embedding",
           callable="torch.nn.functional.embedding", looks_up=True, params=_lookup_params, params_read_values=True,
           operands=lambda a, k: [t for t in (a[:1] or [k.get("input")]) if _is_tensor(t)]),
    OpSpec("dropout", "new", pr.same, params=_dropout_params, words="zeroes values at random", family=F.DROPOUT,
           backward="the incoming grad {out} is zeroed and scaled where the forward was: {in0}",
           meta="dropout", aliases=("dropout1d", "dropout2d")),
    _reduction("sum", "sums over axes", reduces_to=ReduceDtype.INTEGERS_WIDEN),
    _reduction("nansum", "sums over axes (NaNs as zeros)"),
    _reduction("mean", "averages over axes"),
    _reduction("nanmean", "averages over axes (NaNs left out)"),
    _reduction("prod", "multiplies over an axis", reduces_to=ReduceDtype.INTEGERS_WIDEN),
    _reduction("amax", "the maximum over axes", maximum=True),
    _reduction("amin", "the minimum over axes"),
    _reduction("max", "the maximum over an axis (and where it is)", extreme_params, meta="max_min", maximum=True),
    _reduction("min", "the minimum over an axis (and where it is)", extreme_params, meta="max_min"),
    _reduction("logsumexp", "log-sum-exp over axes"),
    _reduction("std", "the standard deviation over axes", spread_params),
    _reduction("var", "the variance over axes", spread_params),
    # (torch's own meta kernel works out a norm's dtype and shape)
    _reduction("norm", "the vector norm over axes", second_dim_params(), meta=""),
    _reduction("linalg_vector_norm", "the vector norm over axes", second_dim_params(), meta="",
               aliases=("vector_norm",)),
    _reduction("normalize", "divides each vector along an axis by its norm", second_dim_params(1), same_shape,
               meta="norm"),
    *(OpSpec(name, "new", pr.reduce, params=_reduce_params, row=False, words="the index of the extreme over an axis",
             meta="reduce", reduces_to=ReduceDtype.INDEX, counts="dim") for name in ("argmax", "argmin")),
    OpSpec("argsort", "new", None, row=False, words="the indices that sort an axis", counts="dim or last"),
    OpSpec("topk", "new", None, row=False, words="the k largest values along an axis, and their indices",
           counts="k, dim or last", params=_dim_params(2)),
    OpSpec("sort", "new", None, row=False, words="the values of an axis in order, and their indices",
           params=_dim_params()),
    *_meta_only("reduce", "all", "any", reduces_to=ReduceDtype.BOOL),
    OpSpec("multi_head_attention_forward", "new", None, opens=True, row=False, short="mha_forward",
           words="nn.MultiheadAttention (its inner ops are recorded one by one)", family=F.MODULE_ATTENTION,
           meta="mha", called_as="nn.MultiheadAttention",
           # torch/nn/modules/activation.py: query, key and value are (L, N, E) unless batch_first=True
           caller_fix="nn.MultiheadAttention reads query, key and value as [T, B, D] by default and as "
                      "[B, T, D] when built with batch_first=True: for [B, T, D] inputs build it with "
                      "nn.MultiheadAttention(..., batch_first=True), or pass x.transpose(0, 1)."),
    # ``F.unfold`` shares ``Tensor.unfold``'s name: known by its function
    OpSpec("F.unfold", "copy", blocks.im2col, operands=first_operand, callable="torch.nn.functional.unfold",
           replay="torch.nn.functional.unfold",
           words="copies each sliding block of the input into one column (im2col): the blocks' values are "
                 "copied, overlapping ones more than once"),
    OpSpec("F.fold", "new", blocks.col2im, operands=first_operand, callable="torch.nn.functional.fold",
           words="sums each column back into its sliding block of the output (col2im): overlapping blocks add"),
    # ``torch.meshgrid(a, b)``: coordinate grids, each axis walking one vector (a 2-D position table's grid)
    OpSpec("meshgrid", "new", grids.meshgrid, row=False, operands=all_operands, params=grids.meshgrid_params,
           words="coordinate grids: axis k of every grid walks the k-th vector"),
    # ``torch.outer(a, b)``: a rotary table's angles (positions × frequencies); no row, as the arithmetic around it
    OpSpec("outer", "new", pr.outer, row=False, operands=all_operands, aliases=("ger",),
           words="outer product: entry (i, j) is a[i]·b[j]"),
    # each value's slot among sorted boundaries: the values' axes (``searchsorted``: the values come second;
    # ``bucketize``: first); no row, as the arithmetic on positions around it
    OpSpec("searchsorted", "new", pr.of_values, row=False, operands=all_operands,
           words="the index of each value's slot in a sorted sequence"),
    OpSpec("bucketize", "new", pr.same, row=False, operands=all_operands,
           words="the index of each value's bucket among sorted boundaries"),
    # ``F.one_hot(buckets, n)``: the indices' axes, then one of the classes (T5's and LayoutLMv3's bucketed
    # positions read by a bias-free Linear); no row, as the arithmetic on positions around it
    OpSpec("one_hot", "new", pr.one_hot, row=False, operands=first_operand, callable="torch.nn.functional.one_hot",
           words="one indicator vector per index: the index's axes, then one axis of the classes"),
    # -- elementwise: names broadcast silently, no row of their own ------------------------------------
    *_elementwise("binary", "add", "__add__", "__radd__", additive=True),
    *_elementwise("inplace", "add_", "__iadd__", additive=True),
    *_elementwise("binary", "div", "true_divide", "__truediv__", true_division=True, scaling="divides"),
    *_elementwise("binary", "__rtruediv__", true_division=True),
    *_elementwise("inplace", "div_", "__itruediv__", scaling="divides"),
    *_elementwise("binary", "mul", "__mul__", "__rmul__", scaling="multiplies"),
    *_elementwise("inplace", "mul_", "__imul__", scaling="multiplies"),
    # ``scores - bias`` is ``scores + (-bias)``: a subtracted mask or bias is read as an added one (:mod:`.directions`)
    *_elementwise("binary", "sub", "__sub__", subtractive=True),
    *_elementwise("binary", "__rsub__", "floor_divide", "pow", "__pow__", "__rpow__",
                  "__floordiv__", "__mod__", "minimum", "maximum"),
    *_elementwise("inplace", "sub_", "__isub__"),
    *_elementwise("float_unary", "rsqrt", "sqrt", "exp", "log", "sin", "cos", "tanh", "sigmoid", "gelu", "silu",
                  "elu", "softplus", "erf", "reciprocal"),
    *_elementwise("same_unary", "relu", "clamp", "clip", "square", "nan_to_num", "sign"),
    # (``-x`` and ``abs(x)`` are ``Tensor.neg`` and ``Tensor.abs`` themselves: one function, two names)
    *_elementwise("same_unary", "neg", aliases=("__neg__",)),
    *_elementwise("same_unary", "abs", aliases=("__abs__",)),
    *_elementwise("compare", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "eq", "ne", "lt", "le", "gt",
                  "ge", "logical_not", "logical_and", "logical_or", "isnan", "isinf"),
    *_elementwise("bitwise", "__and__", "__or__", "__invert__", "__xor__", "bitwise_not"),
    # casts: a tensor argument (``x.type_as(q)``, ``x.to(q)``) gives only a dtype or device, never axes to line up
    *_elementwise("", "float", "half", "bfloat16", "to", "type_as", "type", "detach", "requires_grad_", "cpu", "cuda",
                  "double", "long", "int", "bool", operands=first_operand),
    *_elementwise("", "masked_scatter", "lerp", "addcmul"),
    # -- known on the meta device only -------------------------------------------------------------
    *_meta_only("binary", "divide", "__div__", true_division=True),
    *_meta_only("binary", "multiply", "subtract", "rsub", "remainder", "atan2", "fmod", "__rfloordiv__"),
    *_meta_only("inplace", "clamp_", "fill_", "zero_", "relu_", "pow_"),
    *_meta_only("compare", "logical_xor", "isfinite"),
    *_meta_only("bitwise", "bitwise_and", "bitwise_or"),
    # (one operand, each element on its own: the result keeps every axis of its operand, as ``exp`` and ``neg`` do;
    # Llama 4's attention temperature ``log(floor((positions + 1) / floor_scale) + 1)`` over the tokens)
    *_elementwise("float_unary", "log1p", "expm1", "mish", "selu", "softsign", "logsigmoid", "hardswish",
                  "hardsigmoid", "tanhshrink"),
    *_elementwise("same_unary", "relu6", "leaky_relu", "clamp_min", "clamp_max", "floor", "ceil", "round",
                  "trunc", "hardtanh", "threshold"),
    *_meta_only("same_unary", "positive", aliases=("__pos__",)),
    # -- the traced code's own backward pass (each way torch starts one): counted, not recorded --------------
    OpSpec("backward", "new", None, row=False, starts_backward=True, callable="torch.Tensor.backward"),
    OpSpec("autograd.grad", "new", None, row=False, starts_backward=True, callable="torch.autograd.grad"),
    OpSpec("autograd.backward", "new", None, row=False, starts_backward=True, callable="torch.autograd.backward"),
    # -- calls that only read metadata: not recorded ---------------------------------------------------
    *_cheap("size", "dim", "numel", "__len__", "element_size", "stride", "storage_offset", "is_contiguous",
            "data_ptr", "untyped_storage", "__format__", "__repr__", "is_floating_point", "__hash__", "get_device",
            "is_complex", "dim_order", "nelement", "ndimension", "__contains__", "_is_view", "__reduce_ex__",
            "__deepcopy__", "__setstate__", "has_names", "__dlpack__"),
    # (these hand the values themselves to Python: not recorded, but the tensor was read: :mod:`.unread`)
    *_cheap("__bool__", "item", "tolist", "__index__", "__int__", "__float__", "__iter__", "__array__", "numpy",
            "is_nonzero", reads_values=True),
]
