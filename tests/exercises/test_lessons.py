"""The curriculum is tested like code: every starter is broken the intended way,
every solution passes, every known mistake is recognised, every lesson renders."""

from __future__ import annotations

import io
import re

import pytest
from conftest import CURRICULUM_SEED, ROOT

from shapetrace.exercises.content import VERDICTS, load
from shapetrace.exercises.live import run_example, split_live

CURRICULUM = load()
EXERCISES = CURRICULUM.exercises
RESHAPING = re.compile(r"\.(view|reshape|transpose|permute|expand|unflatten|flatten)\(|rearrange\(")


@pytest.fixture(scope="module")
def verdicts(curriculum_verdicts):
    """Starter, solution and every known mistake of every exercise (tests/exercises/conftest.py)."""
    return curriculum_verdicts


def test_curriculum_size_and_order():
    assert len(CURRICULUM.lessons) == 13
    assert len(EXERCISES) >= 12
    assert [lesson.number for lesson in CURRICULUM.lessons] == list(range(1, len(CURRICULUM.lessons) + 1))
    assert len({e.id for e in EXERCISES}) == len(EXERCISES)


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_exercise_metadata(ex):
    assert len(ex.hints) >= 2 and all(h.strip() for h in ex.hints)
    assert ex.task.strip() and ex.title.strip()
    assert ex.starter_verdict in VERDICTS and ex.starter_verdict != "pass"
    assert f"def {ex.function}(" in ex.starter.read_text()
    assert f"def {ex.function}(" in ex.solution.read_text()
    assert ex.starter.read_text() != ex.solution.read_text()


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_starter_fails_with_intended_verdict(ex, verdicts):
    v = verdicts[(ex.id, "starter")]
    assert v["verdict"] == ex.starter_verdict, v
    assert v.get("mistake") == ex.starter_mistake, v
    assert v["summary"] and "{" not in v["summary"], v["summary"]


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_solution_passes(ex, verdicts):
    v = verdicts[(ex.id, "solution")]
    assert v["verdict"] == "pass", v


@pytest.mark.parametrize("ex,m", [(e, m) for e in EXERCISES for m in e.mistakes],
                         ids=lambda x: getattr(x, "id", ""))
def test_each_known_mistake_gets_its_own_explanation(ex, m, verdicts):
    v = verdicts[(ex.id, m.id)]
    assert v["verdict"] != "pass"
    assert v["mistake"] == m.id, v
    assert "{" not in v["summary"], v["summary"]


def test_verdicts_cover_the_main_kinds(verdicts):
    starters = {verdicts[(e.id, "starter")]["verdict"] for e in EXERCISES}
    assert {"wrong-values", "wrong-shape", "crash", "layout", "mutated-input"} <= starters


def _sizes(v) -> dict[str, int]:
    return {k: int(n) for k, n in (p.split("=") for p in v["sizes"].split(", "))}


def test_split_heads_explanation_names_tokens(verdicts):
    v = verdicts[("split-heads", "starter")]
    assert re.match(r"your output's head 0 of batch 0 holds pieces of tokens? [\d, and]+ only: viewing as "
                    r"\[B, H, T, d_k\] reads memory in order", v["summary"]), v["summary"]
    assert v["line"] == 13 and "x.view(B, heads, T, d_k)" in v["code"]
    d_k = _sizes(v)["d_k"]
    assert (f"out[0, 0, 1, 0] holds x[0, 0, {d_k}] (batch 0, token 0, feature {d_k}); the reference has "
            "x[0, 1, 0] (batch 0, token 1, feature 0) there") in v["explanation"], v["explanation"]
    assert [d["kind"] for d in v["diagnostics"]] == ["mixed-axis"]
    assert "transpose(1, 2)" not in str(v["diagnostics"])


def test_crash_reports_learners_line_and_shapes(verdicts):
    v = verdicts[("attention-scores", "starter")]
    s = _sizes(v)
    B, T, H, d_k = s["B"], s["T"], s["H"], s["d_k"]
    assert v["line"] == 10 and v["code"].startswith("k_t = k.transpose(1, 2)"), "the line that went wrong"
    assert v["explanation"][0].startswith(f"with {v['sizes']}: RuntimeError: The size of tensor a ({H}) "
                                          f"must match the size of tensor b ({T})"), v["explanation"]
    assert any(f"[B={B}, T_k={T}, H={H}, d_k={d_k}] strides ({T * H * d_k}, {d_k}, {T * d_k}, 1)" in line
               for line in v["explanation"]), v["explanation"]
    assert "Traceback" not in " ".join(v["explanation"])


