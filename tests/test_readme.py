"""The README's promises: CI runs exactly its test line; its pasted output is real."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT


def _bash_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", text, flags=re.S)]


def test_ci_runs_the_readme_test_line_verbatim():
    readme = (ROOT / "README.md").read_text()
    test_line = next(b for b in _bash_blocks(readme) if b.endswith("&& pytest"))
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_line in ci


def test_readme_install_line_runs_the_main_job():
    readme = (ROOT / "README.md").read_text()
    assert any(b.endswith("&& shapetrace run --d-model 512 --heads 8") for b in _bash_blocks(readme))


def test_readme_excerpt_lines_come_from_a_real_run():
    """Every table line pasted in the README appears in today's output of that very command."""
    from typer.testing import CliRunner

    from shapetrace.cli.app import app

    result = CliRunner().invoke(app, ["run", "--d-model", "512", "--heads", "8", "--width", "100"])
    assert result.exit_code == 0, result.output
    live_lines = {line.rstrip() for line in result.output.splitlines()}
    readme = (ROOT / "README.md").read_text()
    block = readme.split("`shapetrace run --d-model 512 --heads 8` at 100 columns")[1].split("```text\n")[1]
    pasted = [line.rstrip() for line in block.split("```")[0].splitlines() if line.strip() not in ("…", "")]
    missing = [line for line in pasted if line not in live_lines]
    assert len(pasted) > 40 and missing == []


@pytest.mark.parametrize("script,dims", [("tiny_vit.py", "B=2,D=48,H=3"), ("tiny_decode.py", "B=2,T=6,D=32,H=4")])
def test_readme_vision_and_decoding_excerpts_come_from_a_real_run(script, dims):
    """The pixels and decoding excerpts (issue 21): every pasted line is in today's output."""
    from conftest import cli_in_process

    result = cli_in_process("trace", f"tests/scripts/{script}", "--dims", dims, "--width", "100", cwd=ROOT)
    assert result.returncode == 0, result.stderr
    live = {line.rstrip() for line in result.stdout.splitlines()}
    readme = (ROOT / "README.md").read_text()
    block = readme.split(f"tests/scripts/{script} --dims {dims}` at 100 columns")[1].split("```text\n")[1]
    pasted = [line.rstrip() for line in block.split("```")[0].splitlines() if line.strip() not in ("…", "")]
    missing = [line for line in pasted if line not in live]
    assert len(pasted) > 15 and missing == []
