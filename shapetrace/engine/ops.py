"""The op registry: one entry per torch function or method the tracer knows.

Each :class:`OpSpec` says, for one op, everything the rest of the engine needs to know about it:

* ``names``: how axis names flow from its inputs to its outputs (a function of
  :mod:`shapetrace.engine.propagate`), or None when no name can be proven;
* ``memory``: whether its result aliases its input (``"view"``), may alias it (``"maybe"``: reshape,
  contiguous, indexing), moves the same values into a new buffer (``"copy"``), or computes new
  values (``"new"``);
* ``row``: whether it gets a row in the table (elementwise arithmetic passes names on silently);
* ``params``: the structured parameters recorded at call time (dim, p, training, fill value, the
  parsed einsum subscripts...), so no later step re-reads argument text;
* ``words``: what the op does, in a few plain words.

An op the registry does not know gets :data:`UNKNOWN`: no row, and no names for its outputs
(a name that cannot be proven is not printed). Adding an op means adding one entry here.
Nothing in this module runs torch ops; it reads arguments only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum

from shapetrace.engine import propagate as pr
from shapetrace.engine.directions import fill_params, sdpa_params
from shapetrace.engine.op_args import (
    _conv_params,
    _dim_params,
    _dropout_params,
    _einsum_params,
    _is_tensor,
    _linear_params,
    _norm_params,
    _number,
    _reduce_params,
    _scale_params,
    _scan_params,
    _shape_params,
    _softmax_params,
    addmm_operands,
    all_operands,
    arg,
    first_operand,
    linear_operands,
)
from shapetrace.engine.reductions import REDUCED, REDUCTIONS


class Family(Enum):
    """Ops that diagnostics, diagrams and sentences treat alike: a rule asks for a family, never for
    op names, so ``torch.mm(q, k)`` is checked like ``q @ k`` and ``swapaxes`` is drawn like ``transpose``."""

    NONE = "none"
    RESHAPE = "reshape"               # view, reshape, flatten, unflatten, view_as, reshape_as
    AXIS_ORDER = "axis order"         # transpose, swapaxes, swapdims, permute, movedim, moveaxis, t, mT, T
    EXPAND = "expand"                 # expand, expand_as, broadcast_to
    SIZE_ONE_AXIS = "size-1 axis"     # unsqueeze, squeeze
    SLICE = "slice"                   # narrow, select, __getitem__
    SPLIT = "split"                   # split, chunk, unbind, tensor_split
    JOIN = "join"                     # cat, concat, concatenate (parts lined up along every other axis)
    WRITE = "write"                   # cache[..., s:e, :] = k, index_copy_, copy_: values written in place
    CONTIGUOUS = "contiguous"
    PRODUCT = "product"               # mm, bmm, matmul, @, __rmatmul__, baddbmm, einsum
    PROJECTION = "projection"         # linear, addmm
    FUSED_ATTENTION = "fused attention"   # F.scaled_dot_product_attention
    MODULE_ATTENTION = "module attention"  # nn.MultiheadAttention's functional form
    SOFTMAX = "softmax"               # softmax, log_softmax
    NORMALISE = "normalise"           # layer_norm, rms_norm: over the last axes, which must be features
    MASK_FILL = "mask fill"           # masked_fill, masked_fill_
    ELEMENTWISE = "elementwise"       # +, *, where...: operands lined up by broadcasting
    DROPOUT = "dropout"
    SCAN = "scan"                     # cumsum, cumprod: running sums or products along one axis
    REDUCE = "reduce"                 # sum, mean, max, norm, F.normalize... along axes (.reductions)
    TRIANGLE = "triangle"             # tril, triu: a causal mask is built with one
    OTHER = "other"


@dataclass(frozen=True)
class OpSpec:
    """What shapetrace knows about one op."""

    name: str
    memory: str                       # "view" | "maybe" | "copy" | "new"
    names: Callable | None = None     # (Call) -> list of axes per output; None: outputs unnamed
    row: bool = True
    params: Callable[[tuple, dict], dict] | None = None
    words: str = ""
    operands: Callable[[tuple, dict], list] | None = None   # which arguments are the operands
    inplace: bool = False
    opens: bool = False               # a composite whose inner ops are recorded (nn.MultiheadAttention)
    params_read_values: bool = False  # its params read tensor values (else: arguments, shapes, dtypes)
    family: Family = Family.OTHER     # which ops rules, diagrams and sentences treat alike
    copies_inside: bool = False       # may copy an operand it cannot fold into one batch (:mod:`.hidden`)
    contraction: str = ""             # a product's rule: "matrix" (last axis · second to last), "subscripts"
    sized: str = ""                   # sizes read from axes name its result: "shape" (zeros(B, T)), "count"
    #                                   (arange(n)), "grown" (expand(B, -1, -1)); "" if not (:mod:`.sizes`)
    replay: str = ""                  # moves elements: the function its calls are replayed as to follow
    #                                   them (:mod:`.elements`), "torch.gather", "Tensor.unfold"; "" if not
    #: the function this op is, as a dotted path, for an op whose ``__name__`` another op shares
    #: (``torch.nn.functional.unfold`` copies blocks into columns; ``Tensor.unfold`` makes windows, a view)
    callable: str = ""
    rank: int | None = None           # operands of one rank only (torch.mm: matrices; torch.bmm: 3-D)
    stacks: bool = False              # its result gets a new axis (the others join along an existing one)
    write: str = ""                   # how a write lines its values up: "whole", "rows" or "index"
    short: str = ""                   # the table's name for it, where the name is long
    shows_first: bool = False         # the table's argument text shows its first argument (a list, an equation)
    stride_bound: bool = False        # raises, rather than copies, when the strides cannot express the shape
    shape_of_other: bool = False      # takes the shape of its second operand (``x.view_as(other)``)


# ---------------------------------------------------------------------------
# the registry
# ---------------------------------------------------------------------------

def _views(names: list[str], fn: Callable, words: str, params: Callable | None = None, **facts) -> list[OpSpec]:
    return [OpSpec(n, "view", fn, params=params, words=words, **facts) for n in names]


_ENTRIES: list[OpSpec] = [
    # -- the view family: same storage, new shape and strides ------------------------------
    *_views(["view"], pr.reshape, "same memory read with a new shape", _shape_params, stride_bound=True),
    *_views(["view_as"], pr.reshape, "same memory read with a new shape", stride_bound=True, shape_of_other=True),
    OpSpec("reshape", "maybe", pr.reshape, params=_shape_params,
           words="a new shape: a view when the strides allow, else a copy"),
    OpSpec("reshape_as", "maybe", pr.reshape, words="a new shape: a view when the strides allow, else a copy",
           shape_of_other=True),
    OpSpec("flatten", "maybe", pr.reshape, words="merges axes into one"),
    OpSpec("unflatten", "view", pr.reshape, words="splits one axis into several"),
    *_views(["transpose", "swapaxes", "swapdims"], pr.transpose, "swaps two axes (strides swap, no data moves)",
            lambda a, k: {"dims": [arg(a, k, 1, "dim0"), arg(a, k, 2, "dim1")]}),
    *_views(["permute"], pr.permute, "reorders the axes (strides reorder, no data moves)"),
    *_views(["movedim", "moveaxis"], pr.movedim, "moves axes to new positions"),
    *_views(["t"], pr.t, "swaps the two axes of a matrix"),
    *_views(["T"], pr.reverse, "reverses the order of all axes"),
    *_views(["mT", "mH", "adjoint"], pr.swap_last, "swaps the last two axes"),
    *_views(["broadcast_to"], pr.expand, "repeats values along size-1 axes with stride 0"),
    *_views(["expand_as"], pr.expand, "repeats values along size-1 axes with stride 0", shape_of_other=True),
    OpSpec("expand", "view", pr.expand, words="repeats values along size-1 axes with stride 0", sized="grown"),
    OpSpec("arange", "new", None, row=False, words="counts 0, 1, ... n - 1", sized="count"),
    *(OpSpec(name, "new", None, row=False, words="a new tensor of a shape", sized="shape")
      for name in ("zeros", "ones", "empty", "full", "rand", "randn")),
    *_views(["unsqueeze"], pr.unsqueeze, "adds an axis of size 1", _dim_params()),
    *_views(["squeeze"], pr.squeeze, "removes axes of size 1"),
    *_views(["narrow"], pr.narrow, "keeps a range along one axis",
            lambda a, k: {"dim": arg(a, k, 1, "dim"), "start": _number(arg(a, k, 2, "start")),
                          "length": _number(arg(a, k, 3, "length"))}),
    *_views(["select"], pr.select, "picks one index along an axis, dropping it", _dim_params()),
    OpSpec("__getitem__", "maybe", pr.getitem, words="indexing"),
    *_views(["unbind"], pr.unbind, "cuts a tensor into its slices along an axis", _dim_params()),
    *_views(["split", "chunk", "tensor_split", "split_with_sizes"], pr.split, "cuts an axis into pieces",
            lambda a, k: {"dim": arg(a, k, 2, "dim", 0)}),
    *_views(["diagonal"], None, "the diagonal"),
    # writes into a tensor (a cache): a row each (the table shows where a cache is filled, and a write
    # that puts tokens where heads belong is reported there); the names they prove are read after the run
    OpSpec("__setitem__", "copy", None, inplace=True, write="index", words="writes values into part of this tensor"),
    OpSpec("index_copy_", "copy", None, inplace=True, write="rows", words="writes rows at the given indices"),
    OpSpec("copy_", "copy", None, inplace=True, write="whole", words="copies values into this tensor"),
    *_views(["view_as_complex"], pr.complex_pairs, "reads each pair of reals as one complex number"),
    *_views(["view_as_real"], pr.real_pairs, "reads each complex number as its pair of reals"),
    *_views(["unfold"], pr.windows, "windows along an axis (overlapping ones share memory)"),
    *_views(["as_strided"], pr.strided, "any shape and strides over the same memory"),
    # in place: the tensor itself gets new metadata (the same storage, no data moves)
    *(OpSpec(n, "view", fn, params=params, inplace=True, words=words) for n, fn, params, words in (
        ("transpose_", pr.transpose, None, "swaps two axes of this tensor in place"),
        ("swapaxes_", pr.transpose, None, "swaps two axes of this tensor in place"),
        ("swapdims_", pr.transpose, None, "swaps two axes of this tensor in place"),
        ("t_", pr.t, None, "swaps the two axes of this matrix in place"),
        ("unsqueeze_", pr.unsqueeze, _dim_params(), "adds an axis of size 1 to this tensor in place"),
        ("squeeze_", pr.squeeze, None, "removes axes of size 1 from this tensor in place"),
        ("as_strided_", None, None, "gives this tensor any shape and strides in place"),
        ("resize_", None, None, "gives this tensor a new shape in place (its values may be lost)"),
        ("set_", None, None, "points this tensor at other memory"))),
    # -- copies: the same values in a new buffer -----------------------------------------------
    OpSpec("contiguous", "maybe", pr.same, words="lays the values out row-major (a copy unless they already are)"),
    OpSpec("clone", "copy", pr.same, words="copies the values into a new buffer"),
    OpSpec("repeat", "copy", pr.repeat, words="tiles the tensor"),
    OpSpec("tile", "copy", pr.tile, words="tiles the tensor"),
    OpSpec("repeat_interleave", "copy", pr.repeat_interleave, words="repeats each element in place"),
    OpSpec("cat", "copy", pr.cat, shows_first=True, params=lambda a, k: {"dim": arg(a, k, 1, "dim", 0)},
           words="joins tensors along an axis", operands=all_operands),
    OpSpec("stack", "copy", pr.stack, shows_first=True, stacks=True,
           params=lambda a, k: {"dim": arg(a, k, 1, "dim", 0)},
           words="stacks tensors along a new axis", operands=all_operands),
    OpSpec("roll", "copy", pr.same, words="rotates the values along axes (same names, shifted positions)"),
    OpSpec("flip", "copy", pr.same, words="reverses the order along axes"),
    OpSpec("pad", "copy", pr.pad, words="adds padding around axes"),
    OpSpec("gather", "copy", pr.gather, words="picks values along an axis by index", params=_dim_params()),
    OpSpec("take_along_dim", "copy", pr.take_along_dim, words="picks values along an axis by index"),
    OpSpec("index_select", "copy", pr.index_select, words="picks slices along an axis by index",
           params=_dim_params()),
    *(OpSpec(name, "copy", pr.first_broadcast, params=fill_params, words="fills masked positions",
             inplace=name.endswith("_"), params_read_values=True) for name in ("masked_fill", "masked_fill_")),
    OpSpec("where", "new", pr.broadcast, words="picks from two tensors by a condition"),
    OpSpec("tril", "copy", pr.same, words="keeps the lower triangle"),
    OpSpec("triu", "copy", pr.same, words="keeps the upper triangle"),
    # -- compute: new values -------------------------------------------------------------------------
    OpSpec("linear", "new", pr.linear, shows_first=True, params=_linear_params, operands=linear_operands,
           words="a linear projection of the last axis"),
    OpSpec("addmm", "new", pr.addmm, params=_scale_params, operands=addmm_operands,
           words="bias + x @ W (a projection written as a matrix product)"),
    OpSpec("mm", "new", pr.matmul, rank=2, words="matrix product"),
    OpSpec("bmm", "new", pr.matmul, rank=3, words="batched matrix product"),
    OpSpec("baddbmm", "new", pr.baddbmm, params=_scale_params, operands=addmm_operands,
           words="base + a @ b, batched"),
    OpSpec("matmul", "new", pr.matmul, copies_inside=True, words="matrix product"),
    *(OpSpec(f"conv{n}d", "new", pr.conv, params=_conv_params, operands=first_operand,
             words="slides a filter over the positions: channels in, channels out") for n in (1, 2, 3)),
    OpSpec("einsum", "new", pr.einsum, params=_einsum_params, operands=all_operands, words="einsum",
           shows_first=True, contraction="subscripts"),
    OpSpec("scaled_dot_product_attention", "new", pr.sdpa, params=sdpa_params, params_read_values=True, short="sdpa",
           words="softmax(q @ kᵀ · scale) @ v in one kernel"),
    OpSpec("softmax", "new", pr.same, params=_softmax_params, words="normalises into weights that sum to 1"),
    OpSpec("log_softmax", "new", pr.same, params=_softmax_params, words="log of softmax"),
    OpSpec("cumsum", "new", pr.same, params=_scan_params, words="running sums along one axis"),
    OpSpec("cumprod", "new", pr.same, params=_scan_params, words="running products along one axis"),
    OpSpec("layer_norm", "new", pr.same, params=_norm_params, words="normalises each token's features"),
    OpSpec("rms_norm", "new", pr.same, params=_norm_params, words="normalises each token's features"),
    OpSpec("group_norm", "new", pr.same, words="normalises groups of channels"),
    OpSpec("embedding", "new", pr.embedding, words="looks up one vector per token id",
           operands=lambda a, k: [t for t in (a[:1] or [k.get("input")]) if _is_tensor(t)]),
    OpSpec("dropout", "new", pr.same, params=_dropout_params, words="zeroes values at random"),
    *(OpSpec(name, "new", names, params=params, words=words) for name, words, params, names in REDUCTIONS),
    *(OpSpec(name, "new", pr.reduce, params=_reduce_params, row=False, words="the index of the extreme over an axis")
      for name in ("argmax", "argmin")),
    OpSpec("multi_head_attention_forward", "new", None, opens=True, row=False, short="mha_forward",
           words="nn.MultiheadAttention (its inner ops are recorded one by one)"),
]

#: ops identified by their function, not by its ``__name__`` (which another op of the registry shares)
BY_CALLABLE: tuple[OpSpec, ...] = (
    OpSpec("F.unfold", "copy", None, operands=first_operand, callable="torch.nn.functional.unfold",
           words="copies each sliding block of the input into one column (im2col): the blocks' values are "
                 "copied, overlapping ones more than once"),
)

#: elementwise ops: names broadcast silently, no row of their own
ELEMENTWISE = (
    "add", "sub", "mul", "div", "true_divide", "floor_divide", "neg", "pow", "rsqrt", "sqrt", "exp", "log",
    "sin", "cos", "tanh", "sigmoid", "relu", "gelu", "silu", "elu", "softplus", "abs", "clamp", "clip",
    "float", "half", "bfloat16", "to", "type_as", "type", "__add__", "__radd__", "__iadd__", "__sub__",
    "__rsub__", "__isub__", "__mul__", "__rmul__", "__imul__", "__truediv__", "__rtruediv__", "__itruediv__",
    "__neg__", "__pow__", "__rpow__", "__floordiv__", "__mod__", "__eq__", "__ne__", "__lt__", "__le__",
    "__gt__", "__ge__", "__and__", "__or__", "__invert__", "__xor__", "eq", "ne", "lt", "le", "gt", "ge",
    "logical_not", "logical_and", "logical_or", "bitwise_not", "add_", "mul_", "div_", "sub_", "masked_scatter",
    "detach", "requires_grad_", "cpu", "cuda", "double", "long", "int", "bool", "erf", "reciprocal",
    "square", "lerp", "addcmul", "minimum", "maximum", "isnan", "isinf", "nan_to_num", "sign",
)
for _name in ELEMENTWISE:
    _ENTRIES.append(OpSpec(_name, "new", pr.broadcast, row=False, words="elementwise"))

#: the family of each op (an op not listed is :attr:`Family.OTHER`)
_FAMILIES: dict[Family, tuple[str, ...]] = {
    Family.RESHAPE: ("view", "view_as", "reshape", "reshape_as", "flatten", "unflatten"),
    Family.AXIS_ORDER: ("transpose", "swapaxes", "swapdims", "permute", "movedim", "moveaxis", "t", "T", "mT",
                        "mH", "adjoint"),
    Family.EXPAND: ("expand", "expand_as", "broadcast_to"),
    Family.SIZE_ONE_AXIS: ("unsqueeze", "squeeze"),
    Family.SLICE: ("narrow", "select", "__getitem__"),
    Family.SPLIT: ("split", "chunk", "unbind", "tensor_split", "split_with_sizes"),
    Family.JOIN: ("cat", "concat", "concatenate"),
    Family.WRITE: ("__setitem__", "index_copy_", "copy_"),
    Family.CONTIGUOUS: ("contiguous",),
    Family.PRODUCT: ("mm", "bmm", "matmul", "baddbmm", "einsum"),
    Family.PROJECTION: ("linear", "addmm"),
    Family.FUSED_ATTENTION: ("scaled_dot_product_attention",),
    Family.MODULE_ATTENTION: ("multi_head_attention_forward",),
    Family.SOFTMAX: ("softmax", "log_softmax"),
    Family.NORMALISE: ("layer_norm", "rms_norm"),
    Family.MASK_FILL: ("masked_fill", "masked_fill_"),
    Family.ELEMENTWISE: ("where", *ELEMENTWISE),
    Family.DROPOUT: ("dropout",),
    Family.SCAN: ("cumsum", "cumprod"),
    Family.REDUCE: REDUCED,
    Family.TRIANGLE: ("tril", "triu"),
}
_FAMILY_OF = {name: family for family, names in _FAMILIES.items() for name in names}
#: ops that move or select elements, and the function each is replayed as on coordinate tensors
_REPLAYS = {
    **{name: f"torch.{name}" for name in ("gather", "index_select", "take_along_dim", "cat", "concat",
                                           "concatenate", "stack", "roll", "flip", "repeat_interleave",
                                           "tile", "split", "chunk", "unbind", "tensor_split", "as_strided")},
    **{name: f"Tensor.{name}" for name in ("__getitem__", "repeat", "expand", "unfold", "split_with_sizes")},
    "pad": "torch.nn.functional.pad",
}


def _with_facts(spec: OpSpec) -> OpSpec:
    """Its family; a product contracts last axis · second to last unless its entry says otherwise."""
    family = _FAMILY_OF.get(spec.name, Family.OTHER)
    contraction = (spec.contraction or "matrix") if family is Family.PRODUCT else ""
    return replace(spec, family=family, contraction=contraction, replay=_REPLAYS.get(spec.name, ""))


_ENTRIES = [_with_facts(spec) for spec in _ENTRIES]

REGISTRY: dict[str, OpSpec] = {spec.name: spec for spec in _ENTRIES}
# (an op known by its function is recorded under its own name, which no function's __name__ is)
REGISTRY.update({spec.name: _with_facts(spec) for spec in BY_CALLABLE})
#: aliases torch reports under other names
#: ``a.__rmatmul__(b)`` is ``b @ a``: the same op with its operands the other way round
REGISTRY["__rmatmul__"] = OpSpec("matmul", "new", pr.matmul, words="matrix product", family=Family.PRODUCT,
                                 copies_inside=True, contraction="matrix",
                                 operands=lambda a, k: [t for t in (a[1:2] + a[:1]) if _is_tensor(t)])
for _alias, _target in (("concat", "cat"), ("concatenate", "cat"), ("__matmul__", "matmul"), ("dropout1d", "dropout"),
                        ("dropout2d", "dropout"), ("F_pad", "pad")):
    REGISTRY.setdefault(_alias, REGISTRY[_target])

def _additive_params(args: tuple, kwargs: dict) -> dict:
    """Does the added tensor hide scores (values at or below -1e4: an additive mask)? Read on CPU only."""
    tensors = [a for a in args[:2] if _is_tensor(a)]
    if len(tensors) != 2:
        return {}
    mask = min(tensors, key=lambda t: t.numel())
    if mask.device.type != "cpu" or not mask.is_floating_point() or mask.numel() == 0:
        return {}
    return {"hides": bool(mask.min().item() <= -1e4)}


def by_parameter_matrix(spec: OpSpec) -> OpSpec:
    """A matrix product whose right operand is a 2-d matrix made from module parameters only (the
    inference knows which): the same op, named as a projection (:func:`.propagate.parameter_product`)."""
    found = _BY_PARAMETER_MATRIX.get(spec.name)
    if found is None:
        found = _BY_PARAMETER_MATRIX[spec.name] = replace(spec, names=pr.parameter_product)
    return found


_BY_PARAMETER_MATRIX: dict[str, OpSpec] = {}


#: an addition onto attention scores gets a row of its own: it is where additive masks and biases go in
SCORE_ADD = OpSpec("add", "new", pr.broadcast, params=_additive_params, operands=all_operands, params_read_values=True,
                   words="adds a mask or bias to the scores", family=Family.ELEMENTWISE)
ADDITIVE = frozenset({"add", "__add__", "__radd__", "__iadd__", "add_"})

#: anything else: no row, no names (a name that cannot be proven is not printed)
UNKNOWN = OpSpec("?", "new", None, row=False, words="")
#: calls that only read metadata: not recorded at all
CHEAP = frozenset({
    "size", "dim", "numel", "__len__", "element_size", "stride", "storage_offset", "is_contiguous",
    "data_ptr", "untyped_storage", "__format__", "__repr__", "__bool__", "item", "tolist", "__index__",
    "__int__", "__float__", "is_floating_point", "__get__", "__set__", "__hash__", "get_device", "is_complex",
    "dim_order", "nelement", "ndimension", "__iter__", "__contains__", "__array__", "numpy", "_is_view",
    "__reduce_ex__", "__deepcopy__", "__setstate__", "has_names", "is_nonzero", "__dlpack__",
})
#: property getters the tracer records (``x.T``, ``x.mT``); others are cheap reads
GETTERS = frozenset({"T", "mT", "mH", "H"})


# ---------------------------------------------------------------------------
# meta shapes: which rule of :mod:`.meta` computes an op's output on the meta device
# ---------------------------------------------------------------------------

#: each meta rule and its ops (a later rule wins for an op listed twice: masked_fill_ is a masked fill)
_META_KINDS: dict[str, tuple[str, ...]] = {
    "binary": ("add", "sub", "mul", "div", "true_divide", "divide", "multiply", "subtract", "rsub", "pow",
               "maximum", "minimum", "remainder", "floor_divide", "atan2", "fmod",
               "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
               "__rtruediv__", "__div__", "__pow__", "__rpow__", "__floordiv__", "__rfloordiv__", "__mod__"),
    "inplace": ("add_", "sub_", "mul_", "div_", "__iadd__", "__isub__", "__imul__", "__itruediv__", "masked_fill_",
                "clamp_", "fill_", "zero_", "relu_", "pow_"),
    "compare": ("eq", "ne", "lt", "le", "gt", "ge", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
                "logical_and", "logical_or", "logical_xor", "logical_not", "isnan", "isinf", "isfinite"),
    "bitwise": ("__and__", "__or__", "__xor__", "__invert__", "bitwise_and", "bitwise_or", "bitwise_not"),
    "float_unary": ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "sin", "cos", "erf", "reciprocal", "log1p",
                    "expm1", "softplus", "gelu", "silu", "mish", "elu", "selu", "softsign", "logsigmoid",
                    "hardswish", "hardsigmoid", "tanhshrink"),
    "same_unary": ("neg", "__neg__", "abs", "__abs__", "relu", "relu6", "leaky_relu", "square", "clamp", "clip",
                   "clamp_min", "clamp_max", "sign", "floor", "ceil", "round", "trunc", "hardtanh", "nan_to_num",
                   "__pos__", "positive", "threshold"),
    "softmax": ("softmax", "log_softmax", "_softmax"),
    "norm": ("layer_norm", "rms_norm", "group_norm", "normalize", "local_response_norm"),
    "reduce": ("sum", "mean", "amax", "amin", "std", "var", "prod", "logsumexp", "norm", "argmax", "argmin",
               "all", "any"),
    "masked_fill": ("masked_fill", "masked_fill_"),
    "where": ("where",),
    "dropout": ("dropout",),
    "tri": ("tril", "triu"),
    "matmul": ("matmul", "__matmul__", "__rmatmul__", "bmm", "mm"),
    "linear": ("linear",),
    "sdpa": ("scaled_dot_product_attention",),
    "einsum": ("einsum",),
    "embedding": ("embedding",),
    "cat": ("cat", "concat", "concatenate", "stack"),
    "mha": ("multi_head_attention_forward",),
    "max_min": ("max", "min"),
    "factory": ("randn", "rand", "randint"),
}
_META_KIND = {op: kind for kind, names in _META_KINDS.items() for op in names}
#: divisions whose integer operands give a float result (without a rounding mode)
_TRUE_DIVISION = frozenset({"div", "true_divide", "divide", "__truediv__", "__rtruediv__", "__div__"})


class ReduceDtype(Enum):
    """The dtype of a reduction's result."""

    SAME = "same"                      # mean, amax...: the input's
    INDEX = "index"                    # argmax, argmin: int64
    BOOL = "bool"                      # all, any
    INTEGERS_WIDEN = "integers widen"  # sum, prod: integer input gives int64


