"""What an op's arguments say: the readers each :class:`~.ops.OpSpec` names for its params (the
dims, shapes, scales, masks recorded with a call) and for which arguments are its operands.

Pure Python (tensors are read through their attributes only, never by importing torch).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


def arg(args: tuple, kwargs: dict, pos: int, name: str, default: Any = None) -> Any:
    """Argument ``name`` given by keyword or at position ``pos`` (``args[0]`` is the tensor)."""
    if name in kwargs:
        return kwargs[name]
    return args[pos] if len(args) > pos else default


def _number(value: Any) -> Any:
    """A plain number (a 0-d tensor's value is read only on CPU; never a sync on GPU)."""
    if isinstance(value, (bool, int, float)):
        return value
    if hasattr(value, "dim") and value.dim() == 0 and value.device.type == "cpu":
        return value.item()
    return None


def _shape_params(args: tuple, kwargs: dict) -> dict:
    """The shape a view/reshape asks for, as whole numbers (``-1`` kept): ``view(B, T, -1)``."""
    sizes = args[1:] if len(args) > 1 else (kwargs.get("shape") or kwargs.get("size") or ())
    if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)) or (len(sizes) == 1 and hasattr(sizes[0], "__len__")):
        sizes = sizes[0]
    shape = [_number(s) for s in sizes]
    return {"shape": shape} if shape and all(isinstance(s, int) for s in shape) else {}


def _dim_params(pos: int = 1) -> Callable[[tuple, dict], dict]:
    def read(args: tuple, kwargs: dict) -> dict:
        return {"dim": arg(args, kwargs, pos, "dim")}
    return read


def _reduce_params(args: tuple, kwargs: dict) -> dict:
    dim = arg(args, kwargs, 1, "dim")
    return {"dim": list(dim) if isinstance(dim, (list, tuple)) else dim,
            "keepdim": bool(arg(args, kwargs, 2, "keepdim", False))}


def _dropout_params(args: tuple, kwargs: dict) -> dict:
    return {"p": _number(arg(args, kwargs, 1, "p", 0.5)), "training": bool(arg(args, kwargs, 2, "training", True))}


def _norm_params(args: tuple, kwargs: dict) -> dict:
    """How many trailing axes ``layer_norm``/``rms_norm`` normalise over (``normalized_shape``)."""
    shape = arg(args, kwargs, 1, "normalized_shape")
    if isinstance(shape, int):
        return {"normalised": 1}
    return {"normalised": len(shape)} if isinstance(shape, (tuple, list)) else {}


def _linear_params(args: tuple, kwargs: dict) -> dict:
    weight = arg(args, kwargs, 1, "weight")
    bias = arg(args, kwargs, 2, "bias")
    params = {"weight": list(weight.shape) if hasattr(weight, "shape") else None, "bias": bias is not None}
    if getattr(weight, "is_parameter", False) is True or type(weight).__name__ == "Parameter":
        params["module_weight"] = True   # (nn.Linear's own weight: its rows, the width made, are the module's)
    return params


def _conv_params(args: tuple, kwargs: dict) -> dict:
    weight = arg(args, kwargs, 1, "weight")
    return {"weight": list(weight.shape) if hasattr(weight, "shape") else None,
            "stride": _plain(arg(args, kwargs, 3, "stride", 1)), "padding": _plain(arg(args, kwargs, 4, "padding", 0)),
            "dilation": _plain(arg(args, kwargs, 5, "dilation", 1))}


def _plain(value):
    return list(value) if isinstance(value, (tuple, list)) else value


def _einsum_params(args: tuple, kwargs: dict) -> dict:
    equation = args[0] if args and isinstance(args[0], str) else kwargs.get("equation")
    if not isinstance(equation, str):
        return {}
    operands = args[1:] if args and isinstance(args[0], str) else kwargs.get("operands", ())
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = operands[0]
    ranks = [len(t.shape) if hasattr(t, "shape") else None for t in operands]
    parsed = parse_einsum(equation, ranks)
    return {"equation": equation, **({"subscripts": parsed} if parsed else {})}


