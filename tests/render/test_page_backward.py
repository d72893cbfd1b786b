"""The backward on the classroom page (``run --backward --export trace.html``,
:mod:`shapetrace.render.page_backward`): one step per backward row after the forward's summary, each tied
to the forward op it differentiates (its code line marked, its chip outlined, a click on the tie goes
there), a folded block as one step, then what autograd keeps. In a real headless Chromium."""

from __future__ import annotations

import json
import re

import pytest
from conftest import OUTPUT, cli_in_process, keep_screenshot, model_line

VALUES_LINE = model_line("y = weights @ v")
OUTPUT_LINE = model_line("return self.w_o(y)")
NBSP = "\u00a0"


@pytest.fixture(scope="module")
def page_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("page") / "backward.html"
    proc = cli_in_process("run", "--backward", "--export", str(out), env={"COLUMNS": "300"})
    assert proc.returncode == 0, proc.stderr
    return out


def _data(page_file) -> dict:
    html = page_file.read_text(encoding="utf-8")
    return json.loads(html.split('id="trace-data">')[1].split("</script>")[0])


def test_the_page_data_ties_each_grad_row_to_its_forward_op_and_folds_q_s_split(page_file):
    backward = _data(page_file)["backward"]
    rows = backward["rows"]
    assert len(rows) == 17   # 18 rows, q's two split-heads grads folded into one step
    matmul = rows[4]
    assert (matmul["label"], matmul["grad"], matmul["at"]) == ("4", "grad #12 matmul", 12)
    assert matmul["made"][1] == ["operand 1", f"[B=2,{NBSP}H=8,{NBSP}T=6,{NBSP}d_k=64]",
                                 f"(3072,{NBSP}384,{NBSP}64,{NBSP}1)", "new 24 KiB"]
    fold = rows[15]
    assert (fold["label"], fold["grad"], fold["at"], fold["fold"]) == (
        "15-16", "grad #2 transpose, #1 view", 2, "q: the same two grads as v, rows 9-10")
    div = rows[6]
    assert (div["grad"], div["at"]) == ("grad (div)", None)
    assert backward["summary"][0] == ("autograd keeps 10 tensors for the backward: 1.1 MiB in 7 storages "
                                      "(122 KiB of them not parameters)")
    assert backward["saved"][5] == ["5", "#11 softmax", "SoftmaxBackward0", "[B=2, H=8, T=6, T=6]", "2.2 KiB"]


def test_a_page_without_the_backward_has_none(tmp_path):
    out = tmp_path / "forward.html"
    assert cli_in_process("run", "--export", str(out)).returncode == 0
    assert _data(out)["backward"] is None


def _text(page, selector: str) -> str:
    return re.sub(r"\s+", " ", (page.text_content(selector) or "").replace(NBSP, " ")).strip()


@pytest.mark.parametrize("size", [(1280, 800), (1024, 768)], ids=["1280x800", "1024x768"])
def test_clicking_a_grad_row_marks_its_forward_op_and_the_tie_goes_there(browser, page_file, size):
    OUTPUT.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": size[0], "height": size[1]})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(page_file.as_uri())
    page.keyboard.press("End")
    page.keyboard.press("Home")
    for _ in range(18):
        page.keyboard.press("ArrowRight")
    assert _text(page, "#position") == \
        f"backward 1/17 · grad #16 linear · differentiates #16 linear · reference.py:{OUTPUT_LINE}"
    grads = page.eval_on_selector_all("#strip button.grad", "bs => bs.map(b => b.textContent)")
    assert grads[:5] == ["0 ∇#16 linear", "1 ∇#15 view", "2 ∇#14 contiguous", "3 ∇#13 transpose",
                         "4 ∇#12 matmul"]
    assert len(grads) == 17 and grads[15] == "15-16 ∇#2 transpose, #1 view"
    page.click("#strip button.grad >> text='4 ∇#12 matmul'")
    assert _text(page, "#position") == \
        f"backward 5/17 · grad #12 matmul · differentiates #12 matmul · reference.py:{VALUES_LINE}"
    assert page.eval_on_selector_all("#strip button.tied", "bs => bs.map(b => b.textContent)") == ["#12 matmul"]
    assert _text(page, "#code .cur") == f"{VALUES_LINE}y = weights @ v # (B, H, T, d_k)"
    assert page.eval_on_selector_all("#grad .cells span", "s => s.map(x => x.textContent)") == [
        "4", "grad #12 matmul", "[B=2, H=8, T=6, d_k=64]", "(3072, 64, 512, 1)", "24 KiB"]
    made = page.eval_on_selector_all("#grad .made", "ds => ds.map(d => d.textContent)")
    assert [re.sub(r"\s+", " ", m.replace(NBSP, " ")) for m in made] == [
        "→ operand 0 [B=2, H=8, T=6, T=6] (288, 36, 6, 1) new 2.2 KiB",
        "→ operand 1 [B=2, H=8, T=6, d_k=64] (3072, 384, 64, 1) new 24 KiB"]
    assert _text(page, "#grad .sentence") == "dY [B, H, T, d_k]; dA = dY · Bᵀ [B, H, T, T]; dB = Aᵀ · dY [B, H, T, d_k]"
    keep_screenshot(page, f"page-backward-{size[0]}x{size[1]}.png")
    page.click("#grad button.tie")
    assert _text(page, "#position") == f"#12 matmul · ops #0-#16 · reference.py:{VALUES_LINE}"
    assert page.eval_on_selector_all("#strip button.tied", "bs => bs.length") == 0
    page.keyboard.press("End")
    assert _text(page, "#position") == "backward · what autograd keeps · 17 grads"
    assert _text(page, "#saved h2") == "end of the backward pass: what autograd kept for it"
    assert page.eval_on_selector_all("#saved tr", "rs => rs.length") == 10
    assert page.eval_on_selector_all("#saved tr:nth-child(6) td", "s => s.map(x => x.textContent)") == [
        "5", "#11 softmax", "SoftmaxBackward0", "[B=2, H=8, T=6, T=6]", "2.2 KiB"]
    overflow = page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    assert not overflow and errors == []
    page.close()


def test_without_the_backward_the_strip_ends_at_the_forward_summary(browser, tmp_path):
    out = tmp_path / "forward.html"
    assert cli_in_process("run", "--export", str(out)).returncode == 0
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(out.as_uri())
    page.keyboard.press("End")
    assert _text(page, "#position") == "summary · 17 ops"
    assert page.eval_on_selector_all("#strip .part, #strip button.grad", "bs => bs.length") == 0
    page.close()
