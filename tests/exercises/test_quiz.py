"""The quiz bank: every answer recomputed by torch here, answers read in every accepted form."""

from __future__ import annotations

import functools
import math

import einops
import pytest
import torch
import torch.nn.functional as F

from shapetrace.exercises import quiz as qz
from shapetrace.exercises.answers import check_answer, parse_bool, parse_int, parse_shape, show_answer
from shapetrace.exercises.content import load

ROOT = load().root
BANK = qz.bank(ROOT)


@functools.cache
def solved() -> list:
    """Every question of the bank with its answer, solved on first use (in the worker that needs them, not
    at every worker's collection)."""
    return [qz.solve(qz.Question(q.id, q.topic, q.ask, q.code, q.dims, q.note, grad=q.grad)) for q in BANK]


def test_bank_size_and_topics():
    assert len(BANK) >= 40
    assert len({q.id for q in BANK}) == len(BANK)
    assert {"split", "strides", "merge", "view-reshape", "einops", "cross", "masks", "gqa", "qkv",
            "params", "validate"} <= set(qz.topics(BANK))
    asks = {q.ask for q in BANK}
    assert {"shape", "strides", "contiguous", "raises", "copy-bytes", "is-view", "value"} <= asks


def _recompute(q):
    """An independent evaluation of the question with torch (not via quiz.solve)."""
    ns = {"torch": torch, "F": F, "math": math, "rearrange": einops.rearrange}
    *body, last = q.code.splitlines()
    exec("\n".join(body), ns)
    if q.ask == "raises":
        try:
            exec(last, ns)
        except RuntimeError:
            return True
        return False
    exec(last, ns)
    y = ns["y"]
    if q.ask == "shape":
        return tuple(y.size())
    if q.ask == "strides":
        return tuple(y.stride(d) for d in range(y.dim()))
    if q.ask == "contiguous":
        return bool(y.is_contiguous())
    if q.ask == "is-view":
        return y.data_ptr() - y.storage_offset() * y.element_size() == ns["x"].data_ptr()
    if q.ask == "copy-bytes":
        return 0 if y.is_contiguous() else y.numel() * y.element_size()
    return int(y.item()) if isinstance(y, torch.Tensor) else int(y)


@pytest.mark.parametrize("qid", [q.id for q in BANK])
def test_every_answer_recomputed_by_torch(qid):
    q = next(q for q in solved() if q.id == qid)
    assert q.answer == _recompute(q)
    understood, right = check_answer(q.ask, show_answer(q.ask, q.answer), q.answer)
    assert understood and right


def test_known_answers():
    by_id = {q.id: q.answer for q in solved()}
    assert by_id["split-shape/1"] == (2, 8, 6, 64)
    assert by_id["split-strides/1"] == (3072, 64, 512, 1)
    assert by_id["split-contiguous/2"] is True  # T = 1: transposing a size-1 axis keeps it contiguous
    assert by_id["merge-raises/1"] is True and by_id["merge-raises/2"] is False
    assert by_id["merge-copy-bytes/1"] == 2 * 6 * 512 * 4
    assert by_id["mha-params/1"] == 4 * 512 * 512 + 4 * 512
    assert by_id["mha-params-no-bias/1"] == 4 * 512 * 512
    assert by_id["nan-rows/1"] == 3 * 4
    assert by_id["gqa-expand-strides/1"][2] == 0
    assert by_id["heads-divide/1"] is True and by_id["heads-divide/2"] is False


@pytest.mark.parametrize("text", ["[2, 8, 6, 64]", "(2,8,6,64)", "2x8x6x64", "torch.Size([2, 8, 6, 64])",
                                  " 2 × 8 × 6 × 64 ", "2, 8, 6, 64"])
def test_shape_forms(text):
    assert parse_shape(text) == (2, 8, 6, 64)


def test_other_forms():
    assert parse_shape("two by eight") is None
    assert parse_bool("YES") is True and parse_bool("no") is False and parse_bool("perhaps") is None
    assert parse_int("24,576") == 24576 and parse_int("24 KiB") == 24576 and parse_int("0") == 0
    assert parse_int("1.3 KiB") is None and parse_int("lots") is None
    assert check_answer("shape", "[2, 8, 6]", (2, 8, 6, 64)) == (True, False)
    assert check_answer("contiguous", "dunno", False) == (False, False)


def test_select_by_topic_and_seed():
    strides = qz.select(BANK, "strides", 100, None)
    assert strides and all(q.topic == "strides" for q in strides)
    a = [q.id for q in qz.select(BANK, None, 10, 7)]
    assert a == [q.id for q in qz.select(BANK, None, 10, 7)]
    assert len(a) == 10 and a != [q.id for q in BANK[:10]]


def test_quiz_cli_with_answers_file(tmp_path, cli, monkeypatch):
    monkeypatch.setenv("SHAPETRACE_STATE_DIR", str(tmp_path / "state"))
    answers = tmp_path / "answers.txt"
    answers.write_text("[2, 8, 6, 64]\n4x12x8x10\n(1,4,7,16)\n")
    r = cli("quiz", "--topic", "split", "--count", "3", "--answers-from", str(answers), "--width", "80")
    assert r.exit_code == 0, r.stdout
    assert r.stdout.count("✓ right") == 2
    assert "✗ the answer is [4, 12, 10, 8] (you said 4x12x8x10)" in r.stdout
    assert "swaps H and T" in r.stdout  # the traced table explains the wrong one
    assert r.stdout.rstrip().endswith("score: 2/3")
    assert max(len(line) for line in r.stdout.splitlines()) <= 80


