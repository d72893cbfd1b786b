"""Lessons 9-12 (KV cache, images, rotary, fused kernels) and the lesson markup they brought:
``diagram=N``, ``predict=NAME``, ``expect=KIND``. Every name the tables print and every number the
prose states is recomputed here, with torch."""

from __future__ import annotations

import io
import math
import re

import pytest
import torch
import torch.nn.functional as F

from shapetrace.app.lessons import lesson_blocks, traced_blocks
from shapetrace.engine.formatting import fmt_shape
from shapetrace.exercises.content import load
from shapetrace.exercises.live import fence_options, split_live, split_screens

CURRICULUM = load()
NEW = (9, 10, 11, 12)


@pytest.fixture(scope="module")
def blocks():
    """Every block of lessons 9-12, examples traced once."""
    return {n: lesson_blocks(CURRICULUM.lesson(n)) for n in NEW}


def examples(blocks, number):
    return [b for b in blocks[number] if b.kind == "example"]


def shapes(block) -> list[str]:
    return [fmt_shape(e.output) for e in block.trace.events if e.output is not None]


def shown(block) -> list[tuple[str, str]]:
    return [(d.severity, d.kind) for d in block.trace.diagnostics if d.severity != "note"]


def text(number: int) -> str:
    return " ".join(CURRICULUM.lesson(number).text().split())


def render(blocks, width=80) -> str:
    from rich.console import Console

    from shapetrace.render.lessons import print_lesson

    buf = io.StringIO()
    print_lesson(blocks, Console(file=buf, width=width, color_system=None, legacy_windows=False))
    return buf.getvalue()


# -- the curriculum ------------------------------------------------------------------------------

