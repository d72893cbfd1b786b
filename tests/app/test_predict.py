"""Predict mode: answer parsing and checking, exact scores from scripted answers (file, pipe, keyboard)."""

from __future__ import annotations

import sys

import pytest
from conftest import cli_in_process
from tmux_session import ROOT, TmuxSession

DIMS = {"B": 2, "T": 6, "D": 512, "H": 8, "d_k": 64}


@pytest.fixture(scope="module")
def trace():
    from shapetrace.app.session import trace_reference
    from shapetrace.attention.config import AttentionConfig

    return trace_reference(AttentionConfig())


@pytest.fixture(scope="module")
def square_trace():
    """T = H = 8: a swapped T and H has the right sizes; only names tell."""
    from shapetrace.app.session import trace_reference
    from shapetrace.attention.config import AttentionConfig

    return trace_reference(AttentionConfig(seq_len=8))


# -- parsing -----------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["[2, 8, 6, 64]", "2x8x6x64", "2 x 8 x 6 x 64", "(2,8,6,64)", "2×8×6×64",
                                  "B,H,T,d_k", "[B, H, T, d_k]", "B H T d_k", "batch, heads, seq_len, d_head",
                                  "torch.Size([2, 8, 6, 64])", "2, H, 6, d_k", " ( 2 , 8 , 6 , 64 ) "])
def test_every_usual_spelling_reads_the_same(text):
    from shapetrace.app.predict import parse_answer

    assert parse_answer(text, DIMS).sizes == (2, 8, 6, 64)


def test_names_products_and_single_axes():
    from shapetrace.app.predict import parse_answer

    a = parse_answer("B, T, H*d_k", DIMS)
    assert a.sizes == (2, 6, 512) and a.names == ("B", "T", None)
    assert parse_answer("(6,)", DIMS).sizes == (6,)
    assert parse_answer("T·d_k, d_k, 1", DIMS).sizes == (384, 64, 1)
    assert parse_answer("seq_len", DIMS).names == ("T",)


@pytest.mark.parametrize("text, message", [
    ("B, Q, T", "unknown axis name 'Q'; known names: B=2, T=6, D=512, H=8, d_k=64"),
    ("2, 8.5", "cannot read '8.5' as an axis"),
    ("[]", "empty answer"),
    ("2,,3", "cannot read '' as an axis"),
])
def test_unreadable_answers_say_why(text, message):
    from shapetrace.app.predict import parse_answer
    from shapetrace.errors import UsageError

    with pytest.raises(UsageError) as err:
        parse_answer(text, DIMS)
    assert str(err.value).startswith(message)


# -- checking against torch's numbers ----------------------------------------------------------

def test_check_shape_and_strides_against_the_trace(trace):
    from shapetrace.app.predict import check_shape, check_strides, parse_answer

    out = trace.events[2].output  # transpose: [B, H, T, d_k], strides (3072, 64, 512, 1)
    assert out.shape == (2, 8, 6, 64) and out.stride == (3072, 64, 512, 1)
    assert check_shape(parse_answer("B,H,T,d_k", DIMS), out).right
    assert check_shape(parse_answer("2x6x8x64", DIMS), out).reason == "axis 1 has size 8 (H), not 6"
    assert check_shape(parse_answer("2x8x6", DIMS), out).reason == "the output has 4 axes, the prediction 3"
    assert check_strides(parse_answer("T*D, d_k, D, 1", DIMS), out).right
    assert check_strides(parse_answer("3072, 384, 64, 1", DIMS), out).reason == \
        "the stride of axis 1 (H) is 64, not 384"


def test_names_catch_a_swap_that_sizes_miss(square_trace):
    from shapetrace.app.predict import check_shape, parse_answer

    dims = square_trace.dims
    out = square_trace.events[2].output
    assert out.shape == (2, 8, 8, 64) and out.dims == ("B", "H", "T", "d_k")
    assert check_shape(parse_answer("2x8x8x64", dims), out).right
    verdict = check_shape(parse_answer("B,T,H,d_k", dims), out)
    assert not verdict.right
    assert verdict.reason == "the sizes match, but axis 1 is H, not T: equal sizes can hide swapped axes"