_REDUCE_DTYPE = {"argmax": ReduceDtype.INDEX, "argmin": ReduceDtype.INDEX, "all": ReduceDtype.BOOL,
                 "any": ReduceDtype.BOOL, "sum": ReduceDtype.INTEGERS_WIDEN, "prod": ReduceDtype.INTEGERS_WIDEN}


def meta_kind(op: str) -> str | None:
    """Which rule of :mod:`.meta` computes ``op`` on meta tensors (None: torch's own kernel)."""
    return _META_KIND.get(op)


def divides_to_float(op: str) -> bool:
    return op in _TRUE_DIVISION


def is_inplace(op: str) -> bool:
    """Writes into its first operand (``masked_fill_``, ``add_``, ``x += y``)."""
    return REGISTRY.get(op, UNKNOWN).inplace or _META_KIND.get(op) == "inplace"


def required_rank(op: str) -> int | None:
    return REGISTRY.get(op, UNKNOWN).rank


def reversed_operands(op: str) -> bool:
    """``a.__rmatmul__(b)`` is ``b @ a``."""
    return op == "__rmatmul__"


def stacks(op: str) -> bool:
    return REGISTRY.get(op, UNKNOWN).stacks


def reduce_dtype(op: str) -> ReduceDtype:
    return _REDUCE_DTYPE.get(op, ReduceDtype.SAME)


