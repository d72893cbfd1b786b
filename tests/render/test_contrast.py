"""WCAG 2.1 AA contrast for every text of the classroom page and the SVG/HTML exports, in both themes,
measured in headless Chromium (the system chromium, never a downloaded browser): each text's colour
over its effective background (the memory blocks' fills under their labels included), 4.5:1 for normal
text and 3:1 for large text; and no diagram text below a readable size. ``--ops`` exports a range."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT, cli_in_process, keep_screenshot

MEASURE = (ROOT / "tests" / "contrast.js").read_text(encoding="utf-8")
#: The smallest text, in CSS pixels, at a 1280-pixel-wide window (a projector shows the page at this size).
MIN_PX = 14


def _needed(record: dict) -> float:
    large = record["px"] >= 24 or (record["bold"] and record["px"] >= 18.66)
    return 3.0 if large else 4.5


def _failures(records: list[dict]) -> list[str]:
    return [f"{r['text']!r}: {r['fg']} on {r['bg']} = {r['ratio']:.2f} (needs {_needed(r)})"
            for r in records if r["ratio"] < _needed(r)]


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    out = tmp_path_factory.mktemp("exports")
    paths = {}
    for theme in ("light", "dark"):
        for suffix, extra in ((".html", ()), (".svg", ()), (".static.html", ("--static",))):
            path = out / f"{theme}{suffix}"
            proc = cli_in_process("run", "--break", "skip-transpose", "--export", str(path), "--theme", theme, *extra)
            assert proc.returncode in (0, 1), proc.stderr
            assert path.exists(), proc.stderr
            paths[theme, suffix] = path
    return paths


def _page(browser, path: Path, width: int = 1280, height: int = 900):
    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(path.as_uri())
    return page


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_every_text_of_the_classroom_page_passes_aa_on_every_screen(browser, exports, theme):
    page = _page(browser, exports[theme, ".html"])
    failures, sizes, screens = [], [], 0
    while True:
        records = page.evaluate(MEASURE)
        assert records, "no text measured"
        failures += [f"screen {screens}: {f}" for f in _failures(records)]
        sizes += [(r["px"], r["text"]) for r in records]
        position = page.text_content("#position") or ""
        if position.startswith("summary"):
            break
        if screens == 1:
            keep_screenshot(page, f"contrast-page-{theme}.png")
        page.keyboard.press("ArrowRight")
        screens += 1
    assert screens >= 14
    assert sorted(set(failures)) == []
    assert min(sizes)[0] >= MIN_PX, min(sizes)


def test_the_memory_block_labels_are_measured_over_their_blocks(browser, exports):
    """The diagram's blocks colour their labels' background: a label on the blue block is measured over
    blue, not over the page."""
    page = _page(browser, exports["light", ".html"])
    page.keyboard.press("ArrowRight")  # #1 view: a diagram with coloured blocks
    records = page.evaluate(MEASURE)
    blocks = {r["bg"] for r in records} - {"#ffffff", "#f3f3f3"}
    assert {"#0072b2", "#e69f00"} & blocks, blocks


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("suffix", [".svg", ".static.html"])
def test_every_text_of_the_exports_passes_aa(browser, exports, theme, suffix):
    # an SVG is scaled to fit the window: measured at its natural size (1238 px wide at 100 columns)
    page = _page(browser, exports[theme, suffix], height=2200 if suffix == ".svg" else 900)
    records = page.evaluate(MEASURE)
    assert len(records) > 50
    if suffix == ".svg":
        keep_screenshot(page, f"contrast-export-{theme}.png")
    assert _failures(records) == []
    assert min(r["px"] for r in records) >= MIN_PX


def test_ops_exports_a_range_for_a_slide(tmp_path):
    svg, md = tmp_path / "slide.svg", tmp_path / "slide.md"
    assert cli_in_process("run", "--export", str(svg), "--ops", "9-12").returncode == 0
    text = svg.read_text(encoding="utf-8")
    assert "ops&#160;#9-#12&#160;of&#160;#0-#16" in text or "ops #9-#12 of #0-#16" in text
    assert cli_in_process("run", "--export", str(md), "--ops", "9-12").returncode == 0
    rows = [line.split(" | ")[0] for line in md.read_text(encoding="utf-8").splitlines() if line.startswith("| ")]
    assert rows == ["| #", "| 9", "| 10", "| 11", "| 12"]


@pytest.mark.parametrize(("ops", "message"), [
    ("12-9", "error: --ops 12-9: the range ends before it starts (use --ops 9-12)"),
    ("40-50", "error: --ops 40-50: this run has ops #0-#16"),
    ("abc", "error: --ops 'abc': give op numbers as printed, e.g. --ops 9-12 or --ops 10"),
])
def test_a_bad_op_range_is_one_line_and_exit_2(tmp_path, ops, message):
    proc = cli_in_process("run", "--export", str(tmp_path / "x.svg"), "--ops", ops)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == message
    assert "Traceback" not in proc.stderr and not (tmp_path / "x.svg").exists()


def test_ops_needs_an_export():
    proc = cli_in_process("run", "--ops", "3-4")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: --ops FIRST-LAST only works with --export PATH (a range of ops for a slide)"