def test_lessons_lists_nine_to_twelve_after_the_first_eight(cli):
    import json

    result = cli("lessons", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [d["lesson"] for d in data][:12] == list(range(1, 13))
    assert [d["title"] for d in data[8:12]] == ["Decoding with a key/value cache", "Images as tokens",
                                             "Rotary positions", "Fused attention kernels"]
    dirs = [lesson.folder.name for lesson in CURRICULUM.lessons[8:12]]
    assert dirs == ["09_kv_cache", "10_images", "11_rotary", "12_fused_kernels"]
    assert [CURRICULUM.lesson(n).topics for n in NEW] == [("kv-cache",), ("images",), ("rotary",), ("sdpa",)]


@pytest.mark.parametrize("number", NEW)
def test_each_new_lesson_has_every_kind_of_moment(number):
    """Live examples, a memory diagram, a predict moment and a bug shown live."""
    fences = [fence_options(dims) for kind, _, dims in split_live(CURRICULUM.lesson(number).text())
              if kind == "live"]
    assert len(fences) >= 2
    assert any(f.diagram is not None for f in fences)
    assert any(f.predict for f in fences)
    assert any(f.expect for f in fences)


@pytest.mark.parametrize("number", NEW)
def test_bug_examples_show_their_bug_and_the_others_show_none(blocks, number):
    """An ``expect=`` example gets exactly its error; every other example traces with no error,
    warning or exception (no false diagnostic in a lesson)."""
    for block in examples(blocks, number):
        if block.expect == "raises":
            assert block.expect_met and isinstance(block.trace.exception, RuntimeError), block.body
            failed = len(block.trace.events) - 1   # the call that raised is the last row
            assert all(d.severity == "note" or (d.severity == "error" and d.event == failed)
                       for d in block.trace.diagnostics), (block.body, shown(block))
        elif block.expect:
            assert block.expect_met, block.body
            assert shown(block) == [("error", block.expect)], (block.body, shown(block))
            assert block.trace.exception is None
        else:
            assert block.expect_met is None
            assert shown(block) == [] and block.trace.exception is None, (block.body, shown(block))


def _run_plain(code: str) -> dict:
    """The example run by torch alone, without the tracer."""
    import types

    import einops

    ns = {"torch": torch, "F": F, "math": math, "rearrange": einops.rearrange,
          "shapetrace": types.SimpleNamespace(name=lambda t, names: t)}
    with torch.no_grad():
        exec(code, ns)
    return ns


@pytest.mark.parametrize("number", NEW)
def test_predict_answers_are_torchs(blocks, number):
    asked = [b for b in examples(blocks, number) if b.predict]
    assert asked
    for block in asked:
        expected = tuple(_run_plain(block.body)[block.predict].shape)
        assert block.answer == expected
        sizes = tuple(int(part.rsplit("=", 1)[-1]) for part in block.answer_named.strip("[]").split(", "))
        assert sizes == expected, block.answer_named


@pytest.mark.parametrize("number", NEW)
def test_diagram_is_drawn_under_its_op(blocks, number):
    for block in examples(blocks, number):
        if block.diagram is None:
            continue
        assert 0 <= block.diagram < len(block.trace.events)
        out = render([block], width=100)
        rows = out.splitlines()
        start = next(i for i, line in enumerate(rows) if re.match(rf"\s*{block.diagram} \w", line))
        after = "\n".join(rows[start:start + 30])
        assert re.search(r"^\s*memory\s+\d+ blocks", after, re.M), after


# -- the names the tables print ------------------------------------------------------------------

def test_lesson_9_names_the_cache_and_the_one_query(blocks):
    prefill, steps, causal, gqa, wrong = examples(blocks, 9)
    assert shapes(prefill)[-1] == "[B=1, H=2, T=4, d_k=4]"
    got = shapes(steps)
    assert got.count("[B=1, H=2, T_new=1, d_k=4]") == 4            # q and k at each of the two steps
    assert "[B=1, H=2, T+1=5, d_k=4]" in got and "[B=1, H=2, T+2=6, d_k=4]" in got
    assert "[B=1, H=2, T_new=1, T+1=5]" in got and "[B=1, H=2, T_new=1, T+2=6]" in got
    cats = [e for e in steps.trace.events if e.op == "cat"]
    assert [e.index for e in cats] == [6, 15] and steps.diagram == 6
    assert [e.copy_bytes for e in cats] == [160, 192]
    assert steps.answer == (1, 2, 1, 6) and steps.answer_named == "[B=1, H=2, T_new=1, T+2=6]"
    assert shapes(causal) == ["[B=1, H=2, T_new=1, d_k=4]"]
    assert shapes(gqa) == ["[B=1, H_kv=2, T+1=5, d_k=4]", "[B=1, H_kv=2, 1, T+1=5, d_k=4]",
                           "[B=1, H_kv=2, n_rep=2, T+1=5, d_k=4]", "[B=1, H=4, T+1=5, d_k=4]",
                           "[B=1, H=4, d_k=4, T+1=5]", "[B=1, H=4, T_new=1, T+1=5]"]
    assert [e.copy_bytes for e in gqa.trace.events][:4] == [160, 0, 0, 320]
    assert "Sizes of tensors must match" in str(wrong.trace.exception)


def test_lesson_10_names_patches_class_token_and_windows(blocks):
    patches, bug, windows = examples(blocks, 10)
    got = shapes(patches)
    for named in ("[B=2, D=8, Hp=2, Wp=2]", "[B=2, D=8, N=4]", "[B=2, N=4, D=8]", "[B=2, 1+N=5, D=8]",
                  "[B=2, 1+N=5, H=2, d_k=4]", "[B=2, H=2, 1+N=5, d_k=4]"):
        assert named in got, (named, got)
    assert patches.answer == (2, 5, 8) and patches.answer_named == "[B=2, 1+N=5, D=8]"
    assert shapes(bug)[1] == "[B=2, D/2=4, !D%2·N=8]" and bug.diagram == 1
    assert shapes(windows)[1:] == ["[B=2, nH=2, nW=2, wh=2, ww=2, D=8]", "[B=2, nH=2, nW=2, wh=2, ww=2, D=8]",
                                   "[B·nH·nW=8, wh·ww=4, D=8]", "[B·nH·nW=8, wh·ww=4, H=2, d_k=4]",
                                   "[B·nH·nW=8, H=2, wh·ww=4, d_k=4]"]
    # the mixed-axis fix is worded for heads; the lesson says so (revisit the prose when the engine changes)
    (error,) = [d for d in bug.trace.diagnostics if d.severity == "error"]
    assert "x.flatten(2).transpose(1, 2) turns [B, D, Hp, Wp] into [B, N, D]" in error.fix
    assert "The axis to move is the channel axis, as the error's fix says" in text(10)
    copy = next(e for e in windows.trace.events if e.op == "contiguous")
    assert copy.copy_bytes == 1024


def test_lesson_11_names_the_halves_and_the_table(blocks):
    rope, wrong, square = examples(blocks, 11)
    got = shapes(rope)
    assert got[1:] == ["[1, 1, T=4, d_k=4]", "[1, 1, T=4, d_k=4]", "[B=1, H=2, T=4, d_k[0:2]=2]",
                       "[B=1, H=2, T=4, d_k[2:4]=2]", "[B=1, H=2, T=4, d_k=4]"]
    assert rope.diagram == 3 and rope.trace.events[3].output.stride == (32, 16, 4, 1)
    assert rope.answer == (1, 1, 4, 4) and rope.answer_named == "[1, 1, T=4, d_k=4]"
    assert "must match the size of tensor b" in str(wrong.trace.exception)
    # at H == T torch runs it; the names show the table's T meeting the heads
    (error,) = square.trace.diagnostics
    mul = next(e for e in square.trace.events if e.op == "mul")
    assert (error.kind, error.event) == ("broadcast-mismatch", mul.index)
    assert "axis -3 pairs T (tokens) of the first with H (heads) of the second" in error.message


def test_lesson_12_names_the_kernel_calls(blocks):
    layout, masks, gqa, scale = examples(blocks, 12)
    assert shapes(layout) == ["[B=1, T=5, H=2, d_k=4]", "[B=1, T=5, H=2, d_k=4]"]
    assert masks.trace.exception is None                             # assert_close passed
    assert "[B=1, H=2, T=5, d_k=4]" in shapes(masks)
    assert shapes(gqa) == ["[B=1, H=4, T=5, d_k=2]"]
    assert shapes(scale)[-1] == "[B=1, H=64, T=4096, T=4096]"
    assert scale.trace.events[-1].alloc_bytes == 2 ** 31
    assert scale.answer == (1, 64, 4096, 4096)


# -- the numbers and claims in the prose ---------------------------------------------------------

def test_lesson_9_claims_come_from_torch():
    t = text(9)
    cache = torch.zeros(1, 2, 4, 4)
    step1 = torch.cat([cache, torch.zeros(1, 2, 1, 4)], dim=2)
    step2 = torch.cat([step1, torch.zeros(1, 2, 1, 4)], dim=2)
    assert f"({step1.nbytes} B, then {step2.nbytes} B at the next step)" in t
    # is_causal with one query and five keys: the mask is [1, 0, 0, 0, 0], key 0 only
    q, k = torch.randn(1, 1, 1, 4), torch.randn(1, 1, 5, 4)
    weights = F.scaled_dot_product_attention(q, k, torch.eye(5).view(1, 1, 5, 5), is_causal=True)
    assert weights.flatten().tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]
    mask = torch.ones(1, 5, dtype=torch.bool).tril()
    assert mask.int().flatten().tolist() == [1, 0, 0, 0, 0] and "that mask is `[1, 0, 0, 0, 0]`" in t
    # several new queries: tril(T_k - T_q) lets the last query see every key, the first all but the new ones
    assert torch.ones(1, 5).tril(5 - 1).all()
    assert torch.ones(3, 5).tril(5 - 3).sum(-1).tolist() == [3.0, 4.0, 5.0]
    assert "`ones(T_q, T_k).tril(T_k - T_q)`" in t
    # GQA: the cache holds H_kv heads; repeated for scoring it takes H / H_kv times more
    kv = torch.zeros(1, 2, 5, 4)
    rep = kv[:, :, None].expand(1, 2, 2, 5, 4).reshape(1, 4, 5, 4)
    assert f"The cache (op 0) holds {kv.nbytes} B; the repeated keys (op 3) take {rep.nbytes} B" in t
    # one-token prompt: the wrong axis runs
    wrong = torch.cat([torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 1, 4)], dim=1)
    assert f"the cache comes out `{list(wrong.shape)}`" in t
    with pytest.raises(RuntimeError):
        torch.cat([torch.zeros(1, 2, 4, 4), torch.zeros(1, 2, 1, 4)], dim=1)


