"""The autograd watch (shapetrace/exercises/autograd_watch.py): a backward written "by hand" that asks
autograd for its grads gets ``uses-autograd``, with its line; honest backwards, right or wrong, are never
reported, and keep their verdicts.

Each cheat follows a public way of getting a gradient from torch: ``torch.autograd.grad`` (the checker's
own reference, itself nanoGPT's forward), ``.backward()`` and ``.grad`` (PyTorch's tutorial "A Gentle
Introduction to torch.autograd"), ``torch.func.vjp`` and ``jacfwd`` (torch.func's docs and its "Jacobians,
Hessians, hvp, vhp, and more" tutorial), ``torch.autograd.forward_ad`` (PyTorch's "Forward-mode Automatic
Differentiation" tutorial) and ``torch.autograd.functional.vjp`` (its docstring)."""

from __future__ import annotations

import linecache
import random

import pytest
import torch

from shapetrace.exercises import inputs as inp
from shapetrace.exercises.autograd_watch import AutogradWatch
from shapetrace.exercises.calls import call
from shapetrace.exercises.content import load
from shapetrace.exercises.judge import Judge, Learned
from shapetrace.exercises.untrusted import Unreadable, checked_facts

CURRICULUM = load()
BACKWARDS = ["transpose-grad", "linear-backward", "repeat-kv-backward", "head-backward"]
PATH = "/learner/backward.py"

# torch.autograd.grad on nanoGPT's forward (model.py), as the checker's own reference does it
HEAD_GRAD = '''import math
import torch

def head_backward(q, k, v, dy):
    with torch.enable_grad():
        q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        y = torch.softmax(att, dim=-1) @ v
        return torch.autograd.grad(y, (q, k, v), dy)
'''
# .backward(gradient) and .grad, as "A Gentle Introduction to torch.autograd" does: Q.backward(gradient=...)
LINEAR_BACKWARD_CALL = '''import torch
import torch.nn.functional as F

def linear_backward(x, weight, dy):
    x, weight = x.clone(), weight.clone()
    x.requires_grad = True
    weight.requires_grad_(True)
    with torch.enable_grad():
        y = F.linear(x, weight)
    y.backward(gradient=dy)
    return x.grad, weight.grad
'''
# torch.func.vjp (torch.func docs: ``_, vjp_fn = vjp(f, x); vjp_fn(cotangent)``) over transformers' repeat_kv
REPEAT_KV_VJP = '''import torch
from torch.func import vjp

def repeat_kv_backward(dy, n_rep):
    B, H, T, d_k = dy.shape
    def repeat_kv(kv):
        return kv[:, :, None, :, :].expand(B, H // n_rep, n_rep, T, d_k).reshape(B, H, T, d_k)
    _, vjp_fn = vjp(repeat_kv, dy.new_zeros(B, H // n_rep, T, d_k))
    return vjp_fn(dy)[0]
'''
# forward-mode dual numbers, as PyTorch's forward-mode AD tutorial does (make_dual, unpack_dual), one
# tangent per element of x: the transposed Jacobian applied to dy, column by column
TRANSPOSE_DUAL = '''import torch
import torch.autograd.forward_ad as fwAD

def transpose_backward(dy):
    B, H, T, d_k = dy.shape
    grad = dy.new_zeros(B * T * H * d_k)
    with fwAD.dual_level():
        for i in range(grad.numel()):
            tangent = torch.zeros(B * T * H * d_k)
            tangent[i] = 1
            x = fwAD.make_dual(torch.zeros(B, T, H, d_k), tangent.view(B, T, H, d_k))
            jvp = fwAD.unpack_dual(x.transpose(1, 2)).tangent
            grad[i] = (jvp * dy).sum()
    return grad.view(B, T, H, d_k)
'''
# torch.func.jacfwd ("Jacobians, Hessians, hvp, vhp, and more"), contracted with dy
TRANSPOSE_JACFWD = '''import torch
from torch.func import jacfwd

def transpose_backward(dy):
    B, H, T, d_k = dy.shape
    jac = jacfwd(lambda x: x.transpose(1, 2))(torch.zeros(B, T, H, d_k))
    return (jac * dy[..., None, None, None, None]).sum(dim=(0, 1, 2, 3))
'''
# torch.autograd.functional.vjp (its docstring: ``vjp(exp_reducer, inputs, v)``)
LINEAR_FUNCTIONAL = '''import torch
from torch.autograd.functional import vjp

def linear_backward(x, weight, dy):
    return vjp(lambda x, w: x @ w.transpose(0, 1), (x, weight), dy)[1]
'''
CHEATS = {
    "head-backward": HEAD_GRAD, "linear-backward": LINEAR_BACKWARD_CALL, "repeat-kv-backward": REPEAT_KV_VJP,
    "transpose-grad": TRANSPOSE_JACFWD,   # (the dual loop's thousands of traced ops overflow the child's report)
}


