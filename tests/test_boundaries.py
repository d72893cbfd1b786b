"""Layering rules: the engine never imports Rich; commands without tensors never import torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

PKG = ROOT / "shapetrace"
ENGINE = ["shapetrace.tracer", "shapetrace.axes", "shapetrace.propagate", "shapetrace.diagnose",
          "shapetrace.explain", "shapetrace.summary", "shapetrace.config", "shapetrace.session",
          "shapetrace.attention"]


def _rich_allowed(path: Path) -> bool:
    rel = path.relative_to(PKG).as_posix()
    return rel.startswith("render/") or rel.startswith("cli")


def test_no_module_outside_render_and_cli_imports_rich():
    offenders = []
    for path in PKG.rglob("*.py"):
        if _rich_allowed(path):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            if any(n == "rich" or n.startswith("rich.") for n in names):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print('\\n'.join(sys.modules))"],
                         capture_output=True, text=True, cwd=ROOT, check=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    return set(out.stdout.split())


def test_engine_runs_without_loading_rich():
    mods = _modules_after("import " + ", ".join(ENGINE) + "\nfrom shapetrace.session import trace_reference\n"
                          "from shapetrace.config import AttentionConfig\n"
                          "t = trace_reference(AttentionConfig()); t.to_json(); t.diagnostics")
    assert not any(m == "rich" or m.startswith("rich.") for m in mods)


def test_help_does_not_import_torch():
    mods = _modules_after("from shapetrace.cli import app\ntry:\n    app(['--help'])\nexcept SystemExit:\n    pass\n"
                          "try:\n    app(['run', '--help'])\nexcept SystemExit:\n    pass")
    assert "torch" not in mods


def test_importing_shapetrace_is_light():
    mods = _modules_after("import shapetrace")
    assert "torch" not in mods and "rich" not in mods
