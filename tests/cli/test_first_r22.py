"""First contact, round 2, the items left over (issue 23): the model source holds only attention
(the values a run shows are watched from the app), hints that follow the current verdict, one numbering."""

from __future__ import annotations

import re

import pytest
import tomllib
import torch
from conftest import MODEL_DIR, cli_in_process

from shapetrace.app.attention_values import watching_attention
from shapetrace.app.session import trace_variant
from shapetrace.attention.config import AttentionConfig
from shapetrace.exercises.content import hints_for_of

# -- 1. no instrumentation in the model code -------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in MODEL_DIR.glob("*.py")))
def test_the_model_source_holds_no_instrumentation(name):
    source = (MODEL_DIR / name).read_text(encoding="utf-8")
    assert "kept" not in source


def test_the_page_of_a_causal_run_cites_only_attention(tmp_path):
    out = tmp_path / "causal.html"
    proc = cli_in_process("run", "--causal", "--export", str(out))
    assert proc.returncode == 0, proc.stderr
    html = out.read_text(encoding="utf-8")
    assert "self.kept" not in html and "kept.update" not in html and "weights = self.softmax(scores)" in html


def test_watching_sees_the_masked_scores_and_the_weights_and_leaves_the_model_as_it_was():
    from shapetrace.attention.reference import ConfigurableAttention

    torch.manual_seed(0)
    model = ConfigurableAttention(8, 2, causal=True)
    x = torch.randn(1, 3, 8)
    with watching_attention(model) as seen:
        model(x)
    scores = seen["scores"]                                            # (B, H, T, T)
    assert scores.shape == (1, 2, 3, 3) and torch.isneginf(scores[0, 0, 0, 1:]).all()
    assert torch.equal(seen["weights"], torch.softmax(scores, dim=-1))
    assert "softmax" not in vars(model) and not hasattr(model, "kept")


def test_watching_undoes_itself_when_the_forward_raises():
    from shapetrace.attention.broken import BROKEN_CLASSES

    model = BROKEN_CLASSES["view-after-transpose"](8, 2)
    with pytest.raises(RuntimeError), watching_attention(model):
        model(torch.randn(1, 3, 8))
    assert "softmax" not in vars(model)


def test_torch_impl_weights_come_from_a_hook_that_is_removed_after():
    from shapetrace.attention.variants import TorchAttention

    model = TorchAttention(8, 2)
    with watching_attention(model) as seen:
        model(torch.randn(2, 3, 8))
    assert tuple(seen["weights"].shape) == (2, 2, 3, 3)
    assert not model.mha._forward_hooks


def test_a_causal_run_still_draws_its_heat_map_from_the_watched_weights():
    run = trace_variant(AttentionConfig(causal=True))
    weights = run.heat["weights"]
    assert run.heat["shape"] == (6, 6) and weights[0][1:] == [0.0] * 5 and weights[5][5] > 0
    assert all(cell == float("-inf") for cell in run.heat["scores"][0][1:])


# -- 2. hints about the fault the file has now ----------------------------------------------------

HALF_FIXED = {   # the first fault fixed, the second one still there
    "split-heads": ("split_heads.py", '''import torch


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    B, T, D = x.shape                              # (B, T, D)
    return x.view(B, T, heads, D // heads)         # (B, T, H, d_k): heads not in front yet
'''),
    "merge-heads": ("merge_heads.py", '''import torch


def merge_heads(y: torch.Tensor) -> torch.Tensor:
    B, H, T, d_k = y.shape                         # (B, H, T, d_k)
    y = y.transpose(1, 2)                          # (B, T, H, d_k)
    return y.view(B, T, H * d_k)                   # (B, T, D)? not contiguous
'''),
    "attention-scores": ("attention_scores.py", '''import torch


def attention_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    k_t = k.transpose(-2, -1)                      # (B, H, d_k, T)
    return q @ k_t                                 # (B, H, T, T), not scaled
'''),
}