def test_layout_verdict_names_the_copy(verdicts):
    v = verdicts[("heads-to-batch", "starter")]
    assert any(re.search(r"cat copied [\d.]+ (B|KiB)", line) for line in v["explanation"]), v["explanation"]


def _solution_lines(ex) -> list[str]:
    """The code of each solution line the starter does not share (comments and docstrings dropped)."""
    starter = {line.split("#")[0].strip() for line in ex.starter.read_text().splitlines()}
    out = []
    for line in ex.solution.read_text().splitlines():
        code = line.split("#")[0].strip()
        if code and code not in starter and not code.startswith(('"""', "def ", "return ", "import ", "from ")) \
                or code.startswith("return ") and code not in starter:
            out.append(code)
    return out


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_first_check_of_the_starter_shows_no_line_of_the_solution(ex, verdicts):
    from conftest import render

    from shapetrace.render.exercise import verdict_view

    shown = render(verdict_view(verdicts[(ex.id, "starter")], "starter.py"), width=200)
    lines = _solution_lines(ex)
    assert lines, ex.id
    for code in lines:
        assert code not in shown, (code, shown)
    assert "the reference, traced" not in shown and "reference:" not in shown


def _starter_fixes(ex) -> dict[str, set[str]]:
    """The fix of each diagnostic the starter triggers, traced here on inputs drawn as a check draws them."""
    import random

    from shapetrace.exercises import inputs as inp
    from shapetrace.exercises.calls import call, load_function

    fn = load_function(str(ex.starter), ex.function)
    out: dict[str, set[str]] = {}
    for case in inp.draw(ex.inputs, random.Random(CURRICULUM_SEED)):
        got = call(fn, case.fresh(), case.names, case.dims)
        for d in got.trace.diagnostics if got.trace is not None else []:
            if d.fix:
                out.setdefault(d.kind, set()).add(d.fix)
    return out


def test_first_check_of_a_starter_never_shows_the_fix_of_the_diagnostics_it_triggers(verdicts):
    import json

    from conftest import render

    from shapetrace.render.exercise import verdict_view

    checked = []
    for ex in (e for e in EXERCISES if e.kind != "test"):
        v = verdicts[(ex.id, "starter")]
        shown = " ".join(render(verdict_view(v, "starter.py"), width=200).split())
        as_json = json.dumps(v, ensure_ascii=False)
        fixes = _starter_fixes(ex)
        for d in v["diagnostics"]:
            assert set(d) == {"severity", "kind", "event", "message"}, d
            assert d["message"] and " ".join(d["message"].split()) in shown
            for fix in fixes.get(d["kind"], ()):
                for sentence in re.split(r"(?<=[.:;])\s+", fix):
                    assert " ".join(sentence.split()) not in shown, (ex.id, sentence, shown)
                    assert sentence not in as_json, (ex.id, sentence)
                checked.append((ex.id, d["kind"]))
    assert len({ex_id for ex_id, _ in checked}) >= 4, checked   # split-heads, merge-heads, einops-split, masks


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_hints_escalate_from_a_question(ex):
    assert "?" in ex.hints[0], ex.hints[0]
    assert len(ex.hints) >= 3
    assert "(" in ex.hints[-1], "the last hint gives the fix, in code"


@pytest.mark.parametrize("ex", [e for e in EXERCISES if e.inputs not in ("sizes", "params") and e.kind != "test"],
                         ids=lambda e: e.id)
def test_the_reference_trace_comes_with_the_solution(ex):
    from shapetrace.exercises.reference import reference_trace

    trace, sizes = reference_trace(ex)
    assert trace.events and "=" in sizes


@pytest.mark.parametrize("lesson", CURRICULUM.lessons, ids=lambda x: str(x.number))
def test_lesson_live_examples_run_and_carry_shape_comments(lesson):
    blocks = [(code, dims) for kind, code, dims in split_live(lesson.text()) if kind == "live"]
    assert blocks, "every lesson has at least one live traced example"
    for n, (code, dims) in enumerate(blocks):
        trace = run_example(code, f"test {lesson.number} {n}", dims)
        assert trace.events, code
        if trace.exception is not None:
            assert "raises" in code, f"unexpected {trace.exception!r} in\n{code}"
        for line in code.splitlines():
            if RESHAPING.search(line):
                assert "# (" in line or "# raises" in line, f"no shape comment: {line}"


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_reshaping_lines_in_solutions_have_shape_comments(ex):
    for path in (ex.starter, ex.solution):
        for line in path.read_text().splitlines():
            if RESHAPING.search(line) and not line.lstrip().startswith("#"):
                assert "# (" in line, f"{path}: {line}"


