"""The live class as plain data: joining, answers read in the quiz's forgiving formats and checked against
torch's trace, refusals, the reveal, the histogram with what each wrong answer means, the summary and the CSV."""

from __future__ import annotations

import csv
import io
import json

import pytest
from live_classes import fresh_class, moments

from shapetrace.live.classstate import MAX_NAME, LiveClass, Refused
from shapetrace.live.session import save_answers


@pytest.fixture
def live_class():
    return fresh_class()


def _joined(live: LiveClass, name: str = "Ada"):
    return live.join(name, live.join_code.lower())  # the code is read case-insensitively


def test_the_reference_asks_the_predict_modes_questions():
    reference_moments = moments("reference")
    assert [(m.ask["index"], m.ask["op"]) for m in reference_moments] == [
        (1, "view"), (2, "transpose"), (9, "transpose"), (10, "matmul"), (12, "matmul"), (13, "transpose"),
        (14, "contiguous"), (15, "view")]
    assert [m.memory for m in reference_moments] == ["view", "view", "view", "new", "new", "view", "new", "view"]
    assert reference_moments[1].reveal["shape"] == "[B=2, H=8, T=6, d_k=64]"


@pytest.mark.parametrize("typed", ["2x8x6x64", "[2, 8, 6, 64]", "(2,8,6,64)", "B H T d_k", "[B, H, T, d_k]",
                                   "torch.Size([2, 8, 6, 64])", "batch, heads, seq_len, d_head", "2 × 8 × 6 × 64"])
def test_every_format_of_the_quiz_is_right(live_class, typed):
    s = _joined(live_class)
    live_class.go("next")  # question 2: return x.transpose(1, 2), [B, T, H, d_k] -> [B, H, T, d_k]
    r = live_class.answer(s.token, 1, typed, "view")
    assert (r.right, r.shown, r.memory_right) == (True, "[2, 8, 6, 64]", True)


@pytest.mark.parametrize("question, typed, meaning", [
    (1, "[B, T, H, d_k]", "the input shape unchanged: forgot the transpose"),
    (0, "[B, T, d_k, H]", "split D the wrong way: the same sizes in another order"),
    (1, "2x6x8x64", "the input shape unchanged: forgot the transpose"),
    (2, "[B, H, T, d_k]", "the input shape unchanged: forgot the transpose"),
    (3, "[B, H, d_k, d_k]", "the product in the other order (right @ left): a matmul is not commutative"),
    (3, "[B, H, T, d_k]", "an operand's shape: a matmul sums over d_k, keeping the rows of the left and the "
                          "columns of the right"),
    (7, "[B, T, 500]", "holds 6000 elements, the input 6144: a view keeps every element"),
    (1, "[B, H, d_k, T]", "axes 2 and 3 swapped: torch has T before d_k"),
    (1, "[B, T, d_k, H]", "the right sizes in the wrong order"),
    (1, "[B, H, T]", "3 axes where torch gives 4"),
])
def test_each_common_wrong_answer_says_what_it_means(live_class, question, typed, meaning):
    s = _joined(live_class)
    for _ in range(question):
        live_class.go("next")
    r = live_class.answer(s.token, question, typed)
    assert not r.right and r.meaning == meaning


def test_equal_sizes_hide_swapped_axes_and_the_names_tell():
    # B = T = H = 4: [B, T, H, d_k] has the sizes of torch's [B, H, T, d_k]; only the names are wrong
    live = fresh_class("equal-sizes")
    s = _joined(live)
    live.go("next")
    r = live.answer(s.token, 1, "[B, T, H, d_k]")
    assert (r.right, r.shown) == (False, "[B=4, T=4, H=4, d_k=8]")
    assert r.meaning == "the sizes match, but axis 1 is H, not T: equal sizes can hide swapped axes"
    other = live.join("Bo", live.join_code)
    assert live.answer(other.token, 1, "4x4x4x8").right  # sizes alone cannot be wrong here