def test_quiz_asks_each_shape_or_layout_change_once(trace):
    from shapetrace.app.predict import Quiz

    quiz = Quiz.of(trace)
    assert quiz.asked == [1, 2, 9, 10, 12, 13, 14, 15]
    assert quiz.repeats == {4: 1, 5: 2, 7: 1, 8: 2}
    for e in trace.events:  # the rule, rechecked from torch's shapes and strides
        changed = e.output.shape != e.inputs[0].shape or e.output.stride != e.inputs[0].stride
        assert changed == (e.index in quiz.asked or e.index in quiz.repeats)


# -- whole sessions, scripted ------------------------------------------------------------------

# one answer per question in Quiz order: #1 #2 #9 #10 #12 #13 #14 #15
SHAPE_ANSWERS = [
    "2x6x8x64",        # #1 right (numbers)
    "[2, 6, 8, 64]",   # #2 wrong: T and H swapped
    "",                # #9 skipped
    "B,H,T,T",         # #10 right (names)
    "(2,8,6,6)",       # #12 wrong: d_k, not T
    "B, T, Q, d_k",    # #13 unreadable: counts as wrong
    "batch, seq_len, heads, d_head",  # #14 right (long names)
    "B,T,H*d_k",       # #15 right (product)
]
SHAPE_SCORE = "score 4/8 (shapes 4/8), 1 skipped"


def test_answers_file_scores_exactly(tmp_path):
    answers = tmp_path / "answers.txt"
    answers.write_text("\n".join(SHAPE_ANSWERS) + "\n")
    proc = cli_in_process("run", "--predict", "--answers", str(answers))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.rstrip().splitlines()[-1] == SHAPE_SCORE
    assert out.count("✓ right") == 4 and out.count("✗ not quite") == 3 and out.count("skipped: ") == 1
    assert "✗ not quite: the shape is [B=2, H=8, T=6, d_k=64] — axis 1 has size 8 (H), not 6" in out
    assert "unknown axis name 'Q'" in out
    assert " 4  view         [B=2, T=6, H=8, d_k=64]       view  (same as #1)" in out