@pytest.mark.parametrize("lesson", CURRICULUM.lessons, ids=lambda x: str(x.number))
def test_lesson_renders_at_80_columns(lesson):
    from rich.console import Console

    from shapetrace.app.lessons import lesson_blocks
    from shapetrace.render.lessons import print_lesson

    buf = io.StringIO()
    print_lesson(lesson_blocks(lesson), Console(file=buf, width=80, color_system=None, legacy_windows=False))
    text = buf.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    for kind, code, _ in split_live(lesson.text()):
        if kind == "live":
            for line in code.splitlines():
                assert line.rstrip() in text, f"code line cropped at 80 columns: {line}"
    assert "Traceback" not in text


def test_no_lesson_file_has_trailing_whitespace():
    """Lesson sources end every line at its last character (so no Markdown hard line break either: the
    renderer relies on none)."""

    files = [p for p in (ROOT / "lessons").rglob("*")
             if p.is_file() and p.suffix in (".md", ".toml", ".py")]
    assert len(files) > 30 and any(p.name == "lesson.md" for p in files)
    trailing = [f"{p}:{n}" for p in files for n, line in enumerate(p.read_text().splitlines(), 1)
                if line != line.rstrip()]
    assert trailing == []


@pytest.mark.parametrize("width", [80, 100])
@pytest.mark.parametrize("lesson", CURRICULUM.lessons, ids=lambda x: str(x.number))
def test_rendered_lesson_has_no_trailing_spaces(lesson, width):
    """Rich pads Markdown prose and wrapped findings to the width; a lesson prints without that padding
    (copy and paste, diffs, a projector's selection)."""
    from rich.console import Console

    from shapetrace.app.lessons import lesson_blocks
    from shapetrace.render.lessons import print_lesson

    buf = io.StringIO()
    print_lesson(lesson_blocks(lesson), Console(file=buf, width=width, color_system=None, legacy_windows=False))
    lines = buf.getvalue().splitlines()
    assert len(lines) > 20
    assert [line for line in lines if line != line.rstrip()] == []


def test_numbers_in_lesson_text_come_from_torch():
    import torch

    texts = {lesson.number: lesson.text() for lesson in CURRICULUM.lessons}
    x = torch.zeros(2, 5, 12)
    q = x.view(2, 5, 3, 4)
    assert f"`{tuple(q.stride())}` to `{tuple(q.transpose(1, 2).stride())}`" in texts[1].replace("\n", " ")
    z = torch.zeros(2, 3, 5, 4).transpose(1, 2)
    assert f"`{tuple(z.stride())}`" in texts[2]
    assert f"(here {z.contiguous().nbytes} bytes)" in texts[2]
    counts = {sum(p.numel() for p in torch.nn.MultiheadAttention(512, h).parameters()) for h in (1, 8, 64)}
    assert counts == {1_050_624}
    assert "1,050,624 parameters, whether H is 1, 8 or 64" in texts[8].replace("\n", " ")


def test_split_heads_verdict_rendering_golden(verdicts):
    from conftest import assert_golden, render

    from shapetrace.render.exercise import verdict_view

    v = verdicts[("split-heads", "starter")]
    assert_golden("exercise_check_split_heads_80.txt", render(verdict_view(v, "split_heads.py"), width=80))


def test_lesson_code_stands_apart_from_the_prose_without_colour():
    """Under NO_COLOR (or piped) a code block is indented 4 with a blank line either side, and an
    example ends with its table, not with the run's bookkeeping."""
    from conftest import cli_forked  # stdout a pipe of its own; its start is not what this proves

    out = cli_forked("lesson", "3", env={"NO_COLOR": "1", "COLUMNS": "80"}, timeout=60).stdout.splitlines()
    first = out.index("    y = torch.randn(2, 3, 5, 4)                       # (B, H, T, d_k)")
    assert out[first - 1] == "" and out[first + 1] == '    shapetrace.name(y, "B H T d_k")'
    assert out[first + 2].startswith("    flat = y.view(2 * 3, 5, 4)") and out[first + 3] == ""
    assert out[first + 4] == "example 1, traced:"
    assert not any(line.startswith(("1 ops", "largest tensor:")) for line in out)
    assert not any(line.startswith("✓ checked all") for line in out)


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_each_mistake_line_pattern_finds_its_own_line(ex):
    from shapetrace.exercises.judge import find_line

    for m in ex.mistakes:
        if m.where:
            assert find_line(m.code, m.where), (m.id, m.where)