def _learner(code: str, name: str):
    """``name`` from ``code``, compiled as the learner's file at PATH (its lines readable, as in the child)."""
    linecache.cache[PATH] = (len(code), None, code.splitlines(True), PATH)
    namespace: dict = {}
    exec(compile(code, PATH, "exec"), namespace)
    return namespace[name]


def _watched(ex_id: str, code: str, seed: int = 5):
    """The watch's finding and the call's outcome, on the exercise's first drawn case (as the child calls)."""
    ex = CURRICULUM.exercise(ex_id)
    case = inp.draw(ex.inputs, random.Random(seed))[0]
    watch = AutogradWatch(PATH)
    got = call(_learner(code, ex.function), case.fresh(), case.names, case.dims, path=PATH, watch=watch)
    return watch.found, got, case


@pytest.mark.parametrize("ex_id,code,line,what", [
    ("head-backward", HEAD_GRAD, 7, "made a tensor autograd records for its backward (grad_fn TransposeBackward0)"),
    ("linear-backward", LINEAR_BACKWARD_CALL, 9, "made a tensor autograd records for its backward (grad_fn "
                                                 "UnsafeViewBackward0)"),
    ("linear-backward", LINEAR_FUNCTIONAL, 5, "made a tensor autograd records for its backward (grad_fn "
                                              "TransposeBackward0)"),
    ("repeat-kv-backward", REPEAT_KV_VJP, 7, "made a tensor autograd records for its backward (grad_fn "
                                             "UnsqueezeBackward0)"),
    ("transpose-grad", TRANSPOSE_DUAL, 11, "made a tensor that carries a forward-mode tangent (forward-mode "
                                           "autograd)"),
    ("transpose-grad", TRANSPOSE_JACFWD, 6, "made a tensor that carries a forward-mode tangent (forward-mode "
                                           "autograd)"),
])
def test_each_way_of_asking_autograd_is_seen_at_its_line_and_its_grads_are_autograds(ex_id, code, line, what):
    found, got, case = _watched(ex_id, code)
    assert found == [line, code.splitlines()[line - 1].strip(), what]
    want = call(CURRICULUM.exercise(ex_id).reference_function(), case.fresh(), case.names, case.dims).value
    for mine, ref in zip(*((got.value, want) if CURRICULUM.exercise(ex_id).parts else ([got.value], [want]))):
        torch.testing.assert_close(mine, ref, rtol=1e-4, atol=1e-5)   # the cheat would pass on values alone


@pytest.mark.parametrize("ex_id", BACKWARDS)
def test_honest_backwards_right_or_wrong_are_never_reported(ex_id):
    """The solution and every known mistake (a transposed dW, no sum over n_rep, no row term, ...)."""
    ex = CURRICULUM.exercise(ex_id)
    codes = [ex.solution.read_text(), ex.starter.read_text(), *(m.code for m in ex.mistakes)]
    assert len(codes) >= 4
    for code in codes:
        found, got, _ = _watched(ex_id, code)
        assert found is None, (code, found)


def test_a_grad_that_only_requires_grad_is_no_use_of_autograd():
    """A leaf marked requires_grad, with no op recorded on it, computed nothing: not reported."""
    code = "def transpose_backward(dy):\n    return dy.transpose(1, 2).clone().requires_grad_()\n"
    found, got, _ = _watched("transpose-grad", code)
    assert found is None and got.value.requires_grad


