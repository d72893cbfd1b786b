"""The classroom page scales to whole models and small windows (issue 35), measured in headless
Chromium (the system chromium, never a downloaded browser): the strip of ops folds repeated layers into
chips, keeps a bounded height of its own and scrolls inside, and never covers the op's row, the
highlighted code line or the memory diagram, at 1024×768 and 1280×800, in both themes and after zooming.
A whole 80-layer model exports in a file proportionate to one layer, and the SVG export fetches nothing.

Geometry is asserted, never pixels; the screenshots go to tests/output/ for a person to look at."""

from __future__ import annotations

import json
import re

import pytest
from conftest import OUTPUT, ROOT, cli_in_process, keep_screenshot

SIZES = [(1024, 768), (1280, 800)]
THEMES = ["light", "dark"]
#: Each size in one theme, both themes covered: a theme changes colours and nothing that takes room
#: (test_a_theme_changes_colours_only), so the geometry asserted at one theme holds at the other. Each
#: size in both themes measured the same page twice (16 CPU-s of Chromium a run).
SIZED = list(zip(SIZES, THEMES))
#: The strip's share of the window at most (its CSS caps it at 22% of the height).
STRIP_SHARE = 0.25


def _export(tmp_path_factory, name: str, *args: str):
    out = tmp_path_factory.mktemp(name) / f"{name}.html"
    proc = cli_in_process(*args, "--export", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def gpt_page(tmp_path_factory):
    """nanoGPT-style pre-norm blocks (tests/scripts/tiny_gpt.py): 86 ops in 4 identical layers."""
    return _export(tmp_path_factory, "gpt", "trace", str(ROOT / "tests/scripts/tiny_gpt.py"),
                   "--dims", "B=2,T=6,D=64,H=4")


@pytest.fixture(scope="module")
def llama_page(tmp_path_factory):
    """The README's 80-layer Llama at llama3-70b sizes on the meta device (tests/scripts/llama_meta.py,
    written in the style of transformers' modeling_llama): 2,971 ops."""
    return _export(tmp_path_factory, "llama", "trace", str(ROOT / "tests/scripts/llama_meta.py"),
                   "--dims", "B=1,T=16,D=8192,H=64,H_kv=8")


def _box(page, selector: str) -> dict:
    box = page.eval_on_selector(selector, "e => { const r = e.getBoundingClientRect();"
                                          " return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; }")
    return box


def _position_of(page, op_name: str, module_part: str) -> int:
    """The page position of the first op named ``op_name`` in a module whose path contains ``module_part``."""
    return page.evaluate("([name, part]) => { const d = JSON.parse(document.getElementById('trace-data').textContent);"
                         " const full = i => d.ops[i].same === undefined ? d.ops[i] : d.ops[d.ops[i].same];"
                         " return d.ops.findIndex((o, i) => full(i).op === name && o.module.includes(part)); }",
                         [op_name, module_part])


def _open(browser, path, size, theme, position: int):
    page = browser.new_page(viewport={"width": size[0], "height": size[1]})
    page.goto(f"{path.as_uri()}#{position}")
    if page.get_attribute("html", "data-theme") != theme:
        page.keyboard.press("t")
    return page


def _assert_nothing_covered(page, size, diagram_shows: bool = True):
    """The strip is bounded; the row, the highlighted code line and the diagram's top are on screen,
    inside their panels' views, and above the strip (zoomed in, the diagram is reached by scrolling its
    panel, never hidden under the strip)."""
    height = size[1]
    strip, footer = _box(page, "#strip"), _box(page, "footer")
    assert strip["bottom"] - strip["top"] <= STRIP_SHARE * height + 1
    assert footer["bottom"] <= height + 1 and strip["bottom"] <= footer["top"] + 1
    op_panel, code_panel = _box(page, "#op-panel"), _box(page, "#code-panel")
    assert op_panel["bottom"] <= strip["top"] + 1 and code_panel["bottom"] <= strip["top"] + 1
    row = _box(page, "#row-cells")
    assert op_panel["top"] <= row["top"] and row["bottom"] <= op_panel["bottom"]
    assert row["right"] <= op_panel["right"] + 1  # every column on screen: the cells wrap, none is clipped
    assert page.evaluate("[...document.querySelectorAll('#row-cells td')].every(td => {"
                         " const r = td.getBoundingClientRect(), p = document.getElementById('op-panel')"
                         ".getBoundingClientRect(); return r.right <= p.right + 1 && r.left >= p.left - 1; })")
    # the equation and the sentence wrap inside the panel (a label cut short, "transpose(2,…", once left
    # a bracket open and glued the rest of the equation into one line that ran off the panel)
    assert page.evaluate("['equation', 'sentence'].every(id => { const e = document.getElementById(id);"
                         " return e.scrollWidth <= e.clientWidth + 1; })")
    cur = _box(page, "#code .cur")
    assert code_panel["top"] <= cur["top"] and cur["bottom"] <= code_panel["bottom"] + 1
    diagram = _box(page, "#diagram")
    if diagram_shows:
        assert op_panel["top"] < diagram["top"] < op_panel["bottom"] - 60  # at least its first lines show
    else:
        page.eval_on_selector("#op-panel", "p => { p.scrollTop = p.scrollHeight; }")
        diagram, op_panel = _box(page, "#diagram"), _box(page, "#op-panel")
        assert diagram["bottom"] <= op_panel["bottom"] + 1 and op_panel["bottom"] <= strip["top"] + 1
        page.eval_on_selector("#op-panel", "p => { p.scrollTop = 0; }")


@pytest.mark.parametrize("size,theme", SIZED, ids=lambda s: f"{s[0]}x{s[1]}" if isinstance(s, tuple) else s)
def test_a_small_gpt_page_leaves_the_row_code_and_diagram_uncovered(browser, gpt_page, size, theme):
    page = _open(browser, gpt_page, size, theme, 0)
    position = _position_of(page, "matmul", "layers.0")
    page.goto(f"{gpt_page.as_uri()}#{position}")
    if page.get_attribute("html", "data-theme") != theme:
        page.keyboard.press("t")
    _assert_nothing_covered(page, size)
    # layers 1-3 repeat layer 0 fact for fact: one chip for the three, as the table's one line
    groups = page.eval_on_selector_all("#strip button.group", "bs => bs.map(b => b.textContent)")
    assert groups == ["▾ layers.0", "▸ layers.1-3"]
    OUTPUT.mkdir(parents=True, exist_ok=True)
    keep_screenshot(page, f"page-gpt-{size[0]}x{size[1]}-{theme}.png")
    page.close()


@pytest.mark.parametrize("size,theme", SIZED, ids=lambda s: f"{s[0]}x{s[1]}" if isinstance(s, tuple) else s)
def test_an_80_layer_page_folds_its_strip_and_covers_nothing(browser, llama_page, size, theme):
    page = _open(browser, llama_page, size, theme, 0)
    position = _position_of(page, "matmul", "layers.41.self_attn")
    page.goto(f"{llama_page.as_uri()}#{position}")
    if page.get_attribute("html", "data-theme") != theme:
        page.keyboard.press("t")
    _assert_nothing_covered(page, size)
    assert page.text_content("#position").endswith("· model.layers.41.self_attn")
    labels = page.eval_on_selector_all("#strip button.group", "bs => bs.map(b => b.textContent)")
    assert labels[:3] == ["▸ model.layers.0", "▾ model.layers.1-79", "▸ model.layers.1"]
    assert "▾ model.layers.41" in labels and "▸ model.layers.42" in labels
    assert page.eval_on_selector("#strip", "s => s.querySelectorAll('button').length") < 160  # not 2,971 chips
    assert page.eval_on_selector("#strip button.now", "b => b.textContent").startswith("#")
    OUTPUT.mkdir(parents=True, exist_ok=True)
    keep_screenshot(page, f"page-llama-{size[0]}x{size[1]}-{theme}.png")
    page.close()


def test_a_closed_layer_chip_jumps_there_and_opens(browser, llama_page):
    page = _open(browser, llama_page, (1280, 800), "light", 0)
    page.click("#strip button.group:text-is('▸ model.layers.1-79')")
    assert page.text_content("#position").startswith("#46 ")
    assert page.text_content("#position").endswith("· model.layers.1.input_layernorm")
    page.click("#strip button.group:text-is('▾ model.layers.1-79')")  # an open chip closes
    assert page.eval_on_selector_all("#strip button.group", "bs => bs.map(b => b.textContent)")[:2] == [
        "▸ model.layers.0", "▸ model.layers.1-79"]
    page.close()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_after_zooming_the_code_line_and_row_stay_on_screen(browser, gpt_page, size):
    page = _open(browser, gpt_page, size, "light", 0)
    page.goto(f"{gpt_page.as_uri()}#{_position_of(page, 'softmax', 'layers.0')}")
    for _ in range(6):
        page.keyboard.press("+")
    assert page.evaluate("document.querySelector('main').style.zoom") == "1.6"
    _assert_nothing_covered(page, size, diagram_shows=False)
    # the equation wraps at this size, but never inside its arrow
    page.keyboard.press("ArrowRight")
    assert page.eval_on_selector_all("#equation .arrow, #sentence .arrow", "as => as.length") >= 1
    assert page.eval_on_selector_all("#equation .arrow, #sentence .arrow",
                                     "as => as.every(a => a.getClientRects().length === 1)")
    keep_screenshot(page, f"page-gpt-zoomed-{size[0]}x{size[1]}.png")
    page.close()


@pytest.fixture(scope="module")
def reference_page(tmp_path_factory):
    """The reference model, as the README's run line exports it: 17 ops, each with its memory diagram."""
    return _export(tmp_path_factory, "reference", "run")


#: Every element of the shown diagram (its <pre>, each coloured run, each line) and how far its right edge
#: lies past the op panel's inner right edge (its padding box); the pre's own overflow (a row that would
#: need the panel's horizontal scroll).
_DIAGRAM_OVERFLOW = """() => {
  const panel = document.getElementById('op-panel'), p = panel.getBoundingClientRect();
  const inner = p.right - parseFloat(getComputedStyle(panel).paddingRight) - panel.clientLeft;
  const pre = document.querySelector('#diagram pre');
  if (!pre) return null;
  const past = [pre, ...pre.querySelectorAll('*')].map(e => e.getBoundingClientRect().right - inner);
  const range = document.createRange(); range.selectNodeContents(pre);
  past.push(...[...range.getClientRects()].map(r => r.right - inner));
  return {past: Math.max(...past), scroll: pre.scrollWidth - pre.clientWidth,
          panelScroll: panel.scrollWidth - panel.clientWidth};
}"""


@pytest.mark.parametrize("size,theme,zoom", [(size, theme if zoom == 0 else other, zoom)
                                             for (size, theme), other in zip(SIZED, reversed(THEMES))
                                             for zoom in (0, 3)],
                         ids=lambda v: f"{v[0]}x{v[1]}" if isinstance(v, tuple) else
                         {0: "plain", 3: "zoomed"}.get(v, v))
def test_every_memory_diagram_fits_its_panel(browser, reference_page, size, theme, zoom):
    # issue 35: at 1024×768 the diagram's rows and its walk line ran 80 px past the op panel's right edge
    # (rendered at 76 columns of 14 px type in a 546 px panel), reachable only by scrolling sideways
    page = _open(browser, reference_page, size, theme, 0)
    for _ in range(zoom):
        page.keyboard.press("+")
    ops = page.evaluate("JSON.parse(document.getElementById('trace-data').textContent).ops.length")
    shown = {}
    for i in range(ops):
        page.evaluate(f"location.hash = '#{i}'")
        page.wait_for_function(f"document.getElementById('position').textContent.startsWith('#{i} ')")
        got = page.evaluate(_DIAGRAM_OVERFLOW)
        if got is not None:
            shown[i] = got
    assert len(shown) == ops, sorted(shown)   # every op of the reference draws a diagram
    assert {i: g for i, g in shown.items() if g["past"] > 1 or g["scroll"] > 0 or g["panelScroll"] > 0} == {}
    font = page.eval_on_selector("#diagram pre", "e => parseFloat(getComputedStyle(e).fontSize)")
    assert font >= (14 if zoom == 0 else 9), font   # readable: the page's smallest type, unzoomed
    OUTPUT.mkdir(parents=True, exist_ok=True)
    page.evaluate("location.hash = '#14'")   # merge_heads' copy: two diagrams, its widest rows and walk lines
    keep_screenshot(page, f"page-diagram-{size[0]}x{size[1]}-{theme}-{'zoomed' if zoom else 'plain'}.png")
    page.close()


_COLOUR = re.compile(r"#[0-9a-fA-F]{6}\b")


def test_a_theme_changes_colours_only(gpt_page):
    """Why the geometry above is measured in one theme per size: the dark theme's CSS sets colour variables
    and the colour scheme and nothing else, no other rule reads the theme, and every op's memory diagram in
    the dark theme is its light one with other colours (same text, weights, decorations, spans)."""
    from shapetrace.render.page import CSS

    themed = re.findall(r"\[data-theme=\"dark\"\]\s*\{([^}]*)\}", CSS)
    assert len(themed) == 1 and CSS.count("data-theme") == 1
    declarations = [d.strip() for d in themed[0].split(";") if d.strip()]
    assert declarations and all(re.fullmatch(r"--[a-z]+:\s*#[0-9a-f]{6}", d) or d == "color-scheme: dark"
                                for d in declarations), declarations
    html = gpt_page.read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script[^>]*id="trace-data"[^>]*>(.*?)</script>', html, re.S).group(1))
    pairs = {(op["diagram"]["light"], op["diagram"]["dark"]) for op in data["ops"] if op.get("diagram")}
    assert len(pairs) >= 10
    for light, dark in pairs:
        assert light != dark and data["diagrams"][light] != data["diagrams"][dark]
        assert _COLOUR.sub("#colour", data["diagrams"][light]) == _COLOUR.sub("#colour", data["diagrams"][dark])


def test_an_80_layer_export_is_proportionate(llama_page):
    """83 s and 35 MB before (every op's row and two diagrams, 2,971 times); a folded layer's ops now
    refer to the op they repeat, and each distinct diagram is kept once."""
    assert llama_page.stat().st_size < 2_000_000
    html = llama_page.read_text(encoding="utf-8")
    for outside in ("http://", "https://", "<link", "src=", "url(", "@import"):
        assert outside not in html, outside


def test_the_svg_export_fetches_no_font(tmp_path):
    out = tmp_path / "slide.svg"
    proc = cli_in_process("run", "--export", str(out))
    assert proc.returncode == 0, proc.stderr
    svg = out.read_text(encoding="utf-8")
    assert "@font-face" not in svg and not re.search(r"url\(\s*['\"]?(https?:|//)", svg)  # no web font
    assert 'font-family: "DejaVu Sans Mono", Menlo, Consolas, "Liberation Mono", monospace;' in svg