def spec_for(op: str) -> OpSpec:
    return REGISTRY.get(op, UNKNOWN)


class _Families(dict):
    """op name -> its family, read by every rule over every event: one lookup in C, no Python call
    (an op added to the registry later is looked up there)."""

    def __missing__(self, op: str) -> Family:
        return REGISTRY.get(op, UNKNOWN).family


_FAMILY_LOOKUP = _Families({op: spec.family for op, spec in REGISTRY.items()})
#: ``family_of(op)``: the family of a recorded op name (``swapaxes`` -> :attr:`Family.AXIS_ORDER`)
family_of = _FAMILY_LOOKUP.__getitem__


#: families whose ops re-read the same values with a new shape, order or window (or copy them in a new
#: order): each gets a memory-layout diagram and a sentence about its strides
LAYOUT_FAMILIES = frozenset({Family.RESHAPE, Family.AXIS_ORDER, Family.CONTIGUOUS, Family.EXPAND,
                             Family.SIZE_ONE_AXIS, Family.SLICE})
#: families that turn scores into attention weights (softmax, or a fused kernel doing it inside)
ATTENTION_FAMILIES = frozenset({Family.SOFTMAX, Family.FUSED_ATTENTION, Family.MODULE_ATTENTION})


#: the layout methods ``shapetrace strides`` replays from a chain's text (``x.view(2, 3).mT[0]``)
CHAIN_METHODS = frozenset({"view", "reshape", "transpose", "permute", "contiguous", "expand", "unsqueeze",
                           "squeeze", "flatten", "unflatten", "narrow", "select"})