def _tensordot_params(args: tuple, kwargs: dict) -> dict:
    """``torch.tensordot(a, b, dims)`` read as the einsum it is: ``dims`` pairs axes of ``a`` with axes of
    ``b`` (an int ``n``: ``a``'s last ``n`` with ``b``'s first ``n``); the output is ``a``'s other axes, then
    ``b``'s, in order. ``tensordot(x, W, dims=([-1], [0]))`` on ``x`` ``[B, F, E]`` is ``'abc,cd->abd'``.

    >>> import torch
    >>> _tensordot_params((torch.ones(2, 3, 4), torch.ones(4, 5)), {"dims": ([-1], [0])})["equation"]
    'abc,cd->abd'
    """
    kwargs = kwargs or {}
    a, b = (args[i] if len(args) > i else kwargs.get(name) for i, name in ((0, "a"), (1, "b")))
    dims = args[2] if len(args) > 2 else kwargs.get("dims", 2)
    if not (hasattr(a, "shape") and hasattr(b, "shape")):
        return {}
    ra, rb = len(a.shape), len(b.shape)
    if isinstance(dims, int):
        pairs = (list(range(ra - dims, ra)), list(range(dims)))
    elif isinstance(dims, (list, tuple)) and len(dims) == 2:
        pairs = tuple([d] if isinstance(d, int) else list(d) for d in dims)
    else:
        return {}
    if len(pairs[0]) != len(pairs[1]) or not all(isinstance(d, int) for side in pairs for d in side):
        return {}
    da, db = [d % ra for d in pairs[0]], [d % rb for d in pairs[1]]
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    ta = [next(letters) for _ in range(ra)]
    tb = [ta[da[db.index(j)]] if j in db else next(letters) for j in range(rb)]
    out = [c for i, c in enumerate(ta) if i not in da] + [c for j, c in enumerate(tb) if j not in db]
    parsed = {"inputs": ["".join(ta), "".join(tb)], "output": "".join(out)}
    return {"equation": f"{parsed['inputs'][0]},{parsed['inputs'][1]}->{parsed['output']}", "subscripts": parsed}


def _sdpa_params(args: tuple, kwargs: dict) -> dict:
    mask = arg(args, kwargs, 3, "attn_mask")
    return {"is_causal": bool(arg(args, kwargs, 5, "is_causal", False)), "scale": _number(kwargs.get("scale")),
            "has_mask": mask is not None, "enable_gqa": bool(kwargs.get("enable_gqa", False)),
            **(mask_facts(mask) if _is_tensor(mask) else {})}


#: a boolean mask is read (for its pattern) only on the CPU and up to this many elements
MASK_READ_LIMIT = 1 << 16


def mask_facts(mask: Any) -> dict:
    """What a boolean attention mask's values say, read only where that costs no device sync.

    ``mask_read`` says whether the values were read (or why not); when they were,
    ``mask_blind_rows`` counts the mask's rows (last axis: keys) with no True entry, ``mask_blind_at``
    is the index of the first, and ``mask_pattern`` is ``"causal"`` for ``ones(L, S).tril(S - L)``
    (True on the diagonal and below), ``"future"`` for ``ones(L, S).triu(S - L + 1)`` (True strictly
    above it: nn.MultiheadAttention's causal mask), else absent. Every leading slice must match.
    """
    if mask.dim() == 0:
        return {}
    if mask.is_floating_point():
        return _float_mask_facts(mask)
    if not str(mask.dtype).endswith("bool"):
        return {}
    if mask.device.type != "cpu":
        return {"mask_read": f"not read: the mask is on {mask.device.type} (reading it would wait for the device)"}
    if mask.numel() > MASK_READ_LIMIT:
        return {"mask_read": f"not read: {mask.numel():,} elements (more than {MASK_READ_LIMIT:,})"}
    blind = ~mask.any(-1)
    facts: dict[str, Any] = {"mask_read": "read", "mask_blind_rows": int(blind.sum())}
    if facts["mask_blind_rows"]:
        facts["mask_blind_at"] = [int(i) for i in blind.nonzero()[0]]
    if mask.dim() >= 2 and mask.shape[-2] > 1:
        n_q, n_k = mask.shape[-2], mask.shape[-1]
        ones = mask.new_ones((n_q, n_k))
        for pattern, table in (("causal", ones.tril(n_k - n_q)), ("future", ones.triu(n_k - n_q + 1))):
            if bool((mask == table).all()):
                facts["mask_pattern"] = pattern
    return facts


def _constant_params(args: tuple, kwargs: dict) -> dict:
    """An expand's operand whose elements are all one value (RoBERTa's buffered ``token_type_ids``, zeros,
    grown over the batch): ``{"constant": True}``. Any arrangement of such a tensor is the tensor itself,
    so the op can put no element where it does not belong. Read on the CPU, up to
    :data:`MASK_READ_LIMIT` elements."""
    x = args[0] if args else kwargs.get("input")
    if not _is_tensor(x) or x.device.type != "cpu" or x.is_meta or str(x.layout) != "torch.strided" \
            or not 0 < x.numel() <= MASK_READ_LIMIT:
        return {}
    flat = x.reshape(-1)
    return {"constant": True} if bool((flat == flat[0]).all()) else {}


