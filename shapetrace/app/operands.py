"""The operands of an op in words: ``q @ k_t: [B, H, T, d_k] @ [B, H, d_k, T] -> [B, H, T, T]``.

Plain strings, no Rich and no torch: the table, step mode, predict mode and the exports all show
a matmul with both operands and the result, named by the code the user wrote where it can be read.

>>> operand_names("scores = q @ k_t / math.sqrt(self.d_k)  # (B, H, T, T)", 2)
['q', 'k_t']
>>> operand_names("y = torch.matmul(weights, v)", 2)
['weights', 'v']
>>> operand_names("y = f(a) + g(b)", 2) is None
True
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from shapetrace.engine.formatting import fmt_names
from shapetrace.engine.ops import is_matrix_product

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import Event

MAX_CODE = 400  # longer lines are not parsed (a name is a nicety, not worth the time)


def _parse(code: str) -> tuple[ast.AST, str] | None:
    """The line as a tree (a ``for``/``if`` head or a continued expression completed), and its text."""
    code = code.strip()
    if not code or len(code) > MAX_CODE:
        return None
    for text in (code, code.rstrip(":") + ": pass", "(" + code + ")"):
        try:
            return ast.parse(text), text
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    return None


def _segment(code: str, node: ast.AST) -> str:
    return ast.get_source_segment(code, node) or ""


def operand_names(code: str, count: int) -> list[str] | None:
    """The source text of a matmul's two operands when the line holds exactly one matmul."""
    if count < 2:
        return None
    parsed = _parse(code.split("  #")[0])
    if parsed is None:
        return None
    tree, source = parsed
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            found.append([node.left, node.right])
        elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            if not is_matrix_product(name):   # torch.matmul(a, b), a.bmm(b)... (two operands, checked below)
                continue
            args = list(node.args)
            if isinstance(node.func, ast.Attribute) and len(args) == 1 and not _is_torch(node.func.value):
                args = [node.func.value, *args]
            if len(args) == 2:
                found.append(args)
    if len(found) != 1:
        return None
    names = [_short(_segment(source, n)) for n in found[0]]
    return names if all(names) else None


def _is_torch(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id in ("torch", "th")


def _short(text: str, limit: int = 24) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def is_matmul(e: Event) -> bool:
    """True for an op that multiplies two recorded operands and produced a result."""
    return is_matrix_product(e.spec) and len(e.inputs) >= 2 and e.output is not None and not e.error


def equation(e: Event) -> str:
    """``q @ k_t: [B, H, T, d_k] @ [B, H, d_k, T] -> [B, H, T, T]`` (no names: the shapes alone)."""
    a, b = e.inputs[-2:]   # baddbmm's base is not an operand
    o = e.output
    shapes = f"{fmt_names(a.dims, a.shape)} @ {fmt_names(b.dims, b.shape)} -> {fmt_names(o.dims, o.shape)}"
    names = operand_names(e.code, 2)
    return f"{names[0]} @ {names[1]}: {shapes}" if names else shapes


def input_labels(e: Event) -> list[str]:
    """A label for every input of an op: the operand's code for a matmul, else ``input 1``, ``input 2``."""
    if len(e.inputs) == 1:
        return ["input"]
    if not e.inputs:
        return []
    names = operand_names(e.code, len(e.inputs)) if is_matrix_product(e.spec) and len(e.inputs) == 2 else None
    return names or [f"input {i + 1}" for i in range(len(e.inputs))]