def test_piped_stdin_scores_exactly():
    proc = cli_in_process("run", "--predict", "shape", input="\n".join(SHAPE_ANSWERS) + "\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip().splitlines()[-1] == SHAPE_SCORE


def test_strides_mode_scores_shapes_and_strides_separately():
    answers = ["B,T,H,d_k", "(3072, 512, 64, 1)",        # #1 both right
               "B,H,T,d_k", "(3072, 384, 64, 1)",        # #2 shape right, strides wrong (row-major guess)
               "B,H,d_k,T", "T*D, d_k, 1, D"]            # #9 both right; then the answers run out
    proc = cli_in_process("run", "--predict", "strides", input="\n".join(answers) + "\n")
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.rstrip().splitlines()[-1]
    assert last == "score 5/6 (shapes 3/3 · strides 2/3), 5 not asked (answers ran out)"
    assert "the strides are (3072, 64, 512, 1) — the stride of axis 1 (H) is 64, not 384" in proc.stdout


def test_predict_options_are_checked(cli):
    assert "error: --predict 'sizes': choose one of shape, strides" in cli("run", "--predict", "sizes").output
    result = cli("run", "--answers", "a.txt")
    assert result.exit_code == 2 and "error: --answers FILE only works with --predict" in result.output
    result = cli("run", "--step", "--predict")
    assert result.exit_code == 2 and "use one at a time" in result.output


@pytest.fixture
def tmux():
    session = TmuxSession("predict")
    yield session
    session.kill()


def test_keyboard_asks_again_after_a_typo(tmux):
    tmux.type(f"PYTHONPATH={ROOT} {sys.executable} -m shapetrace run --predict; echo EXIT=$?")
    tmux.wait_for("? output shape ›")
    tmux.type("2x6x8x64")
    tmux.wait_for("✓ right: [B=2, T=6, H=8, d_k=64]")
    tmux.type("B, Q, T, d_k")
    tmux.wait_for("unknown axis name 'Q'")
    screen = tmux.wait_for(lambda s: s.rstrip().endswith("? output shape ›"))
    tmux.type("B,H,T,d_k")
    tmux.wait_for("✓ right: [B=2, H=8, T=6, d_k=64]")
    tmux.keys("C-d")
    screen = tmux.wait_for("EXIT=0")
    assert "score 2/2 (shapes 2/2), 6 not asked (answers ran out)" in screen


# -- format examples never give an answer away ----------------------------------------------------------

def _intro_text(trace, strides: bool) -> str:
    import io

    from rich.console import Console

    from shapetrace.app.predict import Quiz
    from shapetrace.tui.predict import _intro

    buf = io.StringIO()
    _intro(Console(file=buf, width=200, color_system=None), trace, Quiz.of(trace), strides)
    return buf.getvalue()


@pytest.mark.parametrize("strides", [False, True])
def test_format_example_is_no_answer_of_the_trace(trace, square_trace, strides):
    import re

    for t in (trace, square_trace):
        text = _intro_text(t, strides)
        example = re.search(r"Write sizes like (\S+) or \[([\d, ]+)\]", text)
        assert example, text
        sizes = tuple(int(n) for n in example.group(1).split("x"))
        assert sizes == tuple(int(n) for n in example.group(2).split(", "))
        answers = {tuple(e.output.shape) for e in t.events if e.output}
        answers |= {tuple(e.output.stride) for e in t.events if e.output}
        assert sizes not in answers
        assert "B,H,T,d_k" not in text and "2x8x6x64" not in text


# -- the backward (run --backward --predict) ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def backward_trace():
    """The reference's forward and backward (the output's sum), at the default sizes."""
    from shapetrace.app.session import trace_reference
    from shapetrace.attention.config import AttentionConfig

    return trace_reference(AttentionConfig(), backward=True)


@pytest.mark.parametrize("seq_len", [6, 8])
def test_the_backward_quiz_asks_the_grads_of_what_changed_shape_or_layout_whatever_the_sizes(seq_len):
    """w_o's and each projection's dW and db (their own shapes), and every grad of a view, transpose, contiguous
    and matmul (ops that changed shape or layout in the forward); not the softmax's or the scale's, nor q's and
    k's split heads again (v's rows 9-10: the same forward line and shapes, k's grads arriving transposed). The
    same questions at T = H = 8, where the heads' transpose keeps every size."""
    from shapetrace.app.predict import GradQuiz
    from shapetrace.app.session import trace_reference
    from shapetrace.attention.config import AttentionConfig

    trace = trace_reference(AttentionConfig(seq_len=seq_len), backward=True)
    quiz = GradQuiz.of(trace.backward, trace.events)
    assert quiz.asked == {0: (1, 2), 1: (0,), 2: (0,), 3: (0,), 4: (0, 1), 7: (0, 1), 8: (0,), 9: (0,), 10: (0,),
                          11: (0, 1), 14: (0, 1), 17: (0, 1)}
    assert quiz.repeats == {12: 9, 13: 10, 15: 9, 16: 10} and quiz.count == 18
    assert GradQuiz.of(None).count == 0


def _predicted(trace, answers: list[str], width: int = 100) -> list[str]:
    import io

    from rich.console import Console

    from shapetrace.tui.predict import run_predict_mode

    console = Console(file=io.StringIO(), width=width, color_system=None, legacy_windows=False)
    run_predict_mode(trace, console, io.StringIO("".join(a + "\n" for a in answers)), echo=True, interactive=False)
    return [line.rstrip() for line in console.file.getvalue().splitlines()]


def test_predict_asks_the_backward_after_the_forward_and_scores_the_grads(backward_trace):
    # the forward's 8 questions skipped; then w_o's db and dW right, the grads of #15 view and #14 contiguous
    # right, and the grad of #13 transpose given the transpose's own output shape (a grad has its input's shape)
    out = _predicted(backward_trace, [""] * 8 + ["D", "D, D", "B,T,H,d_k", "B,T,H,d_k", "B,T,H,d_k"])
    start = out.index("the backward, in the order autograd runs it:")
    assert out[start + 1:start + 8] == [
        "#16 linear  return self.w_o(y)  reference.py:52",
        "  0  grad #16 linear  [B=2, T=6, D=512]  (0, 0, 0)  4 B",
        "     → operand 0  [B=2, T=6, D=512]  (3072, 512, 1)  new 24 KiB",
        "  ? grad shape for w_o.bias › D",
        "   ✓ right: [D=512]",
        "  ? grad shape for w_o.weight › D, D",
        "   ✓ right: [D=512, D=512]"]
    assert "   ✗ not quite: the grad for operand 0 is [B=2, H=8, T=6, d_k=64] — axis 1 has size 8 (H), not 6" in out
    assert "  12  grad #5 transpose  [B=2, H=8, T=6, d_k=64]  (3072, 384, 1, 6)  24 KiB  (same as row 9)" in out
    assert "   (no more answers: the rest of the backward is shown without questions)" in out
    assert "autograd keeps 10 tensors for the backward: 1.1 MiB in 7 storages (122 KiB of them not parameters)" in out
    assert out[-1] == "score 4/13 (shapes 0/8 · grads 4/5), 8 skipped, 13 not asked (answers ran out)"
    assert ("layout, then 18 on the shape of each grad the backward sends back that differs from the grad that "
            "arrived.") in " ".join(out)


def test_a_grad_with_swapped_axes_of_equal_sizes_is_named_wrong_at_t_equal_h():
    """T = H = 8: the grad of the heads' transpose, [B, H, T, d_k], answered as [B, T, H, d_k] has every size
    right; only the names tell."""
    from shapetrace.app.session import trace_reference
    from shapetrace.attention.config import AttentionConfig

    out = _predicted(trace_reference(AttentionConfig(seq_len=8), backward=True), [""] * 12 + ["B,T,H,d_k"])
    assert ("✗ not quite: the grad for operand 0 is [B=2, H=8, T=8, d_k=64] — the sizes match, but axis 1 is H, "
            "not T: equal sizes can hide swapped axes") in " ".join(" ".join(out).split())   # (wrapped at 100 columns)
    assert "  ? grad shape for operand 0 › B,T,H,d_k" in out
    assert "#13 transpose  x = x.transpose(1, 2)  reference.py:39" in out


def test_the_grad_of_repeat_kv_is_asked_and_a_repeated_row_keeps_its_note_whole_at_80_columns():
    """GQA as transformers' Llama repeats kv heads (x[:, :, None].expand(...).reshape(...)): the grad of the expand
    is asked (a sum over n_rep); k's repeat rows, the same line as v's, say so on a line of their own where the
    row fills 80 columns (the note was cut in two by the wrap)."""
    from shapetrace.app.session import traced_variant
    from shapetrace.attention.config import AttentionConfig

    config = AttentionConfig(d_model=16, heads=4, kv_heads=2, seq_len=3, batch=2)
    out = _predicted(traced_variant(config, "cpu", backward=True).report(), [""] * 40, width=80)
    assert "   skipped: the grad for operand 0 is [B=2, H_kv=2, 1, T=3, d_k=4]" in out
    at = out.index("  13  grad #10 expand  [B=2, H_kv=2, n_rep=2, T=3, d_k=4]  384 B")
    assert out[at + 1] == "     (same as row 10)"
    assert all(len(line) <= 80 for line in out)


def test_a_wrong_answer_wraps_under_its_own_indent_at_80_columns():
    """``run --predict`` at 80 columns (issue 35 round 3, first contact in tmux): the verdict on a wrong
    shape wrapped its last words to column 0 (``the prediction 3`` under ``   ✗ not quite: …``)."""
    import io

    from rich.console import Console

    from shapetrace.app.predict import Verdict
    from shapetrace.tui.predict import _verdict

    out = io.StringIO()
    console = Console(file=out, width=80, color_system=None, legacy_windows=False)
    _verdict(console, "shape", Verdict(False, "the output has 4 axes, the prediction 3"), "",
             "[B=2, T=6, H=8, d_k=64]", "splits D into H × d_k")
    assert [line.rstrip() for line in out.getvalue().splitlines()[:2]] == [
        "   ✗ not quite: the shape is [B=2, T=6, H=8, d_k=64] — the output has 4 axes,",
        "   the prediction 3"]
