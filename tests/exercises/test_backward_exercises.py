"""The exercises of lesson 13 (backpropagation through attention): backwards written by hand.

Every solution is checked here against autograd itself on every input case the checker draws (random
sizes, all kinds), so "the reference" the sandboxed checker compares with is autograd's answer; each
wrong backward (a transposed dW, a missing sum over n_rep, a softmax backward without its row term, ...)
gets a verdict that names it, worded exactly. The shared content tests (starters fail as intended,
solutions pass, each mistake gets its own explanation) are in test_lessons.py and test_test_exercises.py.
"""

from __future__ import annotations

import math
import random

import pytest
import torch
import torch.nn.functional as F

from shapetrace.attention.catalogue import CATALOGUE
from shapetrace.exercises import inputs as inp
from shapetrace.exercises.content import load
from shapetrace.exercises.judge import Judge, Learned

CURRICULUM = load()
IDS = ["transpose-grad", "linear-backward", "repeat-kv-backward", "head-backward", "test-head-backward"]


def _fn(code: str, name: str):
    namespace: dict = {}
    exec(compile(code, f"<{name}>", "exec"), namespace)
    return namespace[name]


def _solution(ex_id: str):
    ex = CURRICULUM.exercise(ex_id)
    return _fn(ex.solution.read_text(), ex.function)


# -- the forwards, as public code writes them; autograd differentiates them ------------------------------------

def _head(q, k, v):
    """One head of nanoGPT's CausalSelfAttention without the mask (model.py: att = (q @ k.transpose(-2, -1))
    * (1.0 / math.sqrt(k.size(-1))); att = F.softmax(att, dim=-1); y = att @ v)."""
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))   # (T, T_k)
    return F.softmax(att, dim=-1) @ v                                  # (T, d_k)


def _repeat_kv(kv, n_rep):
    """transformers' Llama repeat_kv (modeling_llama.py): expand a new axis, then reshape."""
    B, H_kv, T, d_k = kv.shape                                         # (B, H_kv, T, d_k)
    kv = kv[:, :, None, :, :].expand(B, H_kv, n_rep, T, d_k)           # (B, H_kv, n_rep, T, d_k)
    return kv.reshape(B, H_kv * n_rep, T, d_k)                         # (B, H, T, d_k)


def _autograd(forward, tensors, dy, *rest):
    """The grads autograd gives ``tensors`` for ``forward(*tensors, *rest)`` and the incoming grad ``dy``."""
    leaves = [t.detach().clone().requires_grad_() for t in tensors]
    with torch.enable_grad():
        return torch.autograd.grad(forward(*leaves, *rest), leaves, dy)