#: the attributes a chain may read (``x.mT``); indexing is :func:`is_indexing`
CHAIN_ATTRIBUTES = frozenset({"mT"})

def fails_on_strides(op: str) -> bool:
    """``view``/``view_as``: raise when the input's strides cannot express the new shape (reshape copies)."""
    return REGISTRY.get(op, UNKNOWN).stride_bound


def views_to_a_shape(op: str) -> bool:
    """``view(sizes)``: never copies, and takes the new shape as numbers (its failure is explained from the
    input's strides)."""
    spec = REGISTRY.get(op, UNKNOWN)
    return spec.memory == "view" and spec.params is _shape_params


def takes_shape_of_other(op: str) -> bool:
    return REGISTRY.get(op, UNKNOWN).shape_of_other


def is_indexing(op: str) -> bool:
    """``x[...]``: the subscript call."""
    return op == "__getitem__"


def shows_first_argument(op: str) -> bool:
    """Does the table's argument text show the first argument (``cat``'s list, ``einsum``'s equation)?"""
    return REGISTRY.get(op, UNKNOWN).shows_first


def short_name(op: str) -> str:
    return REGISTRY.get(op, UNKNOWN).short or op


#: elementwise ops that scale by a number (attention's 1/√d_k): their frozen arguments are read after the run
#: (for engine/capture.py's FROZEN_PASSES and engine/infer/rows.py's SCALING_OPS, which still spell them out)
SCALING = frozenset({"div", "true_divide", "__truediv__", "__itruediv__", "div_", "mul", "__mul__", "__rmul__",
                     "__imul__", "mul_"})
