"""One-line plain-English annotations for each recorded op (plain strings, no Rich).

Every number in an annotation comes from the event (torch's own shapes and
strides); the words only interpret them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from shapetrace.engine.axis_compute import einsum_contracted
from shapetrace.engine.formatting import fmt_bytes, fmt_names, fmt_shape
from shapetrace.engine.layout import row_major
from shapetrace.engine.ops import Family, is_matrix_product

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import Event, TensorInfo


def names(t: TensorInfo) -> str:
    return fmt_names(t.dims, t.shape)


def _strides(t: TensorInfo) -> str:
    return "(" + ", ".join(str(s) for s in t.stride) + ")"


def why_not_contiguous(t: TensorInfo) -> str:
    """Plain reason a tensor is not contiguous, from its strides."""
    if t.contiguous:
        return ""
    if 0 in t.stride:
        zero = _repeated_axes(t)
        if zero:
            return f"stride 0 on {', '.join(zero)}: one value repeated, no memory behind it"
    return f"strides {_strides(t)} are not the row-major ({', '.join(map(str, row_major(t.shape)))})"


def annotate(e: Event, mode: str = "full") -> str:
    """The annotation for one event.

    Args:
        e: the recorded op.
        mode: ``"full"`` (sentences for beginners, the default) or ``"brief"``
            (a few symbols for experts, see :func:`brief`).
    """
    if mode == "brief":
        return merged_spelling(brief(e))
    if e.error:
        return f"raised {e.error.split(':')[0]}"
    handler = _HANDLERS.get(e.spec.family, _generic)
    return merged_spelling(handler(e))


_MERGED = re.compile(r"(?<=[\w)])\*(?=[\w(])")


def merged_spelling(text: str) -> str:
    """A merged axis spelled as the shapes spell it, ``B·H`` (never ``B*H``); ``H * d_k`` (code, with
    spaces) is left alone.

    >>> merged_spelling("one [T, T] matrix per (B*H); splits 3*D into qkv × D; view(B, T, H * d_k)")
    'one [T, T] matrix per (B·H); splits 3·D into qkv × D; view(B, T, H * d_k)'
    """
    return _MERGED.sub("·", text)


def brief(e: Event) -> str:
    """A terse annotation for experts: what moved and what it cost, e.g. ``split D → H×d_k · view``."""
    if e.error:
        return f"raised {e.error.split(':')[0]}"
    o = e.output
    if o is None:
        return e.op
    i = e.inputs[0] if e.inputs else None
    what = _brief_what(e, i, o)
    return " · ".join(p for p in (what, memory_word(e), "" if o.contiguous else "non-contiguous") if p)


def memory_word(e: Event) -> str:
    """What an op did to memory, in one word and a size: raised, no-op, view, copy N, new N."""
    if e.error:
        return "raised"
    if e.noop:
        return "no-op"
    if e.view:
        return "view"
    if e.copy_bytes:
        return f"copy {fmt_bytes(e.copy_bytes)}"
    return f"new {fmt_bytes(e.alloc_bytes)}" if e.alloc_bytes else ""


def _label(name: str | None, size: int) -> str:
    return (name or str(size)).replace("*", "·")


def _brief_what(e: Event, i: TensorInfo | None, o: TensorInfo) -> str:
    if i is None:
        return f"→ {names(o)}"
    family = e.spec.family
    if family is Family.RESHAPE:
        split = [_label(n, 0) for n in o.dims if n and n not in i.dims]
        merged = [_label(n, 0) for n in i.dims if n and n not in o.dims]
        if merged and split:
            return f"{'×'.join(merged)} → {'×'.join(split)}"
        return f"{names(i)} → {names(o)}"
    if family is Family.AXIS_ORDER:
        swapped = list(dict.fromkeys(_moved(i.dims, o.dims)))
        return "swap " + "↔".join(_label(n, 0) for n in swapped) if swapped else f"→ {names(o)}"
    if is_matrix_product(e.spec) and len(e.inputs) > 1:
        return f"sums {_label(i.dims[-1], i.shape[-1])} → {names(o)}"
    if family is Family.SOFTMAX and e.params.get("dim") is not None:
        d = e.params["dim"] % len(i.shape)
        return f"softmax over {_label(i.dims[d], d)}"
    if family is Family.PROJECTION:
        return f"{_label(i.dims[-1], i.shape[-1])} → {_label(o.dims[-1], o.shape[-1])}"
    if family is Family.CONTIGUOUS:
        return f"re-lay out {names(o)}" if not e.noop else "already contiguous"
    if e.params.get("rolled"):
        return "roll " + ", ".join(_rolled(o, e.params["rolled"]))
    return f"{names(i)} → {names(o)}"


def _rolled(o: TensorInfo, rolled: dict[int, int]) -> list[str]:
    """``T/6 by -1`` for each axis a roll moved (from element provenance: :mod:`.infer.elements`)."""
    return [f"{_label(o.dims[j], o.shape[j])} by {shift:+d}" for j, shift in sorted(rolled.items())]


def _order(t) -> str:
    """``[B, D%3, T, D/3]``: a tensor's axes by name (an unnamed one by its size)."""
    return "[" + ", ".join((name or str(size)).replace("*", "·") for name, size in zip(t.dims, t.shape)) + "]"