def test_lesson_10_claims_come_from_torch():
    t = text(10)
    grid = torch.arange(2 * 8 * 2 * 2.0).view(2, 8, 2, 2)          # (B, D, Hp, Wp)
    wrong = grid.view(2, 4, 8)
    right = grid.flatten(2).transpose(1, 2)
    assert torch.equal(wrong[0, 0], torch.cat([grid[0, 0].flatten(), grid[0, 1].flatten()]))
    assert not torch.equal(wrong, right) and wrong.shape == right.shape
    assert '"token" is channel 0 of all 4 patches followed by channel 1 of all 4 patches' in t
    assert "N = 4 tokens, 5 with the class token" in t
    x = torch.zeros(2, 4, 4, 8).view(2, 2, 2, 2, 2, 8).permute(0, 1, 3, 2, 4, 5)
    windows = x.contiguous().view(-1, 4, 8)
    assert windows.shape[0] == 8 and "`B·nH·nW = 8`" in t
    assert windows.nbytes == 1024 and "(1 KiB)" in t
    with pytest.raises(RuntimeError):
        x.view(-1, 4, 8)
    # each window is a 2 x 2 square of patches, not a row
    grid_ids = torch.arange(16.0).view(1, 4, 4, 1)
    first = grid_ids.view(1, 2, 2, 2, 2, 1).permute(0, 1, 3, 2, 4, 5).reshape(-1, 4)[0]
    assert first.tolist() == [0.0, 1.0, 4.0, 5.0]


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _hf_rope(x, pos):
    d = x.shape[-1]
    inv = 1.0 / 10000 ** (torch.arange(0, d, 2).double() / d)
    emb = torch.cat((torch.outer(pos, inv),) * 2, dim=-1)
    return x * emb.cos() + _rotate_half(x) * emb.sin()


