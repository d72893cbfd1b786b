"""Shared test setup: this checkout first on sys.path, a pinned environment, CLI helpers."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
for var in ("NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE"):
    os.environ.pop(var, None)
os.environ["COLUMNS"] = "100"
os.environ["SHAPETRACE_TEST"] = "1"

GOLDEN = ROOT / "tests" / "golden"
#: Set by .ci/run, which installs tmux and chromium: there, a missing tool fails instead of skipping.
REQUIRE_TOOLS = os.environ.get("SHAPETRACE_REQUIRE_BROWSER") == "1"
OUTPUT = ROOT / "tests" / "output"


def render(renderable, width: int = 100) -> str:
    """Render a Rich renderable to plain text at a fixed width."""
    from rich.console import Console

    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None, legacy_windows=False,
            force_terminal=False).print(renderable)
    return buf.getvalue()


def assert_golden(name: str, text: str) -> None:
    """Compare with tests/golden/NAME; SHAPETRACE_UPDATE_GOLDEN=1 rewrites it."""
    path = GOLDEN / name
    if os.environ.get("SHAPETRACE_UPDATE_GOLDEN") == "1" or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if os.environ.get("SHAPETRACE_UPDATE_GOLDEN") != "1":
            pytest.fail(f"golden file {path} was missing and has been written; check it and re-run")
    expected = path.read_text()
    assert text == expected, f"{name} differs from golden; re-run with SHAPETRACE_UPDATE_GOLDEN=1 if intended"


def require_tool(tool: str) -> str:
    """The path of ``tool`` (tmux, chromium); skip the test with how to enable it when it is missing.

    With ``SHAPETRACE_REQUIRE_BROWSER=1`` (``.ci/run`` sets it after installing both) a missing tool
    fails the test instead, so CI can never skip these.
    """
    path = shutil.which(tool)
    if path:
        return path
    how = f"{tool} is not installed: apt-get install {tool} to run this test"
    if REQUIRE_TOOLS:
        pytest.fail(f"{how} (SHAPETRACE_REQUIRE_BROWSER=1 says it must run)")
    pytest.skip(f"{how}, or run .ci/run, which installs it (SHAPETRACE_REQUIRE_BROWSER=1 makes this a failure)")


def run_cli(*args: str, input: str | None = None, env: dict | None = None, cwd=None,
            timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``python -m shapetrace ARGS`` in a real subprocess, as a user would."""
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="100")
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "shapetrace", *args], capture_output=True, text=True,
                          input=input, env=full_env, cwd=cwd, timeout=timeout)


@pytest.fixture
def cli():
    """Invoke the Typer app in-process: ``cli("run", "--json")`` -> click Result."""
    from typer.testing import CliRunner

    from shapetrace.cli.app import app

    runner = CliRunner()

    def invoke(*args: str, input: str | None = None):
        return runner.invoke(app, list(args), input=input, catch_exceptions=False)

    return invoke