#: ops that pick one index of an axis (``x[0]``, ``select``): of a fused qkv axis, one of q, k, v
PICKS = frozenset({"__getitem__", "select"})


def moves_layout(op: str) -> bool:
    """Does ``op`` only move or re-read values (a view, a transpose, a slice, a contiguous copy)?"""
    return family_of(op) in LAYOUT_FAMILIES


def is_matrix_product(op: str) -> bool:
    """A product over the first operand's last axis and the second's second to last (``@``, mm, bmm,
    baddbmm): the product family, less einsum, whose subscripts say what it contracts."""
    return REGISTRY.get(op, UNKNOWN).contraction == "matrix"


def is_basic_indexing(op: str) -> bool:
    """``x[index]``: which axes it keeps whole is read from the index (:func:`.writes.written_axes`)."""
    return REGISTRY.get(op, UNKNOWN).names is pr.getitem


def is_convolution(op: str) -> bool:
    """conv1d, conv2d, conv3d: a filter slid over positions (channels in, channels out)."""
    return REGISTRY.get(op, UNKNOWN).names is pr.conv


def contracts_by_subscripts(op: str) -> bool:
    """An einsum: what it contracts is in its recorded ``subscripts``."""
    return REGISTRY.get(op, UNKNOWN).contraction == "subscripts"