def _moved(src: Sequence[str | None], dst: Sequence[str | None]) -> list[str]:
    return [d for i, d in enumerate(dst) if i < len(src) and src[i] != d and d]


def _linear(e: Event) -> str:
    i, o = e.inputs[0], e.output
    w = e.params.get("weight")
    label = (o.dims[-1] or str(o.shape[-1])).replace("*", "·")
    if any(n and n.startswith("!") for n in i.dims):
        return (f"projects the last axis ({i.shape[-1]} values) of a tensor whose axes mix tokens (see the "
                f"error above) to {o.shape[-1]}; new buffer {fmt_bytes(e.alloc_bytes)}")
    named = f" ({o.dims[-1].replace('*', '·')})" if o.dims[-1] else ""   # an unnamed width is just its size
    return (f"projects each token's {i.shape[-1]} features to {o.shape[-1]}{named} with a "
            f"{w[0]}×{w[1]} weight{' and a bias' if e.params.get('bias') else ''}; new buffer "
            f"{fmt_bytes(e.alloc_bytes)}" if w
            else f"linear projection to {label}; new buffer {fmt_bytes(e.alloc_bytes)}")


def _reshape(e: Event) -> str:
    i, o = e.inputs[0], e.output
    split = [n for n in o.dims if n and n not in i.dims]
    merged = [n for n in i.dims if n and n not in o.dims]
    if any(n and n.startswith("!") for n in o.dims):
        what = "regroups memory across axes: one axis now mixes " + next(
            n for n in o.dims if n and n.startswith("!"))[1:].replace("*", " and ")
    elif len(o.shape) > len(i.shape) and merged:
        what = f"splits {', '.join(merged)} into {' × '.join(split)}"
    elif len(o.shape) < len(i.shape) and split:
        what = f"merges {' and '.join(merged)} into {', '.join(split)}"
    else:
        what = f"reshapes {names(i)} to {names(o)}"
    if e.view:
        return f"{what}: a view, no data moves (same memory, new shape and strides)"
    return f"{what}: the input's strides cannot express it, so torch copied {fmt_bytes(e.copy_bytes)}"


def _axis_name(t: TensorInfo, d: int) -> str:
    """An axis by its name, or by position and size when it has none: ``axis 2 (size 64)``."""
    name = t.dims[d] if d < len(t.dims) else None
    return name.replace("*", "·") if name else f"axis {d} (size {t.shape[d]})"


def _swap_words(a: str, b: str, d0: int, d1: int) -> str:
    """``swaps T and H``; two axes of one name are told apart by position (``swaps the two T axes, 2
    and 3``), and an axis swapped with itself moves nothing."""
    if d0 == d1:
        return f"swaps {a} with itself: nothing moves"
    if a == b:
        return f"swaps the two {a} axes, {min(d0, d1)} and {max(d0, d1)}"
    return f"swaps {a} and {b}"