def _cases(builder: str, seed: int):
    return inp.draw(builder, random.Random(seed))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_head_backward_solution_is_autograds_on_every_drawn_case(seed):
    solution = _solution("head-backward")
    for case in _cases("head_grads", seed):
        q, k, v, dy = case.fresh()
        for mine, autograd in zip(solution(q, k, v, dy), _autograd(_head, (q, k, v), dy)):
            torch.testing.assert_close(mine, autograd, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_linear_backward_solution_is_autograds_on_every_drawn_case(seed):
    """nn.Linear without its bias: F.linear(x, weight) = x @ weightᵀ (torch/nn/modules/linear.py)."""
    solution = _solution("linear-backward")
    for case in _cases("linear_grads", seed):
        x, weight, dy = case.fresh()
        dx, dW = solution(x, weight, dy)
        want_dx, want_dW = _autograd(F.linear, (x, weight), dy)
        assert torch.equal(dx, want_dx) and torch.equal(dW, want_dW)   # small integers: exact


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_repeat_kv_backward_solution_is_autograds_on_every_drawn_case(seed):
    solution = _solution("repeat-kv-backward")
    for case in _cases("kv_grads", seed):
        dy, n_rep = case.fresh()
        kv = torch.zeros(dy.shape[0], dy.shape[1] // n_rep, *dy.shape[2:])   # (B, H_kv, T, d_k)
        (want,) = _autograd(_repeat_kv, (kv,), dy, n_rep)
        assert torch.equal(solution(dy, n_rep), want)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_transpose_grad_solution_is_autograds_view_with_its_strides(seed):
    """The grad of GPT-2's split (transformers' _split_heads: tensor.view(...).permute(0, 2, 1, 3)) at the
    transpose: autograd hands back a view of dy with the strides swapped, and so does the solution."""
    solution = _solution("transpose-grad")
    for case in _cases("heads_grad", seed):
        (dy,) = case.fresh()
        x = torch.zeros(dy.shape[0], dy.shape[2], dy.shape[1], dy.shape[3]).requires_grad_()  # (B, T, H, d_k)
        with torch.enable_grad():
            x.transpose(1, 2).backward(dy)
        got = solution(dy)
        assert torch.equal(got, x.grad)
        assert got.untyped_storage().data_ptr() == dy.untyped_storage().data_ptr()
        assert got.stride() == (dy.stride(0), dy.stride(2), dy.stride(1), dy.stride(3))


def test_the_inputs_of_a_backward_are_its_forwards_and_an_incoming_grad_of_the_outputs_shape():
    distinct = _cases("head_grads", 5)[0]
    q, k, v, dy = distinct.args
    T, T_k, d_k = distinct.sizes["T"], distinct.sizes["T_k"], distinct.sizes["d_k"]
    assert T != T_k and (q.shape, k.shape, v.shape, dy.shape) == ((T, d_k), (T_k, d_k), (T_k, d_k), (T, d_k))
    x, weight, dy = _cases("linear_grads", 5)[0].args
    sizes = _cases("linear_grads", 5)[0].sizes
    assert sizes["D_in"] != sizes["D_out"] and weight.shape == (sizes["D_out"], sizes["D_in"])
    assert x.shape[-1] == sizes["D_in"] and dy.shape[-1] == sizes["D_out"]
    equal = _cases("linear_grads", 5)[2]
    assert equal.case == "equal" and equal.sizes["D_in"] == equal.sizes["D_out"]   # a transposed dW fits here
    kv = _cases("kv_grads", 5)[0]
    assert kv.args[0].shape[1] == kv.sizes["H_kv"] * kv.sizes["n_rep"] and kv.sizes["n_rep"] > 1


# -- the verdicts, worded exactly ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def verdicts(curriculum_verdicts):
    """Starter, solution and every known mistake of every exercise (tests/conftest.py)."""
    return curriculum_verdicts


def test_five_exercises_in_lesson_13_in_order():
    assert list(CURRICULUM.lesson(13).exercises) == IDS
    assert [CURRICULUM.exercise(i).kind for i in IDS] == ["function"] * 4 + ["test"]
    assert CURRICULUM.exercise("head-backward").parts == ("dq", "dk", "dv")
    assert CURRICULUM.exercise("linear-backward").parts == ("dx", "dW")


def test_a_softmax_backward_without_its_row_term_is_told_so_and_which_grads_are_wrong(verdicts):
    v = verdicts[("head-backward", "starter")]
    assert (v["verdict"], v["mistake"], v["line"]) == ("wrong-values", "no-row-term", 19)
    assert v["summary"].startswith("your softmax backward has no row term: you computed dS = P ⊙ dP, but each "
                                   "row of P sums to 1")
    assert v["explanation"][0] == "your dq is wrong; dv is right"
    assert v["explanation"][1].startswith("dq[0, 0] is ")


@pytest.mark.parametrize("mistake,verdict,start", [
    ("row-term-over-queries", "wrong-values", "your softmax backward sums its row term over the queries (dim 0"),
    ("no-scale", "wrong-values", "your dq and dk miss the 1/√d_k"),
    ("dv-transposed", "wrong-shape", "your dv is dYᵀ · P, [d_k, T_k]: the transpose of the grad."),
])
def test_each_wrong_attention_backward_is_named(verdicts, mistake, verdict, start):
    v = verdicts[("head-backward", mistake)]
    assert (v["verdict"], v["mistake"]) == (verdict, mistake) and v["summary"].startswith(start), v


def test_a_transposed_dw_is_told_so_with_both_shapes_named(verdicts):
    v = verdicts[("linear-backward", "starter")]
    assert (v["verdict"], v["mistake"], v["line"]) == ("wrong-shape", "transposed-dw", 13)
    assert v["summary"] == ("your dW is transposed: xᵀ · dY is [D_in, D_out], the grad of weightᵀ. nn.Linear keeps "
                            "weight as [D_out, D_in], so its grad is dYᵀ · x, [D_out, D_in], summed over B and T.")
    s = {k: int(n) for k, n in (p.split("=") for p in v["sizes"].split(", "))}
    assert v["explanation"] == [f"your dW has shape [D_in={s['D_in']}, D_out={s['D_out']}]; expected "
                                f"[D_out={s['D_out']}, D_in={s['D_in']}] (the input case: {v['sizes']}); dx is right"]


@pytest.mark.parametrize("mistake,verdict", [("dw-per-example", "wrong-shape"), ("dw-first-example", "wrong-values"),
                                             ("dx-weight-transposed", "crash")])
def test_each_wrong_linear_backward_is_named(verdicts, mistake, verdict):
    v = verdicts[("linear-backward", mistake)]
    assert (v["verdict"], v["mistake"]) == (verdict, mistake), v


def test_a_missing_sum_over_n_rep_is_told_so(verdicts):
    v = verdicts[("repeat-kv-backward", "starter")]
    s = {k: int(n) for k, n in (p.split("=") for p in v["sizes"].split(", "))}
    assert (v["verdict"], v["mistake"]) == ("wrong-values", "no-sum")
    assert v["summary"].startswith(f"your grad keeps one query head of each group: kv head j was read by the "
                                   f"n_rep = {s['n_rep']} query heads")
    assert "the grad of an expand adds every use, a sum over n_rep" in v["summary"]
    assert verdicts[("repeat-kv-backward", "tiled-sum")]["mistake"] == "tiled-sum"
    assert verdicts[("repeat-kv-backward", "mean")]["mistake"] == "mean"


def test_a_grad_of_a_transpose_must_be_a_view(verdicts):
    v = verdicts[("transpose-grad", "contiguous-copy")]
    assert (v["verdict"], v["mistake"]) == ("layout", "contiguous-copy")
    starter = verdicts[("transpose-grad", "starter")]
    assert (starter["verdict"], starter["mistake"]) == ("wrong-values", "reshape-not-transpose")
    assert " holds dy[" in starter["summary"]   # the input is called dy, not x


# -- the judge of a function that returns several tensors (in the parent, no child) --------------------------------

def _judge(ex_id: str, seed: int = 3):
    ex = CURRICULUM.exercise(ex_id)
    cases = _cases(ex.inputs, seed)
    return Judge(ex, "learner.py", cases), cases


def test_a_backward_that_returns_too_few_grads_is_told_how_many_and_which():
    judge, cases = _judge("head-backward")
    q, k, v, dy = cases[0].fresh()
    got = Learned(value=(q, k), args=cases[0].fresh(), facts={"short": "a tuple (Tensor, Tensor)"})
    verdict = judge.case(cases[0], got)
    assert verdict.verdict == "not-a-tensor"
    assert verdict.summary == "your function returned a tuple (Tensor, Tensor); it must return 3 tensors, dq, dk, dv"


def test_grads_returned_right_pass_and_one_wrong_grad_is_named_with_the_ones_that_are_right():
    judge, cases = _judge("head-backward")
    q, k, v, dy = cases[0].fresh()
    dq, dk, dv = _autograd(_head, (q, k, v), dy)
    assert judge.case(cases[0], Learned(value=(dq, dk, dv), args=cases[0].fresh())) is None
    verdict = judge.case(cases[0], Learned(value=(dq, dk, 2 * dv), args=cases[0].fresh()))
    assert (verdict.verdict, verdict.mistake) == ("wrong-values", None)
    assert verdict.summary == "your dv is wrong; dq and dk are right"


def test_the_backward_mutants_come_from_the_catalogue_and_show_only_where_their_texts_say():
    """At T = T_k, d_k = 1 or one key, the bugs hide exactly as the catalogue says."""
    reference = _solution("head-backward")

    def hides(break_id: str, T: int, T_k: int, d_k: int) -> bool:
        g = torch.Generator().manual_seed(0)
        q, dy = torch.randn(T, d_k, generator=g), torch.randn(T, d_k, generator=g)   # (T, d_k)
        k, v = torch.randn(T_k, d_k, generator=g), torch.randn(T_k, d_k, generator=g)  # (T_k, d_k)
        broken = _fn(CATALOGUE[break_id].function("head_backward").code, "head_backward")
        try:
            got = broken(q, k, v, dy)
        except RuntimeError:
            return False
        return all(a.shape == b.shape and torch.allclose(a, b, atol=1e-6) for a, b in zip(got, reference(q, k, v, dy)))

    # with one key the true dS is 0 (a softmax of one score is constant) and P ⊙ dP is not: nothing hides it
    assert not hides("softmax-grad-no-row-term", 3, 1, 2) and not hides("softmax-grad-no-row-term", 3, 4, 2)
    assert hides("softmax-grad-no-scale", 3, 4, 1) and not hides("softmax-grad-no-scale", 3, 4, 2)
    assert not hides("grad-dk-not-transposed", 3, 4, 2) and not hides("grad-dk-not-transposed", 4, 4, 2)
    assert not hides("grad-dv-from-scores", 3, 4, 2)
    assert {m.id for m in CURRICULUM.exercise("test-head-backward").mutants} == {
        "softmax-grad-no-row-term", "softmax-grad-no-scale", "grad-dv-from-scores", "grad-dk-not-transposed"}


# -- the checker's reference is autograd itself --------------------------------------------------------------------

@pytest.mark.parametrize("ex_id", IDS[:4])
def test_the_checker_compares_each_backward_with_autograd_on_the_drawn_cases(ex_id):
    from shapetrace.exercises.calls import call

    ex = CURRICULUM.exercise(ex_id)
    assert "torch.autograd.grad(" in ex.autograd
    reference, solution = ex.reference_function(), ex.solution_function()
    for case in _cases(ex.inputs, 4):
        want, mine = call(reference, case.fresh(), case.names, case.dims), call(solution, case.fresh(), case.names,
                                                                               case.dims)
        assert want.exc is None and mine.exc is None
        pairs = zip(want.value, mine.value) if ex.parts else [(want.value, mine.value)]
        for a, b in pairs:
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)


def test_a_wrong_solution_would_not_pass_the_checker(monkeypatch):
    """The judge trusts autograd, not the solution file: with the solution swapped for the no-row-term bug, that
    bug still gets its verdict."""
    from shapetrace.exercises.content import Exercise

    ex = CURRICULUM.exercise("head-backward")
    wrong = _fn(next(m.code for m in ex.mistakes if m.id == "no-row-term"), "head_backward")
    monkeypatch.setattr(Exercise, "solution_function", lambda self: wrong)
    judge, cases = _judge("head-backward")
    verdict = judge.case(cases[0], Learned(value=wrong(*cases[0].fresh()), args=cases[0].fresh()))
    assert (verdict.verdict, verdict.mistake) == ("wrong-values", "no-row-term")


def test_content_refuses_an_autograd_reference_that_defines_another_function(tmp_path):
    from shapetrace.exercises.content import ContentError, load_exercise

    folder = tmp_path / "head-backward"
    folder.mkdir()
    source = CURRICULUM.exercise("head-backward").folder
    for name in ("starter.py", "solution.py"):
        (folder / name).write_text((source / name).read_text())
    toml = (source / "exercise.toml").read_text().replace("def head_backward(q, k, v, dy):\n    with",
                                                          "def other(q, k, v, dy):\n    with")
    (folder / "exercise.toml").write_text(toml)
    with pytest.raises(ContentError, match="autograd must define head_backward"):
        load_exercise(folder, 13)


def test_the_autograd_reference_runs_only_from_the_bytes_its_digest_was_recorded_for(tmp_path):
    """A copy of the lessons verifies as the original does; an edited autograd reference is refused, as an
    edited solution is (docs/checker.md, digests)."""
    import shutil

    from shapetrace.exercises.digests import TamperedError

    root = tmp_path / "lessons"
    shutil.copytree(CURRICULUM.root, root)
    assert load(root).exercise("head-backward").reference_function() is not None
    toml = root / "13_backward" / "head-backward" / "exercise.toml"
    toml.write_text(toml.read_text().replace("return torch.autograd.grad(y, (q, k, v), dy)",
                                             "return torch.autograd.grad(y, (q, k, v), 2 * dy)"))
    with pytest.raises(TamperedError, match="head-backward/exercise.toml changed"):
        load(root).exercise("head-backward").reference_function()