def _float_mask_facts(mask: Any) -> dict:
    """A float mask is added to the scores. ``float_mask_binary`` says it holds only 0s and 1s, both
    (``torch.tril(torch.ones(T, T))``: a mask written for multiplying, handed where it is added), and
    ``mask_pattern`` says which triangle the 1s are, as for a boolean mask. Read on the CPU only."""
    if mask.device.type != "cpu" or mask.numel() > MASK_READ_LIMIT or mask.is_meta:
        return {}
    ones, zeros = mask == 1, mask == 0
    if not bool((ones | zeros).all()) or not bool(ones.any()) or not bool(zeros.any()):
        return {}
    facts: dict[str, Any] = {"float_mask_binary": True}
    if mask.dim() >= 2 and mask.shape[-2] > 1:
        n_q, n_k = mask.shape[-2], mask.shape[-1]
        table = ones.new_ones((n_q, n_k))
        if bool((ones == table.tril(n_k - n_q)).all()):
            facts["mask_pattern"] = "causal"
    return facts


def _lookup_params(args: tuple, kwargs: dict) -> dict:
    """``F.embedding(ids, table)`` whose ids are one row shared by every batch entry (1-d, or every axis but the
    last of size 1) and not one value along it (``arange(T)[None]``: positions, not a constant token type):
    ``{"shared_ids": True}``. Read on the CPU, up to :data:`MASK_READ_LIMIT` elements."""
    ids = args[0] if args else kwargs.get("input")
    pads = _pads_looked_up(ids, arg(args, kwargs, 2, "padding_idx"))
    if not _is_tensor(ids) or ids.device.type != "cpu" or ids.is_meta or ids.dim() == 0 or ids.is_floating_point() \
            or any(n != 1 for n in ids.shape[:-1]) or not 1 < ids.shape[-1] <= MASK_READ_LIMIT:
        return pads
    row = ids.reshape(-1)
    return pads if bool((row == row[0]).all()) else {"shared_ids": True, **pads}


def _pads_looked_up(ids, padding_idx) -> dict:
    """``{"pads_looked_up": True}`` where the table declares a padding index (``nn.Embedding(...,
    padding_idx=0)``) and the ids hold it: pad tokens entered the model, and whether they are kept from being
    read (a key padding mask) is a contract on the values no name checks (:mod:`.verdict`). Read on the CPU, up
    to :data:`MASK_READ_LIMIT` elements."""
    if padding_idx is None or not _is_tensor(ids) or ids.device.type != "cpu" or ids.is_meta \
            or ids.is_floating_point() or not 0 < ids.numel() <= MASK_READ_LIMIT:
        return {}
    return {"pads_looked_up": True} if bool((ids == padding_idx).any()) else {}


def _scan_params(args: tuple, kwargs: dict) -> dict:
    """The axis a scan (``cumsum``, ``cumprod``) runs along."""
    return {"dim": arg(args, kwargs, 1, "dim")}


def _softmax_params(args: tuple, kwargs: dict) -> dict:
    """The axis softmax normalises; without ``dim``, the one torch's legacy rule picks
    (``_get_softmax_dim``: axis 0 for 0-, 1- and 3-D input, else axis 1), marked ``implicit_dim``."""
    dim = arg(args, kwargs, 1, "dim")
    if dim is not None:
        return {"dim": dim}
    x = args[0] if args else kwargs.get("input")
    if not hasattr(x, "dim"):   # a tensor, or the captured stub of one (its rank is all this reads)
        return {}
    return {"dim": 0 if x.dim() in (0, 1, 3) else 1, "implicit_dim": True}


def _scale_params(args: tuple, kwargs: dict) -> dict:
    return {"alpha": _number(kwargs.get("alpha", 1)), "beta": _number(kwargs.get("beta", 1))}