def test_refusals_leave_nothing_recorded(live_class):
    s = _joined(live_class)
    refused = {
        "wrong join code: it is on the projector": lambda: live_class.join("x", "NOPE"),
        f"a name has at most {MAX_NAME} characters": lambda: live_class.join("n" * 1_000_000, live_class.join_code),
        "a name is text": lambda: live_class.join(["x"], live_class.join_code),
        "unknown student: join again": lambda: live_class.answer("forged-token", 0, "2x6x8x64"),
        "that question is not open: answer the one on the projector": lambda: live_class.answer(s.token, 1, "1"),
        "write the output shape, e.g. [B, H, T, d_k] or 2x8x6x64": lambda: live_class.answer(s.token, 0, "  "),
        "an answer has at most 200 characters": lambda: live_class.answer(s.token, 0, "2," * 150),
        "the memory answer is one of: view, new": lambda: live_class.answer(s.token, 0, "2x6x8x64", "<img>"),
        "cannot read that shape: unknown axis name 'Q'; known names: B=2, T=6, D=512, H=8, d_k=64":
            lambda: live_class.answer(s.token, 0, "[B, Q]"),
    }
    for why, attempt in refused.items():
        with pytest.raises(Refused) as exc:
            attempt()
        assert str(exc.value) == why
    assert s.answers == {} and len(live_class.students) == 1
    assert live_class.answer(s.token, 0, "2x6x8x64").right
    with pytest.raises(Refused, match="you already answered this question"):
        live_class.answer(s.token, 0, "2x6x8x64")  # a replay
    live_class.go("reveal")
    late = live_class.join("late", live_class.join_code)
    with pytest.raises(Refused, match="this question is closed: the answer was revealed"):
        live_class.answer(late.token, 0, "2x6x8x64")


def test_names_are_kept_as_text_and_anonymous_by_default(live_class):
    s = live_class.join("<script>alert(1)</script>", live_class.join_code)
    assert s.name == "<script>alert(1)</script>"  # stored as typed; the pages show it with textContent
    assert live_class.join("  \u0007 ", live_class.join_code).name == "anonymous 2"
    assert live_class.join(None, live_class.join_code).name == "anonymous 3"


def test_torch_answer_is_in_no_state_before_the_reveal(live_class):
    students = [_joined(live_class, f"s{i}") for i in range(3)]
    for number, moment in enumerate(moments("reference")):
        if number:
            live_class.go("next")
        for s in students:
            live_class.answer(s.token, number, "2x6x8x64")
        before = json.dumps([live_class.public_state()] + [live_class.own_state(s) for s in students])
        right = moment.reveal["shape"]
        assert right not in before and '"reveal"' not in before and '"right"' not in before
        assert moment.reveal["sentence"] not in before
        live_class.go("reveal")
        after = live_class.public_state()
        assert after["reveal"]["shape"] == right and right in json.dumps(after)


def test_the_histogram_counts_every_answer_and_marks_torch(live_class):
    answers = ["2x6x8x64"] * 5 + ["[B, T, d_k, H]"] * 3 + ["[2, 6, 64, 8]"] + ["2 6 512"] * 2
    for i, typed in enumerate(answers):
        live_class.answer(_joined(live_class, f"s{i}").token, 0, typed, "view" if i % 2 else "new")
    assert live_class.answered(0) == 11
    live_class.go("reveal")
    bars = live_class.public_state()["reveal"]["histogram"]
    assert [(b["answer"], b["count"], b["right"]) for b in bars] == [
        ("[2, 6, 8, 64]", 5, True), ("[2, 6, 64, 8]", 4, False), ("[2, 6, 512]", 2, False)]
    assert bars[1]["meaning"] == "split D the wrong way: the same sizes in another order"
    assert bars[2]["meaning"] == "the input shape unchanged: forgot the view"
    assert live_class.public_state()["reveal"]["memory_counts"] == {"view": 5, "new": 6}


def test_only_the_teachers_key_is_the_teachers(live_class):
    assert live_class.is_teacher(live_class.teacher_key)
    assert not live_class.is_teacher(live_class.teacher_key[:-1] + "?") and not live_class.is_teacher(None)
    with pytest.raises(Refused, match="unknown action 'jump'"):
        live_class.go("jump")