def _meta_rope(x, pos):
    d = x.shape[-1]
    inv = 1.0 / 10000 ** (torch.arange(0, d, 2).double() / d)
    cis = torch.polar(torch.ones(len(pos), d // 2, dtype=torch.double), torch.outer(pos, inv))
    return torch.view_as_real(torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2)) * cis).flatten(-2)


def test_lesson_11_claims_come_from_torch():
    t = text(11)
    torch.manual_seed(0)
    q, k = torch.randn(8, dtype=torch.double), torch.randn(8, dtype=torch.double)
    pos = torch.arange(10.0, dtype=torch.double)
    qs, ks = _hf_rope(q.expand(10, 8), pos), _hf_rope(k.expand(10, 8), pos)
    # a query at t and a key at s meet at an angle that depends only on t - s
    assert torch.allclose(qs[5] @ ks[3], qs[7] @ ks[5]) and torch.allclose(qs[2] @ ks[0], qs[9] @ ks[7])
    # the two pairings: the same rotation once the features are permuted, different without
    perm = torch.cat([torch.arange(0, 8, 2), torch.arange(1, 8, 2)])   # neighbours -> halves
    meta = _meta_rope(q.expand(10, 8), pos)
    assert torch.allclose(meta[:, perm], _hf_rope(q[perm].expand(10, 8), pos))
    assert not torch.allclose(meta, qs)
    assert "Converting weights between the two means permuting the rows of the q and k projections" in t
    # the table on the wrong axis: refused when H != T, silent when H == T, head h at position h
    cos = torch.randn(4, 4)
    with pytest.raises(RuntimeError):
        torch.randn(1, 2, 4, 4) * cos[None, :, None, :]
    x = torch.ones(1, 4, 4, 4)                                         # H = T = 4
    out = x * cos[None, :, None, :]
    assert out.shape == x.shape and torch.equal(out[0, 2, 0], cos[2]) and torch.equal(out[0, 2, 3], cos[2])
    assert "head h is turned by the angles of position h, and every token of that head by the same" in t
    # the table of the live example is [1, 1, T, d_k]; the first half of a head is a strided view
    q4 = torch.zeros(1, 2, 4, 4)
    assert q4[..., :2].stride() == (32, 16, 4, 1) and not q4[..., :2].is_contiguous()
    assert "`[1, 1, T, d_k]`" in t and "keeps 2 floats of every 4" in t