#: families whose operands torch lines up by broadcasting (``scores + mask``, ``q * cos``, ``masked_fill``)
BROADCAST_FAMILIES = frozenset({Family.ELEMENTWISE, Family.MASK_FILL})


def lines_up_by_broadcast(op: str) -> bool:
    """Does ``op`` line its operands up by broadcasting (so lined-up axes must mean the same thing)?"""
    return REGISTRY.get(op, UNKNOWN).family in BROADCAST_FAMILIES


def ops_of(family: Family) -> frozenset[str]:
    """Every op name of a family, aliases included (``matmul``, ``__matmul__``, ``mm``...)."""
    return frozenset(name for name, spec in REGISTRY.items() if spec.family is family)


def record_params(spec: OpSpec, args: tuple, kwargs: dict) -> dict:
    """The structured parameters of one call (never raises: a parameter it cannot read is left out)."""
    if spec.params is None:
        return {}
    try:
        return {k: v for k, v in spec.params(args, kwargs).items() if v is not None}
    except (IndexError, TypeError, ValueError, AttributeError):
        return {}


def separates(op: str) -> bool:
    """Does ``op`` take a tensor apart along one axis (all its parts, or one of them)?"""
    return family_of(op) is Family.SPLIT or op in PICKS


def selects_along_dim(op: str) -> bool:
    """``select(dim, index)``: one entry along an axis given by number (not by an index expression)."""
    return op == "select"