def test_summary_puts_the_hardest_question_first_and_the_csv_holds_every_answer(live_class, tmp_path):
    a, b = _joined(live_class, "=HYPERLINK(\"x\")"), _joined(live_class, "Bo")
    live_class.answer(a.token, 0, "2x6x8x64", "view")
    live_class.answer(b.token, 0, "2x6x8x64", "new")
    live_class.go("next")
    live_class.answer(a.token, 1, "[B, T, H, d_k]")
    live_class.answer(b.token, 1, "B H T d_k")
    live_class.go("end")
    summary = live_class.summary()
    assert [(r["number"], r["right"], r["answered"], r["common_wrong"]) for r in summary[:2]] == [
        (1, 1, 2, "[2, 6, 8, 64]"), (0, 2, 2, "")]
    assert summary[-1]["answered"] == 0
    rows = list(csv.DictReader(io.StringIO(live_class.csv_text())))
    assert [(r["student"], r["question"], r["answer"], r["right"], r["torch"], r["memory_right"]) for r in rows] == [
        ("1", "1", "2x6x8x64", "1", "[2, 6, 8, 64]", "1"), ("1", "2", "[B, T, H, d_k]", "0", "[2, 8, 6, 64]", ""),
        ("2", "1", "2x6x8x64", "1", "[2, 6, 8, 64]", "0"), ("2", "2", "B H T d_k", "1", "[2, 8, 6, 64]", "")]
    assert rows[0]["name"] == "'=HYPERLINK(\"x\")"  # no formula when opened in a spreadsheet
    assert rows[1]["mistake"] == "the input shape unchanged: forgot the transpose"
    first = save_answers(live_class, tmp_path / "answers.csv")
    (tmp_path / "answers-2.csv").write_text("mine")
    second = save_answers(live_class, tmp_path / "answers.csv")
    assert (first.name, second.name) == ("answers.csv", "answers-3.csv")
    assert (tmp_path / "answers-2.csv").read_text() == "mine"


def test_a_lessons_predict_moments_are_those_of_its_examples():
    lesson = moments("lesson 1")
    assert [(m.number, m.ask["where"], m.ask["code"]) for m in lesson] == [
        (0, "<lesson 1 example 1>:3", "q = x.view(2, 5, 3, 4)"),
        (1, "<lesson 1 example 1>:4", "q = q.transpose(1, 2)"),
        (2, "<lesson 1 example 2>:3", "bad = x.view(2, 3, 5, 4)"),
        (3, "<lesson 1 example 3>:5", "scores = q @ k.transpose(-2, -1)"),
        (4, "<lesson 1 example 3>:5", "scores = q @ k.transpose(-2, -1)")]
    assert lesson[1].ask["context"].splitlines()[-1].startswith("q = x.view(2, 5, 3, 4)")
    assert lesson[1].ask["sizes"] == "B=2 T=5 D=12 H=3 d_k=4"
    live = fresh_class("lesson 1")
    s = _joined(live)
    live.go("next")  # q.transpose(1, 2) on [B=2, T=5, H=3, d_k=4], answered with the lesson's own sizes
    r = live.answer(s.token, 1, "[B, T, H, d_k]")
    assert (r.right, r.meaning) == (False, "the input shape unchanged: forgot the transpose")
    other = live.join("Bo", live.join_code)
    assert live.answer(other.token, 1, "2x3x5x4").right
    assert lesson[1].ask["context"] not in ("", None) and lesson[1].reveal["shape"] not in json.dumps(
        live.public_state())


def test_quiz_questions_are_read_and_checked_as_the_quiz_does():
    quiz = moments("quiz strides")
    assert [(m.ask["prompt"], m.ask["memory_question"]) for m in quiz] == [("What is y.stride()?", False)] * 3 + [
        ("Is y contiguous?", False)]
    first = quiz[0]
    assert first.ask["code"] == "y = x.view(2, 6, 8, 64).transpose(1, 2)"
    assert first.torch_answer == "(3072, 64, 512, 1)" == first.reveal["shape"]
    live = fresh_class("quiz strides")
    a, b = _joined(live), _joined(live, "Bo")
    assert '"(3072, 64, 512, 1)"' not in json.dumps(live.public_state())
    with pytest.raises(Refused, match=r"^cannot read that answer: the answer is strides written like \(7, 7, 1\)$"):
        live.answer(a.token, 0, "yes")
    assert live.answer(a.token, 0, "[3072, 64, 512, 1]").right
    wrong = live.answer(b.token, 0, "3072x384x64x1")  # the strides before the transpose
    assert (wrong.right, wrong.shown, wrong.reason) == (False, "(3072, 384, 64, 1)", "torch gives (3072, 64, 512, 1)")
    live.go("reveal")
    assert [(bar["answer"], bar["count"], bar["right"]) for bar in live.public_state()["reveal"]["histogram"]] == [
        ("(3072, 384, 64, 1)", 1, False), ("(3072, 64, 512, 1)", 1, True)]
    for _ in range(3):
        live.go("next")
    assert live.answer(a.token, 3, "No.").shown == quiz[3].torch_answer == "no"  # y.contiguous(): a yes/no
    rows = list(csv.DictReader(io.StringIO(live.csv_text())))
    assert [(r["answer"], r["torch"], r["right"]) for r in rows if r["question"] == "1"] == [
        ("[3072, 64, 512, 1]", "(3072, 64, 512, 1)", "1"), ("3072x384x64x1", "(3072, 64, 512, 1)", "0")]