def test_lesson_12_claims_come_from_torch():
    t = text(12)
    q = torch.empty(1, 64, 4096, 128, device="meta", dtype=torch.bfloat16)
    scores = q @ q.transpose(-2, -1)
    assert scores.numel() * scores.element_size() == 2 * 2 ** 30 and "2 GiB, computed on the meta device" in t
    assert q.numel() * q.element_size() == 64 * 2 ** 20 and "the keys themselves take 64 MiB" in t
    # bool True = attend; ~keep disagrees with the manual computation
    torch.manual_seed(1)
    q, k, v = (torch.randn(1, 2, 5, 4) for _ in range(3))
    keep = torch.ones(5, 5, dtype=torch.bool).tril()
    manual = torch.softmax((q @ k.transpose(-2, -1) / 2).masked_fill(~keep, float("-inf")), -1) @ v
    torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=keep), manual)
    with pytest.raises(AssertionError):
        torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=~keep), manual)
    # a float mask is added: 0 keeps, -inf blocks
    additive = torch.zeros(5, 5).masked_fill(~keep, float("-inf"))
    torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=additive), manual)
    # enable_gqa: query head h reads kv head h // (H / H_kv), as repeat_interleave
    q4, k2, v2 = torch.randn(1, 4, 5, 2), torch.randn(1, 2, 5, 2), torch.randn(1, 2, 5, 2)
    fused = F.scaled_dot_product_attention(q4, k2, v2, enable_gqa=True)
    by_hand = F.scaled_dot_product_attention(q4, k2.repeat_interleave(2, 1), v2.repeat_interleave(2, 1))
    torch.testing.assert_close(fused, by_hand)
    assert "heads 0 and 1 read kv head 0" in t
    # [B, T, H, d_k] runs without a word
    x = torch.randn(1, 5, 2, 4)
    assert F.scaled_dot_product_attention(x, x, x).shape == (1, 5, 2, 4)


# -- the markup ----------------------------------------------------------------------------------

def test_fence_options_parse_sizes_and_options():
    o = fence_options("B=1 T=4 D=8 H=2 predict=scores diagram=6 expect=raises")
    assert (o.dims, o.diagram, o.predict, o.expect) == ("B=1 T=4 D=8 H=2", 6, "scores", "raises")
    assert fence_options("") == fence_options("   ")


