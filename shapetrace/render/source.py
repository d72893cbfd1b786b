"""Find and slice the source of traced code for step mode (plain data; no Rich).

Events carry ``source = "path:line"`` as :func:`shapetrace.engine.sites.resolve`
shows it (``shapetrace/attention.py`` for the reference model, a path relative to
the working directory for user files) and the qualified names of the user
functions on the stack.
"""

from __future__ import annotations

import ast
import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class CodeWindow:
    """Lines to show around the current op: ``(lineno, text)`` pairs, None marks a gap."""

    path: str
    current: int
    lines: tuple[tuple[int, str] | None, ...]


def split_source(source: str) -> tuple[str, int]:
    """``"shapetrace/attention.py:32"`` -> ``("shapetrace/attention.py", 32)`` (line 0 if absent)."""
    path, _, line = source.rpartition(":")
    return (path, int(line)) if line.isdigit() and path else (source, 0)


def resolve_path(shown: str, source_files: Mapping[str, str] | None = None) -> str | None:
    """The real file behind a displayed source path, or None when it cannot be found."""
    if source_files and shown in source_files:
        return source_files[shown]
    candidates = [shown]
    if shown.startswith("shapetrace/"):
        candidates.insert(0, os.path.join(_PKG_DIR, shown[len("shapetrace/"):]))
    return next((c for c in candidates if os.path.isfile(c)), None)


@functools.lru_cache(maxsize=32)
def read_lines(path: str) -> tuple[str, ...]:
    with open(path, encoding="utf-8") as f:
        return tuple(f.read().splitlines())


@functools.lru_cache(maxsize=32)
def function_spans(path: str) -> dict[str, tuple[int, int]]:
    """Qualified function name -> (first line, last line), decorators excluded."""
    try:
        tree = ast.parse("\n".join(read_lines(path)))
    except SyntaxError:
        return {}
    spans: dict[str, tuple[int, int]] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    spans[name] = (child.lineno, child.end_lineno or child.lineno)
                visit(child, f"{name}.")

    visit(tree, "")
    return spans


def code_window(source: str, stack: Sequence[str], budget: int,
                source_files: Mapping[str, str] | None = None) -> CodeWindow | None:
    """The functions on the stack (innermost first) that fit in ``budget`` lines, or a window around the line.

    Returns None when the file cannot be read.
    """
    shown, line = split_source(source)
    path = resolve_path(shown, source_files)
    if path is None or line < 1:
        return None
    try:
        lines = read_lines(path)
    except (OSError, UnicodeDecodeError):
        return None
    if line > len(lines):
        return None
    spans = _stack_spans(path, stack, line)
    chosen = _fit_spans(spans, budget)
    if not chosen:
        chosen = [_centred(line, budget, spans[0] if spans else (1, len(lines)))]
    rows: list[tuple[int, str] | None] = []
    for start, end in sorted(chosen):
        if rows:
            rows.append(None)
        rows.extend((n, lines[n - 1]) for n in range(start, end + 1))
    return CodeWindow(shown, line, tuple(rows))


def _stack_spans(path: str, stack: Sequence[str], line: int) -> list[tuple[int, int]]:
    known = function_spans(path)
    spans = [known[q] for q in stack if q in known]
    if not spans or not spans[0][0] <= line <= spans[0][1]:
        inner = [s for s in known.values() if s[0] <= line <= s[1]]
        spans = [min(inner, key=lambda s: s[1] - s[0])] if inner else []
    return list(dict.fromkeys(spans))


def _fit_spans(spans: list[tuple[int, int]], budget: int) -> list[tuple[int, int]]:
    """Take stack functions, innermost first, while they (and the gap lines between them) fit."""
    chosen: list[tuple[int, int]] = []
    used = 0
    for start, end in spans:
        cost = end - start + 1 + (1 if chosen else 0)
        if used + cost > budget or any(s <= start and end <= e for s, e in chosen):
            break
        chosen.append((start, end))
        used += cost
    return chosen


def _centred(line: int, budget: int, bounds: tuple[int, int]) -> tuple[int, int]:
    lo, hi = bounds
    budget = max(1, budget)
    start = max(lo, min(line - budget // 2, hi - budget + 1))
    return start, min(hi, start + budget - 1)
