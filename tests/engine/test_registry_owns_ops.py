"""The op registry (shapetrace/engine/ops.py, its table op_table.py, opspec.py) owns every op fact: no other
module decides what an op is by comparing its name with a string literal (``e.op == "view"``,
``e.op in ("matmul", "bmm")``) or keeps its own set or table of op names. They ask the op's spec
(``e.spec.family``, ``e.spec.matrix_product``, ``e.spec.moves_layout``), or the registry by name where the
input is a name by nature, so that an op added to a family is treated alike everywhere (issue 21, item 4).

Each module is one case, so a failure names the module and every offending line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import ROOT as CHECKOUT

from shapetrace.engine.ops import REGISTRY

ROOT = CHECKOUT / "shapetrace"
#: the registry's own modules
OWNERS = frozenset(ROOT / "engine" / name for name in ("ops.py", "op_table.py", "opspec.py"))
#: names an expression may have when it holds an op's name
OP_HOLDERS = frozenset({"op", "method", "op_name", "func_name"})
#: the names of the ops the engine has a rule for (not of metadata reads, ``"stride"`` as a record's field, nor of
#: ops known only on the meta device or left unnamed, ``x.H``: ``("H", "T")`` are axis names)
OP_NAMES = frozenset(name for name, spec in REGISTRY.items()
                     if spec.row or spec.names is not None or spec.sized or spec.opens)

#: modules others own in this round (issue 21): their literals are listed by the failing case, for the lead
NOT_MINE: dict[str, str] = {}


def _holds_op(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr in OP_HOLDERS
    return isinstance(node, ast.Name) and node.id in OP_HOLDERS


def _strings(node: ast.AST) -> list[ast.Constant]:
    """The string literals of ``node``: itself, or the items of a tuple/list/set literal or of
    ``frozenset(...)``/``set(...)``/``tuple(...)`` over one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args \
            and node.func.id in {"frozenset", "set", "tuple"}:
        return _strings(node.args[0])
    return []


def _mostly_ops(values: list[str]) -> list[str]:
    """The op names of a collection of strings that is mostly op names (two or more)."""
    ops = [v for v in values if v in OP_NAMES]
    return ops if len(ops) >= 2 and 2 * len(ops) > len(values) else []


def op_literals(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` for each op name used as op identity in ``source``: compared with an expression
    that holds an op's name, or gathered in a literal set, tuple, list or dict keyed mostly by op names."""
    found: set[tuple[int, str]] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_holds_op(s) for s in sides):
                found.update((c.lineno, f"compared with {c.value!r}") for s in sides for c in _strings(s)
                             if c.value in OP_NAMES)
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            ops = _mostly_ops([c.value for c in _strings(node)])
            if ops:
                found.add((node.lineno, f"a set of op names {tuple(ops)}"))
        elif isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            ops = _mostly_ops(keys)
            if ops:
                found.add((node.lineno, f"a table keyed by op names {tuple(ops)}"))
    return sorted(found)


MODULES = sorted(p for p in ROOT.rglob("*.py") if p not in OWNERS)


def _case(path: Path):
    rel = path.relative_to(ROOT).as_posix()
    marks = [pytest.mark.xfail(strict=True, reason=f"not edited in this round: {NOT_MINE[rel]}")] \
        if rel in NOT_MINE else []
    return pytest.param(path, id=rel, marks=marks)


@pytest.mark.parametrize("path", [_case(p) for p in MODULES])
def test_no_op_name_literals_outside_the_registry(path):
    found = op_literals(path.read_text())
    listed = "\n".join(f"  {path.relative_to(ROOT.parent)}:{line}: {what}" for line, what in found)
    assert not found, f"op identity decided outside shapetrace/engine/ops.py:\n{listed}"


@pytest.mark.parametrize("source,expected", [
    ('if e.op == "view": pass', [(1, "compared with 'view'")]),
    ('ok = e.op in ("matmul", "bmm")', [
        (1, "a set of op names ('matmul', 'bmm')"), (1, "compared with 'bmm'"), (1, "compared with 'matmul'")]),
    ('OPS = frozenset({"view", "reshape", "flatten"})', [(1, "a set of op names ('view', 'reshape', 'flatten')")]),
    ('H = {"view": f, "matmul": g}', [(1, "a table keyed by op names ('view', 'matmul')")]),
    ('if label == "T": pass', []),                          # an axis name that is also an op's name
    ('d = {"view": True, "shape": 1, "stride": 2}', []),   # a record's fields
    ('if family_of(e.op) is Family.RESHAPE: pass', []),
])
def test_the_scanner_finds_op_identity_only(source, expected):
    assert op_literals(source) == expected