HINTS_SEEN = {
    "split-heads": (
        ["hint 1 of 3, about what your file gives now (wrong-values); hint 3 is skipped: about a fault your file "
         "does not have",
         "Read the traced table of your function: which tokens do the d_k numbers of head 0, row 1 come from?"],
        ["hint 3 of 3, about what your file gives now (wrong-shape); hints 1 and 2 are skipped: about a fault your "
         "file does not have",
         "[B, T, H, d_k] has the tokens before the heads: swap axes 1 and 2, and only those, with "
         ".transpose(1, 2), a view, to get [B, H, T, d_k]."]),
    "merge-heads": (
        ["hint 1 of 3, about what your file gives now (wrong-values); hint 3 is skipped: about a fault your file "
         "does not have",
         "Look at your output's token 0: which tokens of the input did its D numbers come from?"],
        ["hint 3 of 3, about what your file gives now (crash); hints 1 and 2 are skipped: about a fault your file "
         "does not have",
         "After transpose(1, 2) the numbers still sit in memory in [B, H, T, d_k] order, so view cannot glue H "
         "and d_k: lay them out first with .contiguous(), then .view(B, T, H * d_k) (or .reshape, which copies "
         "for you)."]),
    "attention-scores": (
        ["hint 1 of 3, about what your file gives now (crash); hint 3 is skipped: about a fault your file does "
         "not have",
         "Read the crash: which two axes did the matmul try to line up, and what are their sizes?"],
        ["hint 3 of 3, about what your file gives now (wrong-values); hints 1 and 2 are skipped: about a fault "
         "your file does not have",
         "Scale the scores by 1 / math.sqrt(d_k) (the square root, not d_k itself): it keeps their spread near 1 "
         "however large d_k is."]),
}


def _hint_text(out: str) -> list[str]:
    """The why line and the hint, each joined into one line (the panel's borders taken off)."""
    why, _, panel = out.partition("╭─ ")
    body = [line.strip("│ ") for line in panel.splitlines()[1:-1]]
    return [" ".join(why.split()), " ".join(" ".join(body).split())]


@pytest.mark.parametrize("ex_id", sorted(HALF_FIXED))
def test_the_hint_is_about_the_fault_the_file_has_now(ex_id, tmp_path):
    state, ws = ["--state-dir", str(tmp_path / "state")], ["--workspace", str(tmp_path / "ws")]
    assert cli_in_process("exercise", "start", ex_id, *ws, *state).returncode == 0
    starter = cli_in_process("exercise", "hint", ex_id, *ws, *state, "--width", "200", timeout=300)
    assert starter.returncode == 0, starter.stderr
    assert _hint_text(starter.stdout) == HINTS_SEEN[ex_id][0]
    assert f"hint 1/3 · {ex_id}" in starter.stdout
    name, code = HALF_FIXED[ex_id]
    (tmp_path / "ws" / name).write_text(code)
    half = cli_in_process("exercise", "hint", ex_id, *ws, *state, "--width", "200", timeout=300)
    assert half.returncode == 0, half.stderr
    assert _hint_text(half.stdout) == HINTS_SEEN[ex_id][1]
    assert f"hint 3/3 · {ex_id}" in half.stdout


def test_no_hint_for_a_file_that_passes_and_hints_in_order_without_a_file(tmp_path):
    from shapetrace.cli.lessons import load_curriculum

    ex = load_curriculum().exercise("split-heads")
    state, ws = ["--state-dir", str(tmp_path / "state")], ["--workspace", str(tmp_path / "ws")]
    none = cli_in_process("exercise", "hint", "split-heads", *ws, *state, "--width", "200")
    assert _hint_text(none.stdout)[0] == (f"hint 1 of 3, in order: you have no file yet ({tmp_path / 'ws'}/"
                                          "split_heads.py; shapetrace exercise start split-heads)")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "split_heads.py").write_text(ex.solution.read_text())
    done = cli_in_process("exercise", "hint", "split-heads", *ws, *state, "--width", "200", timeout=300)
    assert done.returncode == 0 and done.stdout == ("your file passes split-heads: no hint needed (shapetrace "
                                                    "exercise hint split-heads --level N shows one anyway)\n")


def test_choose_goes_on_through_the_hints_about_one_fault_and_falls_back_to_order(tmp_path):
    from types import SimpleNamespace

    from shapetrace.app.hints import choose
    from shapetrace.cli.lessons import load_curriculum

    ex = load_curriculum().exercise("padding-mask")
    query = {"verdict": "wrong-values", "mistake": "query-mask"}
    assert [choose(ex, level, query).number for level in (1, 2, 3)] == [1, 2, 2]
    assert choose(ex, 1, {"verdict": "wrong-values", "mistake": "inverted"}).number == 3
    late = choose(ex, 2, {"verdict": "timeout"})
    assert late == late.__class__(2, "hint 2 of 3, in order: no hint is about what your file gives now (timeout)")
    toml = 'hints = ["a?", "b", "c()"]\n'   # every lesson has hints_for now; this one has none
    plain = SimpleNamespace(folder=tmp_path, hints=("a?", "b", "c()"),
                            hints_for=hints_for_of(tomllib.loads(toml), 3))  # no claim about any hint
    assert choose(plain, 2, {"verdict": "mutated-input"}) == late.__class__(
        2, "hint 2 of 3, in order; your file gives mutated-input now")
    second = choose(ex, 2, query)
    assert second.why == ("hint 2 of 3, about what your file gives now (wrong-values); hint 3 is skipped: about a "
                          "fault your file does not have")


