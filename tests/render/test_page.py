"""The interactive classroom page (``--export trace.html``) in a real headless Chromium, driven
by real key presses through playwright (the system chromium, never a downloaded browser)."""

from __future__ import annotations

import re

import pytest
from conftest import OUTPUT, cli_in_process, keep_screenshot, model_line

#: The model lines the page cites, found by their text (a line added above them moves them all).
Q_LINE = model_line("q = self.split_heads(self.w_q(x))")
SCORES_LINE = model_line("scores = q @ k_t")
SOFTMAX_LINE = model_line("weights = torch.softmax(scores, dim=-1)")
SKIP_LINE = model_line("return x.view(B, self.heads, T, self.d_k)", "broken.py")

NBSP = "\u00a0"




@pytest.fixture(scope="module")
def page_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("page") / "trace.html"
    proc = cli_in_process("run", "--export", str(out), env={"COLUMNS": "300"})  # the path on one line
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().startswith(f"exported to {out} (light theme): open it in a browser")
    return out


def test_the_page_is_one_self_contained_file(page_file):
    html = page_file.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "<title>shapetrace · multi-head self-attention" in html
    for outside in ("http://", "https://", "<link", "src=", "url(", "@import"):
        assert outside not in html, outside
    assert "</script" not in html.split('id="trace-data">')[1].split("</script>")[0]  # data cannot close it


def _text(page, selector: str) -> str:
    return (page.text_content(selector) or "").replace(NBSP, " ")


def test_arrow_keys_and_space_step_through_the_ops(browser, page_file):
    OUTPUT.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(page_file.as_uri())
    assert _text(page, "#position") == f"#0 linear · ops #0-#16 · reference.py:{Q_LINE}"
    assert _text(page, "#code .cur") == f"{Q_LINE}q = self.split_heads(self.w_q(x))  # (B, H, T, d_k)"
    assert [_text(page, f"#row-cells td:nth-child({i})") for i in range(1, 7)] == [
        "0", "linear", "[B=2, T=6, D=512]", "(3072, 512, 1)", "new 24 KiB", "contiguous"]
    for _ in range(10):
        page.keyboard.press("ArrowRight")
    assert _text(page, "#position") == f"#10 matmul · ops #0-#16 · reference.py:{SCORES_LINE}"
    assert _text(page, "#code .cur") == f"{SCORES_LINE}scores = q @ k_t / math.sqrt(self.d_k)  # (B, H, T, T)"
    assert _text(page, "#equation") == "q @ k_t: [B, H, T, d_k] @ [B, H, d_k, T] -> [B, H, T, T]"
    inputs = [re.sub(r"\s+", " ", _text(page, f"#inputs div:nth-child({i})")) for i in (1, 2)]
    assert inputs == ["q [B=2, H=8, T=6, d_k=64] strides (3072, 64, 512, 1)",
                      "k_t [B=2, H=8, d_k=64, T=6] strides (3072, 64, 1, 512)"]
    assert _text(page, "#sentence").startswith("scores: sums over d_k, giving one [T, T] matrix per (B, H)")
    assert "hidden copies inside matmul" in _text(page, "#diagram")
    keep_screenshot(page, "page-light.png")
    page.keyboard.press(" ")
    assert _text(page, "#position") == f"#11 softmax · ops #0-#16 · reference.py:{SOFTMAX_LINE}"
    page.keyboard.press("ArrowLeft")
    assert _text(page, "#position") == f"#10 matmul · ops #0-#16 · reference.py:{SCORES_LINE}"
    page.keyboard.press("t")
    assert page.get_attribute("html", "data-theme") == "dark"
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(12, 12, 12)"
    page.keyboard.press(" ")
    page.keyboard.press(" ")
    assert _text(page, "#equation") == "weights @ v: [B, H, T, T] @ [B, H, T, d_k] -> [B, H, T, d_k]"
    keep_screenshot(page, "page-dark.png")
    page.keyboard.press("End")
    assert _text(page, "#position") == "summary · 17 ops"
    assert _text(page, "#summary").endswith(
        "✓ checked all 16 ops that could carry a layout bug: every axis keeps its meaning from input to output; "
        "held on the values: batch entries stay apart, each token depends on itself, heads stay apart")
    page.keyboard.press("Home")
    assert _text(page, "#position") == f"#0 linear · ops #0-#16 · reference.py:{Q_LINE}"
    page.click("#strip button:nth-child(3)")
    assert _text(page, "#row-cells td:nth-child(6)") == "strided"
    assert all(url.startswith("file:") for url in requests), requests  # nothing from the network
    page.close()