def _transpose(e: Event) -> str:
    i, o = e.inputs[0], e.output
    pair = e.params.get("dims")
    if pair and len(pair) == 2 and all(isinstance(d, int) for d in pair) and i.shape:   # transpose, swapaxes
        d0, d1 = (d % len(i.shape) for d in pair)
        swapped = [o.dims[d0], o.dims[d1]]
        # an unnamed axis is said by where it was and its size there: in the output, position d0 holds
        # what was at d1, so both are read from the input (``swaps T and axis 2 (size 32)``)
        told = o if all(swapped) else i
        text = _swap_words(_axis_name(told, d0), _axis_name(told, d1), d0, d1)
    else:
        swapped = _moved(i.dims, o.dims)
        moved = list(dict.fromkeys(swapped))
        if len(moved) == 2:
            text = f"swaps {moved[0]} and {moved[1]}"
        else:   # a rotation of three axes or more is no swap: the order before and after
            text = f"reorders the axes: {_order(i)} -> {_order(o)}" if moved else "reorders axes"
    pair = set(swapped)
    heads_first = "H" in o.dims and "T" in o.dims and o.dims.index("H") < o.dims.index("T")
    if pair == {"H", "T"} and heads_first:
        text += ": each head becomes its own batch of [T, d_k] matrices"
    elif pair == {"H", "T"}:
        text += ": tokens back in front, ready to merge the heads"
    elif len(o.dims) >= 2 and o.dims[-1] in ("T", "T_k", "S") and o.dims[-2] in ("d_k",):
        text += f": the last two axes are now [{o.dims[-2]}, {o.dims[-1]}], ready for q @ kᵀ"
    text += "; a view"
    if not o.contiguous:
        text += f", not contiguous: {why_not_contiguous(o)}"
    return text


def _contiguous(e: Event) -> str:
    o = e.output
    if e.noop:
        return "already contiguous: returns the same tensor, nothing copied"
    n = math.prod(o.shape)
    return (f"copies {n:,} elements ({fmt_bytes(e.copy_bytes)}) into a new buffer laid out in "
            f"{names(o)} order, so a later view can merge axes")


def _matmul(e: Event) -> str:
    if len(e.inputs) != 2 or e.output is None or len(e.output.shape) < 2:
        return _generic(e)   # an einsum of one or three operands, a product to a vector
    a, b, o = e.inputs[0], e.inputs[1], e.output
    inner = _summed(e)
    batch = [n or str(s) for n, s in zip(o.dims[:-2], o.shape[:-2])]
    roles = [x.role for x in o.axes]
    if roles[-2:] == ["query", "key"] and e.projections[:2] == ("k", "q"):
        return (f"scores with keys and queries swapped: sums over {inner}, row = key token, column = query "
                f"token (see the error); new {fmt_bytes(e.alloc_bytes)}")
    if roles[-2:] == ["query", "key"]:
        per = f" per ({', '.join(batch)})" if batch else ""   # (a 2-D product is one matrix: no batch)
        return (f"scores: sums over {inner}, giving one [{o.dims[-2]}, {o.dims[-1]}] matrix{per}: "
                f"row = query token, column = key token; new {fmt_bytes(e.alloc_bytes)}")
    if a.axes and a.axes[-1].role == "key":
        return (f"weighted sum of the values: each query mixes the {a.shape[-1]} value vectors by its "
                f"weights (sums over {inner}); new {fmt_bytes(e.alloc_bytes)}")
    return f"sums over {inner}: {names(a)} @ {names(b)} -> {names(o)}; new {fmt_bytes(e.alloc_bytes)}"


def _summed(e: Event) -> str:
    """What a two-operand product sums over, named from its first operand: a matmul's last axis, an einsum's
    dropped letters (``bdhn,bdhm->bhnm`` sums over ``d``, whichever place it holds)."""
    a = e.inputs[0]
    parsed = e.params.get("subscripts")
    if not (parsed and len(parsed["inputs"]) == 2 and len(parsed["inputs"][0]) == len(a.shape)):
        return a.dims[-1] or str(a.shape[-1])
    term = parsed["inputs"][0]
    places = [term.index(c) for c in einsum_contracted(parsed) if c in term]
    return " and ".join(a.dims[i] or str(a.shape[i]) for i in places) or "no axis"


def _softmax(e: Event) -> str:
    t = e.inputs[0]
    dim = e.params.get("dim")
    if dim is None:
        return "softmax"
    dim %= len(t.shape)
    axis = _axis_name(t, dim)
    role = t.axes[dim].role if t.axes else None
    what = " (the keys)" if role == "key" else " (the queries!)" if role == "query" else ""
    last = dim == len(t.shape) - 1
    sums = "each row of weights sums to 1" if last else f"the weights along {axis} sum to 1"
    if _logs(e):   # log_softmax
        sums = "the logs of weights that sum to 1 " + ("along each row" if last else f"along {axis}")
    return f"normalises over {axis}{what}: {sums}; new {fmt_bytes(e.alloc_bytes)}"