def test_what_the_watch_does_not_see_code_that_leaves_torch_function_modes():
    """An exercise rule, not containment (the module's docstring): torch._C.DisableTorchFunction() takes the
    learner's calls past every mode, the watch's too."""
    code = HEAD_GRAD.replace("    with torch.enable_grad():", "    with torch._C.DisableTorchFunction(), "
                                                             "torch.enable_grad():")
    found, got, _ = _watched("head-backward", code)
    assert found is None and got.exc is None


# -- the judge: its own verdict, only for a backward judged against autograd ---------------------------------------

def _judge(ex_id: str):
    ex = CURRICULUM.exercise(ex_id)
    cases = inp.draw(ex.inputs, random.Random(3))
    return Judge(ex, PATH, cases), cases[0]


@pytest.mark.parametrize("ex_id,grads", [("head-backward", "dq, dk and dv"), ("linear-backward", "dx and dW"),
                                         ("repeat-kv-backward", "the grad"), ("transpose-grad", "the grad")])
def test_the_verdict_names_the_grads_to_write_and_the_line(ex_id, grads):
    judge, case = _judge(ex_id)
    used = [7, "att = q @ k.transpose(-2, -1)", "made a tensor autograd records for its backward (grad_fn "
                                                "TransposeBackward0)"]
    args = case.fresh()
    right = judge.solution(*args)   # the right grads, as a hand-written backward gives them
    v = judge.case(case, Learned(value=right, args=args, facts={"autograd": used}))
    assert (v.verdict, v.line, v.code, v.mistake) == ("uses-autograd", 7, "att = q @ k.transpose(-2, -1)", None)
    assert v.summary == ("your function uses autograd: it made a tensor autograd records for its backward "
                         f"(grad_fn TransposeBackward0); write {grads} by hand, from the incoming grad")
    assert v.explanation == ["the checker compares your grads with autograd's, so grads autograd computed prove "
                             "nothing: this exercise is the backward itself, from the forward's tensors and dy "
                             "(matmuls, transposes, sums)"]
    assert judge.case(case, Learned(value=right, args=args)) is None   # the same grads, nothing asked: a pass


def test_an_exercise_not_judged_against_autograd_ignores_the_fact():
    ex = CURRICULUM.exercise("split-heads")
    case = inp.draw(ex.inputs, random.Random(3))[0]
    judge = Judge(ex, PATH, [case])
    args = case.fresh()
    right = judge.solution(*args)
    assert judge.case(case, Learned(value=right, args=args, facts={"autograd": [1, "x", "y"]})) is None


@pytest.mark.parametrize("forged", [[1, "x"], ["1", "x", "y"], [1, "x", 3], [None, "x", ["y"]]])
def test_a_forged_autograd_fact_is_refused_never_read(forged):
    with pytest.raises(Unreadable, match="autograd is not a line, its code and what it showed"):
        checked_facts({"autograd": forged})
    assert checked_facts({"autograd": [None, "", "made a tensor"]})["autograd"] == [None, "", "made a tensor"]


# -- the sandboxed checker ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cheats(tmp_path_factory):
    from shapetrace.exercises.checker import Job, check_files

    folder = tmp_path_factory.mktemp("cheats")
    jobs = []
    for ex_id, code in CHEATS.items():
        (folder / f"{ex_id}.py").write_text(code)
        jobs.append(Job(ex_id, str(folder / f"{ex_id}.py")))
    return dict(zip(CHEATS, check_files(jobs, CURRICULUM.root, time_limit=20, seed=11)))


@pytest.mark.parametrize("ex_id,line", [("head-backward", 7), ("linear-backward", 9), ("repeat-kv-backward", 7),
                                        ("transpose-grad", 6)])
def test_a_cheat_of_each_write_a_backward_exercise_gets_uses_autograd_in_the_sandbox(cheats, ex_id, line):
    v = cheats[ex_id]
    assert (v["verdict"], v["line"], v["code"]) == ("uses-autograd", line, CHEATS[ex_id].splitlines()[line - 1].strip())
    assert v["summary"].startswith("your function uses autograd: it made a tensor "), v