def test_static_html_is_still_there_for_slides(tmp_path):
    out = tmp_path / "slides.html"
    proc = cli_in_process("run", "--export", str(out), "--static")
    assert proc.returncode == 0, proc.stderr
    html = out.read_text(encoding="utf-8")
    text = re.sub(r"<[^>]+>", "", html)
    assert "ArrowRight" not in html and "  4-5 view, transpose  k: the same two ops as q, #1-#2" in text


@pytest.fixture(scope="module")
def broken_page(tmp_path_factory):
    out = tmp_path_factory.mktemp("broken") / "broken.html"
    proc = cli_in_process("run", "--break", "skip-transpose", "--export", str(out))
    assert proc.returncode == 1, proc.stderr  # the run found errors
    return out


def test_errors_are_marked_in_the_strip_and_the_title(browser, broken_page):
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(broken_page.as_uri())
    marked = page.eval_on_selector_all("#strip button.wrong", "bs => bs.map(b => b.textContent)")
    assert marked == ["#1 view ✗"]   # one bug, one finding: the merge and projection it reaches are listed under it
    page.click("#strip button:nth-child(2)")
    assert _text(page, "#position") == f"#1 view · ✗ error · ops #0-#13 · broken.py:{SKIP_LINE}"
    assert _text(page, "#notes").startswith("✗ error mixed-axis: view #1 turns")
    colour = page.evaluate("getComputedStyle(document.querySelector('#strip button.wrong')).borderTopColor")
    assert colour == "rgb(179, 38, 30)"  # --bad in the light theme
    page.close()


def test_plus_and_minus_change_the_text_size_and_the_code_line_is_whole(browser, broken_page):
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(broken_page.as_uri())
    page.click("#strip button:nth-child(2)")
    cur = page.query_selector("#code .cur")
    box, panel = cur.bounding_box(), page.query_selector("#code-panel").bounding_box()
    assert box["x"] + box["width"] <= panel["x"] + panel["width"] + 1  # wrapped inside the panel, not cut
    assert page.evaluate("document.querySelector('#code').scrollWidth <= document.querySelector('#code').clientWidth")
    assert "return x.view(B, self.heads, T, self.d_k)" in _text(page, "#code .cur")
    page.keyboard.press("+")
    page.keyboard.press("+")
    assert page.evaluate("document.querySelector('main').style.zoom") == "1.2"
    page.keyboard.press("-")
    assert page.evaluate("document.querySelector('main').style.zoom") == "1.1"
    page.keyboard.press("End")
    assert page.evaluate("getComputedStyle(document.getElementById('code-panel')).display") == "none"
    summary, main = page.query_selector("#op-panel").bounding_box(), page.query_selector("main").bounding_box()
    assert summary["width"] == main["width"]  # the summary takes the whole width, not the code's column
    page.close()


def test_a_wrapped_code_line_goes_on_under_its_own_code(browser, page_file):
    """Each shown line keeps its indent (less the indent all shown lines share) as padding, its shape
    comment 2 spaces after the code: a wrapped line goes on under its code, never under the numbers."""
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(page_file.as_uri())
    rows = dict(page.eval_on_selector_all("#code .src", "ss => ss.map(s => [s.textContent, s.style.paddingLeft])"))
    assert rows["def forward(self, x: torch.Tensor) -> torch.Tensor:"] == "2ch"   # the 4 shared columns left out
    assert rows["q = self.split_heads(self.w_q(x))  # (B, H, T, d_k)"] == "6ch"
    pieces = page.evaluate("() => { const r = document.createRange();"
                           " r.selectNodeContents(document.querySelector('#code .cur .src'));"
                           " return Array.from(r.getClientRects()).map(b => b.left); }")
    numbers = page.query_selector("#code .cur .ln").bounding_box()
    assert len({round(x) for x in pieces}) > 1 and min(pieces) > numbers["x"] + numbers["width"]
    page.close()