def parse_einsum(equation: str, ranks: list[int | None] | None = None) -> dict | None:
    """``'b h i d, b h j d -> b h i j'`` -> ``{"inputs": ["bhid", "bhjd"], "output": "bhij"}``.

    Spaces are allowed anywhere (the lucidrains style); an implicit output is the letters that
    appear once, sorted, as torch does. An ellipsis is spelled out in letters the equation does not
    use, from the operands' ``ranks``: it stands for the leading axes, lined up from the right across
    operands as torch broadcasts them (Performer's ``'...nd,...ne->...de'``); None where a rank is not
    known.

    >>> parse_einsum("b h i d, b h j d -> b h i j")
    {'inputs': ['bhid', 'bhjd'], 'output': 'bhij'}
    >>> parse_einsum("...id,...jd->...ij", [4, 4])
    {'inputs': ['ABid', 'ABjd'], 'output': 'ABij'}
    """
    eq = "".join(equation.split())
    if "..." in eq:
        eq = _spell_ellipsis(eq, ranks)
        if eq is None:
            return None
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if not arrow:
        letters = "".join(terms)
        rhs = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    if not all(t.isalpha() for t in terms) or (rhs and not rhs.isalpha()):
        return None
    return {"inputs": terms, "output": rhs}


def _spell_ellipsis(eq: str, ranks: list[int | None] | None) -> str | None:
    """``eq`` with each ``...`` replaced by letters of its own, one per axis it covers (right-aligned)."""
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if not ranks or len(ranks) != len(terms) or any(r is None for r in ranks):
        return None
    spans = [r - (len(t) - 3) if "..." in t else 0 for t, r in zip(terms, ranks)]
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in eq]
    width = max(spans)
    if min(spans) < 0 or width > len(free):
        return None
    letters = "".join(free[:width])
    terms = [t.replace("...", letters[width - n:]) for t, n in zip(terms, spans)]
    if arrow:
        return ",".join(terms) + "->" + rhs.replace("...", letters)
    named = "".join(c for t in terms for c in t if c not in letters)   # torch: the ellipsis first, then the rest
    return ",".join(terms) + "->" + letters + "".join(sorted(c for c in set(named) if named.count(c) == 1))


# ---------------------------------------------------------------------------
# operands: which arguments an op reads
# ---------------------------------------------------------------------------

def first_operand(args: tuple, kwargs: dict) -> list:
    first = args[0] if args else kwargs.get("input")
    return [first] if _is_tensor(first) else []


def linear_operands(args: tuple, kwargs: dict) -> list:
    return first_operand(args, kwargs)


def addmm_operands(args: tuple, kwargs: dict) -> list:
    """``addmm(bias, x, w)`` / ``baddbmm(base, a, b)``: the two matrices are the operands."""
    pair = [arg(args, kwargs, 1, "mat1", arg(args, kwargs, 1, "batch1")),
            arg(args, kwargs, 2, "mat2", arg(args, kwargs, 2, "batch2"))]
    return [t for t in pair if _is_tensor(t)]


def baddbmm_operands(args: tuple, kwargs: dict) -> list:
    """``baddbmm(base, a, b)``: the two matrices, then the base added to their product (Bloom's ALiBi: its
    elements reach every score, so it is data the graph follows), in that order, so the matrices stay the
    first two operands."""
    base = arg(args, kwargs, 0, "input")
    return addmm_operands(args, kwargs) + ([base] if _is_tensor(base) else [])


def all_operands(args: tuple, kwargs: dict) -> list:
    """Every tensor argument, and every tensor inside a list or tuple argument (``torch.cat``)."""
    found = []
    is_tensor_type = _TENSOR_TYPE.get
    for value in (*args, *kwargs.values()) if kwargs else args:
        kind = type(value)
        if kind is int or kind is float or value is None:
            continue
        known = is_tensor_type(kind)
        if known or known is None and _is_tensor(value):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(v for v in value if _is_tensor(v))
    return found


#: type -> is it a tensor type (torch is not imported here: a tensor is what has storage and a shape)
_TENSOR_TYPE: dict[type, bool] = {}


def _is_tensor(value: Any) -> bool:
    kind = type(value)
    known = _TENSOR_TYPE.get(kind)
    if known is None:
        known = _TENSOR_TYPE[kind] = hasattr(kind, "untyped_storage") and hasattr(kind, "shape")
    return known


@dataclass
class Call:
    """One call as the name functions see it: the op, its operands and their names, torch's outputs."""

    op: str
    args: tuple
    kwargs: dict
    inputs: list
    in_axes: list
    shapes: list[tuple[int, ...]]
    namer: Any
    params: dict = field(default_factory=dict)

    def arg(self, pos: int, name: str, default: Any = None) -> Any:
        return arg(self.args, self.kwargs, pos, name, default)