def test_a_bug_example_that_shows_no_bug_says_so():
    code = ('x = torch.randn(2, 5, 12)                         # (B, T, D)\n'
            'shapetrace.name(x, "B T D")\n'
            'q = x.view(2, 5, 3, 4).transpose(1, 2)            # (B, H, T, d_k)\n')
    (block,) = traced_blocks([("live", code, "B=2 T=5 D=12 H=3 expect=mixed-axis")], "test")
    assert block.expect_met is False
    out = " ".join(render([block]).split())
    assert "a bug, on purpose: watch for the mixed-axis error under the table" in out
    assert "shapetrace did not show the mixed-axis this example is meant to show: please report it" in out


def test_predict_of_a_name_that_is_no_tensor_gives_no_answer():
    (block,) = traced_blocks([("live", "x = torch.randn(2, 3)\nn = 3\n", "predict=n")], "test")
    assert block.answer is None and block.answer_named == ""
    assert "answer:" not in render([block])


def test_present_asks_before_it_traces():
    screens = split_screens(CURRICULUM.lesson(9).text())
    kinds = [[kind for kind, _, _ in screen] for screen in screens]
    at = next(i for i, screen in enumerate(screens) if any(kind == "question" for kind, _, _ in screen))
    assert kinds[at][-1] == "question" and kinds[at + 1][0] == "answer"
    assert screens[at][-1][1] == screens[at + 1][0][1]                 # the same code, then traced
    question = traced_blocks(screens[at], "test")
    assert question[-1].kind == "question" and question[-1].trace is None
    out = " ".join(render(question).split())
    assert "predict: what is the shape of scores? Work it out before the trace is shown." in out
    assert "answer:" not in out and "traced:" not in out
    answer = " ".join(render(traced_blocks(screens[at + 1], "test")).split())
    said = "answer: scores is [1, 2, 1, 6], named [B=1, H=2, T_new=1, T+2=6]"
    assert said in answer and answer.index(said) < answer.index("q_proj, k_proj") < answer.index("traced:")
    assert answer.count("answer: scores") == 1


# -- every mode ----------------------------------------------------------------------------------

@pytest.mark.parametrize("width", [80, 100])
def test_lesson_9_in_the_terminal_without_colour(width):
    from conftest import cli_forked  # stdout a pipe of its own; its start is not what this proves

    proc = cli_forked("lesson", "9", env={"NO_COLOR": "1", "COLUMNS": str(width)}, timeout=300)
    assert proc.returncode == 0 and proc.stderr == ""
    out = proc.stdout.splitlines()
    assert max(len(line) for line in out) <= width
    ask = out.index("predict: what is the shape of scores? Work it out before the trace is shown.")
    assert out[ask - 1] == "" and out[ask + 1] == ""
    assert out[ask + 2].startswith("    q_proj, k_proj = torch.nn.Linear(8, 8)")
    assert "answer: scores is [1, 2, 1, 6], named [B=1, H=2, T_new=1, T+2=6]" in out
    assert out.index("answer: scores is [1, 2, 1, 6], named [B=1, H=2, T_new=1, T+2=6]") > ask
    assert "a bug, on purpose: watch for the causal-mask-misaligned error under the table" in out
    assert "a bug, on purpose: torch refuses it: its message is under the table" in out
    assert any(line.lstrip().startswith("memory  ") for line in out)       # diagram=6
    assert "Traceback" not in proc.stdout


def test_lesson_page_holds_every_new_block(tmp_path, cli):
    page = tmp_path / "lesson9.html"
    result = cli("lesson", "9", "--export", str(page))
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "<title>shapetrace lesson 9 · Decoding with a key/value cache" in html
    assert "<script" not in html and "http://" not in html.replace("http://www.w3.org", "")
    assert "<h2>Then one token per step</h2>" in html
    assert "predict: what is the shape of <code>scores</code>?" in html
    assert html.count("<details class=\"answer\">") == 1
    assert "answer: scores is [1, 2, 1, 6], named [B=1, H=2, T_new=1, T+2=6]" in html
    assert "a bug, on purpose: watch for the causal-mask-misaligned error under the table" in html
    assert "causal-mask-misaligned" in html and "raised RuntimeError" in html
    assert re.search(r"memory.{0,200}10 blocks of 4 floats", html, re.S)           # the diagram under op 6
    assert "k_cache = torch.cat([k_cache, k], dim=2)" in html
    again = cli("lesson", "9", "--export", str(page))
    assert again.exit_code == 2 and "--force" in again.output
    assert cli("lesson", "9", "--export", str(tmp_path / "x.svg")).exit_code == 2
    assert cli("lesson", "9", "--export", str(page), "--present").exit_code == 2