def write_kind(op: str) -> str | None:
    """``"whole"`` (``copy_``: broadcast onto all of it), ``"rows"`` (``index_copy_(dim, ...)``),
    ``"index"`` (``t[index] = v``), or None for an op that writes nothing."""
    return REGISTRY.get(op, UNKNOWN).write or None


def separated_axis(op: str, args: tuple, kwargs: dict, ndim: int) -> int | None:
    """The axis ``op`` takes apart: ``unbind(dim)``, ``chunk(n, dim)``, ``select(dim, i)``, or the one
    axis an index picks a single entry of (``x[..., 0, :]``, ``x[0]``)."""
    if op == "unbind":
        return arg(args, kwargs, 1, "dim", 0)
    if op in ("chunk", "split", "tensor_split"):
        return arg(args, kwargs, 2, "dim", 0)
    if op == "select":
        return arg(args, kwargs, 1, "dim")
    item = args[1] if len(args) > 1 else None
    items = item if isinstance(item, tuple) else (item,)
    if sum(type(i) is int for i in items) != 1 or any(type(i) not in (int, slice, type(None), type(...))
                                                       for i in items):
        return None
    if ... in items:
        cut = items.index(...)
        before, after = items[:cut], items[cut + 1:]
        if any(type(i) is int for i in after):
            consumed = [i for i in after if i is not None]
            return ndim - len(consumed) + [i for i in after if i is not None].index(
                next(i for i in after if type(i) is int))
        items = before
    consumed = [i for i in items if i is not None]
    return next(k for k, i in enumerate(consumed) if type(i) is int)
