"""Parse a chain of tensor methods safely, and a SHAPE argument (no torch, no Rich).

``shapetrace strides`` takes text such as ``view(2, 6, 8, 64).transpose(1, 2)``.
It is read with :mod:`ast` only (never ``eval``): the receiver must be the
tensor itself, every call a whitelisted tensor method, every argument an
integer expression (``6*64``, ``-1``), a tuple of them, or a slice/``None``/
``...`` inside ``[...]``. Anything else is refused with a :class:`UsageError`
that names what was refused.

>>> [s.text for s in parse_chain("view(2, 6, 8, 64).transpose(1, 2).contiguous()")]
['view(2, 6, 8, 64)', 'transpose(1, 2)', 'contiguous()']
>>> parse_chain("view(B, T, 8, D // 8)", {"B": 2, "T": 6, "D": 512})[0].args
(2, 6, 8, 64)
>>> parse_shape("2x6x512")
(2, 6, 512)
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shapetrace.engine.dims import whole_number
from shapetrace.engine.ops import specs_where
from shapetrace.errors import UsageError

#: Tensor methods a chain may call (``mT`` is an attribute, ``[...]`` is indexing): the registry's
#: layout ops marked for chains (:attr:`~shapetrace.engine.opspec.OpSpec.chain`).
METHODS = frozenset(spec.name for spec in specs_where(lambda spec: spec.chain == "method"))
ATTRIBUTES = frozenset(spec.name for spec in specs_where(lambda spec: spec.chain == "attribute"))
ALLOWED_TEXT = ", ".join(sorted(METHODS)) + ", the attribute mT, and indexing x[...] with ints and slices"
#: Longest chain text and most steps accepted.
MAX_CHARS, MAX_STEPS = 2000, 64
#: Largest integer literal or intermediate result accepted in an argument.
MAX_INT = 2 ** 62
#: Above this many elements, ``strides`` uses torch's meta device (shapes and strides, no memory).
META_LIMIT = 1 << 24  # 16,777,216 elements = 64 MiB of float32
MAX_DIMS = 12
#: Deepest expression accepted: the evaluator recurses, so the depth is checked first (iteratively).
MAX_DEPTH = 100

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_RECEIVER = "x"


@dataclass
class ChainStep:
    """One method call of a chain: ``method`` (``"__getitem__"`` for indexing), args and the text."""

    method: str
    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    text: str = ""


def parse_shape(text: str) -> tuple[int, ...]:
    """``2x6x512``, ``2,6,512``, ``2 6 512`` or ``(2, 6, 512)`` -> ``(2, 6, 512)``."""
    cleaned = text.strip().strip("()[]").strip()
    parts = [p for p in re.split(r"[x×*,\s]+", cleaned) if p]
    if not parts or not all(whole_number(p) for p in parts):
        raise UsageError(f"cannot read shape {text!r}: write sizes separated by x or commas, "
                         "e.g. 2x6x512 or 2,6,512")
    shape = tuple(int(p) for p in parts)
    if any(s < 1 for s in shape):
        raise UsageError(f"shape {text!r} has a size below 1; every size must be at least 1")
    if len(shape) > MAX_DIMS:
        raise UsageError(f"shape {text!r} has {len(shape)} axes; at most {MAX_DIMS} are supported")
    if math.prod(shape) > MAX_INT:
        raise UsageError(f"shape {text!r} has more than 2**62 elements")
    return shape


def parse_chain(text: str, names: Mapping[str, int] | None = None) -> list[ChainStep]:
    """Parse ``view(...).transpose(...)...`` into steps, refusing anything not whitelisted.

    Args:
        text: the chain, with or without a leading ``x.`` or ``.``.
        names: sizes usable by name inside arguments (``view(B, T, H, d_k)``).
    """
    source = _normalise(text)
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise UsageError(f"cannot parse chain {text!r}: {exc.msg} (write it like "
                         "'view(2, 6, 8, 64).transpose(1, 2)')") from None
    except (RecursionError, MemoryError):
        raise UsageError(f"the chain is nested too deeply (at most {MAX_DEPTH} levels)") from None
    _check_depth(tree)
    steps: list[ChainStep] = []
    node = tree.body
    while not (isinstance(node, ast.Name) and node.id == _RECEIVER):
        step, node = _step(node, source, dict(names or {}))
        steps.append(step)
        if len(steps) > MAX_STEPS:
            raise UsageError(f"chain has more than {MAX_STEPS} steps")
    if not steps:
        raise UsageError("the chain is empty: give at least one method, e.g. 'transpose(0, 1)'")
    return steps[::-1]


def _check_depth(tree: ast.AST) -> None:
    """Refuse an expression nested deeper than MAX_DEPTH, walking with a stack (no recursion);
    runs of unary signs (``-(-(-6))``) are evaluated in a loop and do not count."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise UsageError(f"the chain is nested too deeply (at most {MAX_DEPTH} levels)")
        step = 0 if isinstance(node, ast.UnaryOp) else 1
        stack.extend((child, depth + step) for child in ast.iter_child_nodes(node))


