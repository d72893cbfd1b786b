"""The README's promises: CI runs exactly its test line; its pasted output is real."""

from __future__ import annotations

import re

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
    """Every table line pasted in the README appears in today's output."""
    from conftest import render

    from shapetrace.app.session import trace_reference
    from shapetrace.attention.config import AttentionConfig, header_lines
    from shapetrace.render.table import TraceView

    live = render(TraceView(trace_reference(AttentionConfig()), header=header_lines(AttentionConfig())), 100)
    live_lines = {line.rstrip() for line in live.splitlines()}
    readme = (ROOT / "README.md").read_text()
    block = readme.split("`shapetrace run --d-model 512 --heads 8` at 100 columns")[1].split("```text\n")[1]
    pasted = [line.rstrip() for line in block.split("```")[0].splitlines() if line.strip() not in ("…", "")]
    missing = [line for line in pasted if line not in live_lines]
    assert missing == []