def test_quiz_cli_piped_stdin_and_early_end(tmp_path, cli, monkeypatch):
    monkeypatch.setenv("SHAPETRACE_STATE_DIR", str(tmp_path / "state"))
    r = cli("quiz", "--topic", "params", "--count", "5", input="1050624\n")
    assert r.exit_code == 0
    assert "✓ right: 1,050,624" in r.stdout
    assert "score: 1/1 (of 5 questions)" in r.stdout


def test_quiz_unknown_topic(cli):
    r = cli("quiz", "--topic", "nonsense")
    assert r.exit_code == 2


def test_format_examples_are_no_answer_of_any_question():
    from shapetrace.exercises.answers import EXAMPLE_SHAPE, EXAMPLE_STRIDES, HOW

    assert "[5, 1, 7]" in HOW["shape"] and "(7, 7, 1)" in HOW["strides"]
    for q in BANK:
        if q.ask in ("shape", "strides"):
            answer = tuple(q.answer) if q.answer is not None else None
            assert answer not in (EXAMPLE_SHAPE, EXAMPLE_STRIDES), q.id


def test_every_new_lesson_topic_has_at_least_two_templates():
    """Lessons 9-12: at least two templates per lesson, on the lesson's own topics."""
    lessons = {lesson.number: lesson for lesson in load().lessons}
    templates = qz.load_templates(ROOT / "quiz.toml")
    for number in (9, 10, 11, 12):
        topics = set(lessons[number].topics)
        assert topics, number
        assert len([t for t in templates if t.topic in topics]) >= 2, number


def test_known_answers_of_the_new_lessons():
    by_id = {q.id: q.answer for q in solved()}
    assert by_id["kv-cache-append/1"] == (1, 4, 7, 16)          # T = 6 -> T + 1 = 7
    assert by_id["kv-cache-step-scores/1"] == (1, 4, 1, 7)      # one query row against every key
    assert by_id["kv-cache-wrong-axis/1"] is True and by_id["kv-cache-wrong-axis/2"] is False  # T = 1 runs
    assert by_id["patch-tokens-shape/2"] == (1, 197, 768)       # ViT-B/16 at 224: 14 x 14 patches + 1
    assert by_id["patch-tokens-strides/1"] == (768, 1, 16)
    assert by_id["swin-windows-shape/1"] == (8, 4, 8)
    assert by_id["rotary-table-shape/1"] == (1, 1, 6, 16)
    assert by_id["rotary-wrong-axis-raises/1"] is True and by_id["rotary-wrong-axis-raises/2"] is False  # H = T
    assert by_id["rotary-complex-pairs/1"] == (1, 6, 4, 8)
    assert by_id["sdpa-gqa-shape/2"] == (2, 6, 3, 8)
    assert by_id["sdpa-scores-bytes/1"] == 1 * 4 * 64 * 64 * 4
    assert by_id["sdpa-wrong-layout-shape/1"] == (1, 6, 4, 16)


# -- gradient shapes (lesson 13): answers from autograd, the trace with its backward ---------------------------------

def test_gradient_templates_ask_for_dw_the_grad_of_a_transpose_and_of_an_expand():
    """The weight grad of nn.Linear is [out, in] (torch/nn/modules/linear.py keeps weight as (out_features,
    in_features)); the grad of a transpose is a strided view; the grad of Llama's repeat_kv expand sums n_rep."""
    by_id = {q.id: q for q in solved()}
    assert all(q.grad for q in solved() if q.topic == "backward") and len([q for q in solved() if q.grad]) == 13
    assert by_id["grad-linear-weight/1"].answer == (256, 64)               # (F, D), not (D, F)
    assert by_id["grad-transpose-strides/1"].answer == (3072, 64, 384, 1)  # dy's strides, axes 1 and 2 swapped
    assert by_id["grad-view-contiguous/1"].answer is True                  # the view's backward copied
    assert by_id["grad-expand-shape/1"].answer == (2, 2, 6, 64)            # kv's shape, n_rep summed away
    assert [by_id[f"grad-expand-value/{n}"].answer for n in (1, 2)] == [4, 3]   # n_rep reads, added up


def test_a_gradient_question_needs_autograd_on_to_be_solved():
    q = next(q for q in BANK if q.id == "grad-linear-weight/1")
    with pytest.raises(RuntimeError, match="does not require grad"):
        qz.solve(qz.Question(q.id, q.topic, q.ask, q.code, q.dims, q.note))


def test_a_wrong_answer_to_a_gradient_question_shows_the_backward_with_the_names():
    import io

    from rich.console import Console

    from shapetrace.app.lessons import quiz_trace
    from shapetrace.render.exercise import quiz_feedback

    q = next(q for q in solved() if q.id == "grad-transpose-strides/1")
    trace = quiz_trace(q)
    (row,) = trace.backward.rows
    assert (row.op, row.made[0].dims, row.made[0].stride, row.made[0].memory) == (
        "transpose", ("B", "T", "H", "d_k"), (3072, 64, 384, 1), "view")
    buf = io.StringIO()
    Console(file=buf, width=100, color_system=None).print(quiz_feedback(q, "(3072, 384, 64, 1)", True, False, trace))
    out = buf.getvalue()
    assert "✗ the answer is (3072, 64, 384, 1)" in out
    assert "→ operand 0  [B=2, T=6, H=8, d_k=64]  (3072, 64, 384, 1)  view" in out
    plain = next(q for q in solved() if q.id == "split-strides/1")     # a forward question: no backward shown
    assert quiz_trace(plain).backward is None