def test_every_hints_for_names_a_verdict_or_a_mistake_of_its_exercise():
    from shapetrace.app.hints import hints_for
    from shapetrace.cli.lessons import load_curriculum
    from shapetrace.exercises.content import VERDICTS

    described = 0
    for ex in load_curriculum().exercises:
        faults = hints_for(ex)
        assert len(faults) == len(ex.hints), ex.id
        known = set(VERDICTS) | {m.id for m in ex.mistakes}
        assert all(f in known for entry in faults for f in entry), ex.id
        described += any(faults)
    assert described >= 4


# -- 3. one numbering: examples as their rows cite them, in the lesson and on its screens -----------

def _lesson_text(number: int, width: int = 100) -> list[str]:
    from conftest import render

    from shapetrace.app.lessons import lesson_blocks
    from shapetrace.cli.lessons import load_curriculum
    from shapetrace.render.lessons import block_parts

    blocks = lesson_blocks(load_curriculum().lesson(number))
    return [line.rstrip() for part in block_parts(blocks) for line in render(part, width).splitlines()]


def test_lesson_examples_are_numbered_from_1_as_their_rows_cite_them():
    lines = _lesson_text(1)
    labels = [line for line in lines if re.fullmatch(r"example \d+, traced:", line)]
    assert labels == ["example 1, traced:", "example 2, traced:", "example 3, traced:"]
    cited = sorted(set(re.findall(r"<lesson 1 example (\d+)>:\d+", "\n".join(lines))))
    assert cited == ["1", "2", "3"]
    at = lines.index("example 2, traced:")
    assert lines[at - 4:at] == ["    x = torch.randn(2, 5, 12)                         # (B, T, D)",
                                '    shapetrace.name(x, "B T D")',
                                "    bad = x.view(2, 3, 5, 4)                          # (B, ?, ?, d_k): mixed", ""]
    assert "      bad = x.view(2, 3, 5, 4)  <lesson 1 example 2>:3" in lines


def _present_screen(lesson_number: int, index: int, width: int = 100, pages: bool = False) -> list[str]:
    """The screen's first page as drawn (``pages``: every page of it, one after the other)."""
    import io

    from rich.console import Console

    from shapetrace.app.lessons import lesson_screens
    from shapetrace.cli.lessons import load_curriculum
    from shapetrace.tui.present import PresentScreen

    lesson = load_curriculum().lesson(lesson_number)
    screen = PresentScreen(lesson, lesson_screens(lesson))
    screen.state.index = index
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, legacy_windows=False)
    console.print(screen)
    while pages and screen.state.scroll.down():
        console.print(screen)
    return [line.rstrip() for line in buf.getvalue().splitlines()]


def test_present_screens_number_from_1_and_cite_examples_as_the_lesson_does():
    question, answer = _present_screen(9, 2), _present_screen(9, 3)
    assert question[0].startswith(" shapetrace lesson 9 · 3/8 · Decoding with a key/value cache")
    assert answer[0].startswith(" shapetrace lesson 9 · 4/8 · ")
    narrow = _present_screen(9, 3, width=80)[0]   # the short keys, so that q quit stays in sight
    assert narrow == " shapetrace lesson 9 · 4/8   ⏎ next · b back · q quit"
    assert "example 2, traced:" not in question                   # the question: code only, nothing cited
    assert "example 2, traced:" in answer                         # its answer: the same example, traced
    whole = "\n".join(_lesson_text(9))
    assert "<lesson 9 example 2>:7" in whole
    assert "      q = q_proj(x).view(1, 1, 2, 4).transpose(1, 2)  <lesson 9 example 2>:7" in answer
    last = _present_screen(9, 6, pages=True)   # (its traced example is the screen's second page at 100×25)
    assert "example 5, traced:" in last and "<lesson 9 example 5>:5" in "\n".join(last)
    assert "<lesson 9 example 5>:5" in whole
    assert "screen" not in "\n".join(re.findall(r"<lesson [^>]*>", whole + "\n".join(answer + last)))