def _normalise(text: str) -> str:
    text = text.strip()
    if len(text) > MAX_CHARS:
        raise UsageError(f"chain is longer than {MAX_CHARS} characters")
    if not text:
        raise UsageError("the chain is empty: give at least one method, e.g. 'transpose(0, 1)'")
    if text.startswith("."):
        return _RECEIVER + text
    if text.startswith("["):
        return _RECEIVER + text
    head = re.match(r"[A-Za-z_]\w*", text)
    if head and head.group() in ("torch", "F", "nn", "np", "os", "sys"):
        raise UsageError(f"refused {head.group()!r}: a chain calls methods on the tensor only, "
                         f"e.g. 'transpose(1, 2)' (allowed: {ALLOWED_TEXT})")
    if head and head.end() == len(text) and head.group() not in ATTRIBUTES:
        if head.group() in METHODS:
            raise UsageError(f"write {head.group()}(...) with parentheses, e.g. 'contiguous()'")
        raise UsageError("the chain is empty: give at least one method, e.g. 'transpose(0, 1)'")
    if head and text[head.end():].lstrip().startswith((".", "[")) and head.group() not in METHODS:
        return _RECEIVER + text[head.end():].lstrip()  # 'q.view(...)': any single name is the tensor
    return f"{_RECEIVER}.{text}"


def _step(node: ast.AST, source: str, names: dict[str, int]) -> tuple[ChainStep, ast.AST]:
    text = ast.get_source_segment(source, node) or ""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        method = node.func.attr
        if method in ATTRIBUTES:   # (was "not an allowed tensor method (allowed: ..., the attribute mT")
            raise UsageError(f"{method} is an attribute, not a method: write .{method} without parentheses")
        if method not in METHODS:
            raise UsageError(f"refused {method!r}: not an allowed tensor method (allowed: {ALLOWED_TEXT})")
        args = tuple(_value(a, names) for a in node.args)
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise UsageError("refused '**' arguments in the chain")
            kwargs[kw.arg] = _value(kw.value, names)
        inner = node.func.value
        return ChainStep(method, args, kwargs, _call_text(method, source, node)), inner
    if isinstance(node, ast.Attribute):
        if node.attr not in ATTRIBUTES:
            raise UsageError(f"refused attribute {node.attr!r}: only {', '.join(sorted(ATTRIBUTES))} may be read "
                             f"(allowed: {ALLOWED_TEXT})")
        return ChainStep(node.attr, (), {}, node.attr), node.value
    if isinstance(node, ast.Subscript):
        index = _index(node.slice, names)
        inner_text = ast.get_source_segment(source, node.slice) or ""
        return ChainStep("__getitem__", (index,), {}, f"[{inner_text}]"), node.value
    if isinstance(node, ast.Call):
        func = ast.get_source_segment(source, node.func) or "?"
        raise UsageError(f"refused call {func!r}: only tensor methods may be called (allowed: {ALLOWED_TEXT})")
    if isinstance(node, ast.Name):
        raise UsageError(f"refused name {node.id!r}: a chain starts from the tensor and calls its methods")
    shown = text[2:] if text.startswith(_RECEIVER + ".") else text
    raise UsageError(f"refused {shown or type(node).__name__!r}: not a tensor method call "
                     f"(allowed: {ALLOWED_TEXT})")


def _call_text(method: str, source: str, node: ast.Call) -> str:
    parts = [ast.get_source_segment(source, a) or "" for a in node.args]
    parts += [f"{kw.arg}={ast.get_source_segment(source, kw.value)}" for kw in node.keywords]
    return f"{method}({', '.join(parts)})"


def _index(node: ast.AST, names: dict[str, int]) -> Any:
    if isinstance(node, ast.Tuple):
        return tuple(_index_item(e, names) for e in node.elts)
    return _index_item(node, names)


def _index_item(node: ast.AST, names: dict[str, int]) -> Any:
    if isinstance(node, ast.Slice):
        return slice(*(None if part is None else _int(part, names) for part in (node.lower, node.upper, node.step)))
    if isinstance(node, ast.Constant) and (node.value is None or node.value is Ellipsis):
        return node.value
    return _int(node, names)


def _value(node: ast.AST, names: dict[str, int]) -> Any:
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_int(e, names) for e in node.elts)
    return _int(node, names)


def _int(node: ast.AST, names: dict[str, int]) -> int:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int):
            raise UsageError(f"refused argument {node.value!r}: arguments must be whole numbers")
        return _bounded(node.value)
    if isinstance(node, ast.Name):
        if node.id in names:
            return names[node.id]
        known = f" (known: {', '.join(names)})" if names else ""
        raise UsageError(f"refused name {node.id!r} in an argument: use numbers or axis names{known}")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        sign = 1
        while isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            sign = -sign if isinstance(node.op, ast.USub) else sign
            node = node.operand
        return sign * _int(node, names)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _int(node.left, names), _int(node.right, names)
        if isinstance(node.op, (ast.FloorDiv, ast.Mod)) and right == 0:
            raise UsageError("division by zero in a chain argument")
        return _bounded(_BINOPS[type(node.op)](left, right))
    text = ast.unparse(node)   # (the argument as written, not the name of its ast class: "BinOp")
    text = text if len(text) <= 40 else text[:39] + "…"
    raise UsageError(f"refused argument {text!r}: only whole numbers, + - * // %, "
                     "axis names and tuples are allowed")


def _bounded(value: int) -> int:
    if abs(value) > MAX_INT:
        raise UsageError(f"refused number {value}: larger than 2**62")
    return value
