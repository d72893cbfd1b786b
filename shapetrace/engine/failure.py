"""Explain why torch refused an op, from the failed event's operands (plain text, no Rich).

``explain_failure(event)`` reads the operands' shapes, strides and axis names the
tracer recorded just before the op raised, and says which axes are the problem
and what to write instead. Every number comes from the event.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from shapetrace.engine.formatting import fmt_shape

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import Event, TensorInfo
    from shapetrace.engine.opspec import OpSpec


def explain_failure(event: Event) -> str:
    """One paragraph: what torch refused and how to fix it.

    >>> from shapetrace.engine.events import Event, TensorInfo
    >>> x = TensorInfo((2, 8, 6, 64), (3072, 64, 512, 1), 0, "float32", False, ("B", "H", "T", "d_k"))
    >>> e = Event(3, "view", "a.py:9", "y.view(B, T, D)", "f", [x], [], args="2, 6, 512", params={"shape": [2, 6, 512]},
    ...           error="RuntimeError: view size is not compatible with input tensor's size and stride")
    >>> print(explain_failure(e).splitlines()[0])
    view(2, 6, 512) has to merge H, T and d_k (8 × 6 × 64 = 3,072 elements) and cut them into [6, 512].
    """
    if not event.error:
        return ""
    return _handler(event.spec)(event)


def operand_lines(event: Event) -> list[str]:
    """``input 0: [B=2, H=8, T=6, d_k=64] strides (3072, 64, 512, 1), not contiguous`` per operand."""
    lines = []
    for i, t in enumerate(event.inputs):
        state = "contiguous" if t.contiguous else "not contiguous"
        lines.append(f"operand {i}: {fmt_shape(t)} strides ({', '.join(map(str, t.stride))}), {state}")
    return lines


def _label(t: TensorInfo, i: int) -> str:
    name = t.dims[i] if i < len(t.dims) else None
    return (name or f"axis {i}").replace("*", "·")


def _view(e: Event) -> str:
    """A view on memory it cannot express: the strides issue's explanation (both fixes, their cost)."""
    from shapetrace.engine.viewfail import explain_view_error, requested_shape, resolve_shape, view_breaks

    t = e.inputs[0] if e.inputs else None
    if t is None or "view size is not compatible" not in (e.error or ""):
        return _generic(e)
    asked = requested_shape(e)
    target = resolve_shape(math.prod(t.shape), asked) if asked else None
    if target is None or not view_breaks(t, target):
        return _generic(e)
    return explain_view_error(t, target)


def _matmul(e: Event) -> str:
    if len(e.inputs) != 2:
        return _generic(e)
    x, y = e.inputs
    if not x.shape or not y.shape:
        return _generic(e)
    xi = len(x.shape) - 1
    yi = max(len(y.shape) - 2, 0)
    if x.shape[xi] == y.shape[yi]:
        return _generic(e)
    msg = (f"{e.op} sums over the last axis of the first operand ({_label(x, xi)}={x.shape[xi]}) and the "
           f"second-to-last axis of the second ({_label(y, yi)}={y.shape[yi]}); their sizes must be equal.")
    if len(y.shape) >= 2 and y.shape[-1] == x.shape[xi]:
        msg += (f"\nThe second operand's last axis ({_label(y, len(y.shape) - 1)}={y.shape[-1]}) does match: "
                "if this is q @ k, transpose k first: q @ k.transpose(-2, -1).")
    return msg


def _linear(e: Event) -> str:
    x = e.inputs[0] if e.inputs else None
    weight = e.params.get("weight")
    if x is None or not x.shape:
        return _generic(e)
    features = x.shape[-1]
    wanted = None
    m = re.search(r"\((\d+)x(\d+) and (\d+)x(\d+)\)", e.error or "")
    if m:
        wanted = int(m.group(3))
    elif weight:
        wanted = weight[-1]
    if wanted is None or wanted == features:
        return _generic(e)
    return (f"linear multiplies the last axis of its input by the weight: the layer expects "
            f"{wanted} input features, but the input's last axis is {_label(x, len(x.shape) - 1)}={features}. "
            "Check which tensor goes in (a merged [B, T, D] tensor, not one still split into heads) "
            "and the layer's in_features.")


def _broadcast(e: Event) -> str | None:
    """Elementwise ops: which axis (counted from the right) cannot be stretched."""
    m = re.search(r"at non-singleton dimension (\d+)", e.error or "")
    if not m or len(e.inputs) < 2:
        return None
    ndim = max(len(t.shape) for t in e.inputs)
    dim = int(m.group(1))
    sizes = []
    for t in e.inputs:
        i = dim - (ndim - len(t.shape))
        if 0 <= i < len(t.shape):
            sizes.append(f"{t.dims[i]}={t.shape[i]}" if t.dims[i] else str(t.shape[i]))
    shapes = " and ".join(fmt_shape(t) for t in e.inputs)
    return (f"{e.op} lines its operands up from the right: {shapes}. At axis {dim - ndim} (from the right) "
            f"the sizes are {' and '.join(sizes)}: broadcasting only stretches axes of size 1, so these "
            "must be equal. Build the smaller operand for the right length, or give it size 1 on that "
            "axis (unsqueeze / x[..., None, :]) if it should repeat.")


def _generic(e: Event) -> str:
    explained = _broadcast(e)
    if explained:
        return explained
    return (f"torch refused {e.op} for the operands above. Compare their shapes and axis names with "
            "what the op needs.")


def _handler(op: OpSpec):
    """Which explanation a failed op gets, by what the registry says it is."""
    from shapetrace.engine.ops import Family, fails_on_strides, family_of, is_matrix_product

    if fails_on_strides(op):
        return _view
    if is_matrix_product(op):
        return _matmul
    return _linear if family_of(op) is Family.PROJECTION else _generic