def test_lesson_page_escapes_html_in_prose():
    from shapetrace.app.lessons import LessonBlock
    from shapetrace.render.lesson_page import lesson_page

    html = lesson_page(99, "a <b>", [LessonBlock("text", "# T\n\n<script>alert(1)</script> and `x<y`\n")])
    assert "<script>" not in html and "&lt;script&gt;" in html and "<code>x&lt;y</code>" in html
    assert "<title>shapetrace lesson 99 · a &lt;b&gt;</title>" in html


@pytest.fixture
def tmux(request):
    from tmux_session import TmuxSession

    session = TmuxSession(request.node.name[:20].replace("[", "-").replace("]", ""))
    yield session
    session.kill()


def test_lesson_9_present_asks_then_answers_in_a_real_terminal(tmux):
    import sys

    from tmux_session import ROOT

    screens = split_screens(CURRICULUM.lesson(9).text())
    n = len(screens)
    at = next(i for i, screen in enumerate(screens) if any(kind == "question" for kind, _, _ in screen))
    tmux.type("echo MARKER-BEFORE; SAVED=$(stty -g)")
    tmux.type(f"PYTHONPATH={ROOT} {sys.executable} -m shapetrace lesson 9 --present; "
              "echo EXIT=$?; [ \"$(stty -g)\" = \"$SAVED\" ] && echo STTY-RESTORED")
    tmux.wait_for(f"shapetrace lesson 9 · 1/{n}")
    for i in range(2, at + 2):
        tmux.keys("Enter")
        tmux.wait_for(f"shapetrace lesson 9 · {i}/{n}", timeout=120)
    code_end = "scores = q @ k_cache.transpose(-2, -1)"
    screen = tmux.wait_for(lambda s: "predict: what is the shape of scores?" in s and code_end in s, timeout=60)
    assert f"shapetrace lesson 9 · {at + 1}/{n}" in screen
    assert "answer:" not in screen and "traced:" not in screen
    tmux.keys("Enter")
    shown = "cat          [B=1, H=2, T+1=5, d_k=4]"
    screen = tmux.wait_for(lambda s: f"shapetrace lesson 9 · {at + 2}/{n}" in s and shown in s, timeout=120)
    assert "traced:" in screen
    assert "answer: scores is [1, 2, 1, 6], named [B=1, H=2, T_new=1, T+2=6]" in screen   # on top: not cut
    tmux.keys("q")
    tmux.wait_for("EXIT=0")
    screen = tmux.wait_for(lambda s: "STTY-RESTORED" in s.splitlines())
    assert "MARKER-BEFORE" in screen and "shapetrace lesson 9 ·" not in screen


def test_multihead_attention_key_padding_mask_has_the_other_polarity():
    """Lesson 12: in nn.MultiheadAttention's key_padding_mask, True marks a key to ignore."""
    assert "`key_padding_mask` has the other polarity (True marks padding, to be ignored)" in text(12)
    torch.manual_seed(2)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    x = torch.randn(1, 5, 8)
    padding = torch.tensor([[False, False, False, True, True]])
    _, weights = mha(x, x, x, key_padding_mask=padding, need_weights=True)
    assert weights.shape == (1, 5, 5) and torch.all(weights[..., 3:] == 0) and torch.all(weights[..., :3] > 0)