def _logs(e: Event) -> bool:
    return e.spec.words.startswith("log")


def _masked_fill(e: Event) -> str:
    t = e.inputs[0]
    mask = e.inputs[1] if len(e.inputs) > 1 else None
    if mask is None:
        return "fills masked positions"
    lead = len(t.shape) - len(mask.shape)
    spread = [n or str(s) for n, s, m in zip(t.dims[lead:], t.shape[lead:], mask.shape) if m == 1 and s > 1]
    spread = [n or str(s) for n, s in zip(t.dims, t.shape)][:len(t.shape) - len(mask.shape)] + spread
    how = f" (repeated along {', '.join(spread)})" if spread else ""
    value = e.params.get("value")
    shown = "-inf" if value == float("-inf") else f"{value:g}" if isinstance(value, float) else str(value)
    return (f"sets the positions where the mask {fmt_shape(mask)} is True to {shown}; "
            f"the mask broadcasts against {names(t)}{how}")


def _expand(e: Event) -> str:
    zero = _repeated_axes(e.output)
    return f"repeats without copying: stride 0 on {', '.join(zero) or 'no axis'}; a view"


def _repeated_axes(t: TensorInfo) -> list[str]:
    """The axes a stride of 0 repeats, by name, else as ``axis 2 (size 2)`` (a bare number read as a
    size here and as an index elsewhere)."""
    return [t.dims[i] or f"axis {i} (size {t.shape[i]})" for i, s in enumerate(t.stride) if s == 0 and t.shape[i] > 1]


def _split(e: Event) -> str:
    o = e.output
    n = len(e.outputs)
    how = "views" if e.view else "copies"
    return f"cuts into {n} pieces of {names(o)}; {how} into the same memory"


def _sdpa(e: Event) -> str:
    o = e.output
    return (f"fused attention: softmax(q kᵀ / √d_k) v in one call, no scores tensor shown; "
            f"out {names(o)}")


def _dropout(e: Event) -> str:
    o = e.output
    if e.noop:
        why = "p = 0" if e.params.get("p") == 0 else "eval mode" if e.params.get("training") is False \
            else "p = 0 or eval"
        return f"does nothing here ({why}): returns its input itself, no new buffer"
    on_weights = e.inputs and {"query", "key"} <= {a.role for a in e.inputs[0].axes}
    what = "attention dropout: zeroes random attention weights" if on_weights else \
        "dropout on activations: zeroes random values"
    p = e.params.get("p")
    return (f"{what} (p = {p:g}) and scales the rest by 1/(1-p); {names(o)}, new {fmt_bytes(e.alloc_bytes)}"
            if isinstance(p, (int, float)) else f"{what}; {names(o)}, new {fmt_bytes(e.alloc_bytes)}")


def _generic(e: Event) -> str:
    """Any other op: what the registry says it does, its shapes and what it did to memory."""
    o = e.output
    if o is None:
        return e.op
    if e.noop:
        mem = "returns its input itself, nothing new"
    else:
        mem = "a view" if e.view else (f"copies {fmt_bytes(e.copy_bytes)}" if e.copy_bytes else
                                       f"new {fmt_bytes(e.alloc_bytes)}")
    words = e.spec.words
    if e.params.get("rolled"):
        words = (f"rolls {' and '.join(_rolled(o, e.params['rolled']))} (a cyclic shift: each axis keeps its "
                 "name, its positions move round)")
    shapes = f"{names(e.inputs[0]) if e.inputs else ''} -> {names(o)}"
    return f"{words}: {shapes}; {mem}" if words else f"{shapes}; {mem}"


_HANDLERS: dict[Family, Callable[[Event], str]] = {
    Family.PROJECTION: _linear, Family.RESHAPE: _reshape, Family.AXIS_ORDER: _transpose,
    Family.CONTIGUOUS: _contiguous, Family.PRODUCT: _matmul, Family.SOFTMAX: _softmax, Family.MASK_FILL: _masked_fill,
    Family.EXPAND: _expand, Family.SPLIT: _split, Family.FUSED_ATTENTION: _sdpa, Family.DROPOUT: _dropout,
}
