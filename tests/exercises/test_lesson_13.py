"""Lesson 13 (backpropagation through attention) and the lesson markup it brought: the ``backward`` flag
(an example traced with its backward, shown under its table) and a ``predict=`` that names a grad
(``w_q.weight.grad``, read after the backward ran). Every shape, stride, name and number the lesson
shows or states is recomputed here with torch's own autograd."""

from __future__ import annotations

import io
import math
import types

import einops
import pytest
import torch
import torch.nn.functional as F

from shapetrace.app.lessons import lesson_blocks, traced_blocks
from shapetrace.exercises.content import load
from shapetrace.exercises.live import dotted, fence_options, run_live, split_live, split_screens

CURRICULUM = load()
LESSON = CURRICULUM.lesson(13)


@pytest.fixture(scope="module")
def examples():
    """Every example of lesson 13, traced once."""
    return [b for b in lesson_blocks(LESSON) if b.kind == "example"]


def render(blocks, width=80) -> str:
    from rich.console import Console

    from shapetrace.render.lessons import print_lesson

    buf = io.StringIO()
    print_lesson(blocks, Console(file=buf, width=width, color_system=None, legacy_windows=False))
    return buf.getvalue()


def made(block, op: str):
    """The grads the backward row of forward op ``op`` sent back."""
    (row,) = [r for r in block.trace.backward.rows if r.op == op]
    return row.made


def text() -> str:
    return " ".join(LESSON.text().split())


def _run_plain(code: str) -> dict:
    """The example run by torch alone, with autograd on and without the tracer; then, as the tool does, the
    backward of the sum of its last tensor that requires grad."""
    ns = {"torch": torch, "F": F, "math": math, "rearrange": einops.rearrange,
          "shapetrace": types.SimpleNamespace(name=lambda t, names: t)}
    exec(code, ns)
    last = [v for v in ns.values() if isinstance(v, torch.Tensor) and v.requires_grad and v.grad_fn is not None][-1]
    last.sum().backward()
    return ns


# -- the lesson's moments ----------------------------------------------------------------------------------------------

def test_lesson_13_is_listed_with_its_exercises(cli):
    import json

    data = json.loads(cli("lessons", "--json").output)
    assert [d["lesson"] for d in data] == list(range(1, 14))
    assert data[12]["title"] == "Backpropagation through attention"
    assert [e["id"] for e in data[12]["exercises"]] == ["transpose-grad", "linear-backward", "repeat-kv-backward",
                                                       "head-backward", "test-head-backward"]


def test_lesson_13_has_backward_examples_a_grad_diagram_two_predictions_and_a_live_bug():
    fences = [fence_options(dims) for kind, _, dims in split_live(LESSON.text()) if kind == "live"]
    assert sum(f.backward for f in fences) == 6
    assert [f.predict for f in fences if f.predict] == ["w_q.weight.grad", "kv.grad"]
    assert [f.expect for f in fences if f.expect] == ["raises"]
    assert [f.diagram for f in fences if f.diagram is not None] == [0]


def test_no_example_shows_a_false_finding_and_the_bug_raises_what_torch_raises(examples):
    for block in examples[:-1]:
        assert [d for d in block.trace.diagnostics if d.severity != "note"] == [], block.body
        assert block.trace.exception is None, block.body
    bug = examples[-1]
    assert bug.expect_met and isinstance(bug.trace.exception, RuntimeError)
    assert str(bug.trace.exception).startswith("Trying to backward through the graph a second time")
    # the same code without the tracer: torch refuses it the same way; with the cache detached it runs
    ns = {"torch": torch, "shapetrace": types.SimpleNamespace(name=lambda t, names: t)}
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        exec(bug.body, ns)
    exec(bug.body.replace("cache.sum().backward()", "cache.sum().backward()\ncache = cache.detach()"), ns)


# -- the grads the tables show, against autograd ----------------------------------------------------------------------

def test_the_grad_of_the_transpose_is_a_view_with_the_strides_swapped_back(examples):
    transpose, diagram = examples[0], examples[1]
    (sent,) = made(transpose, "transpose")
    assert (sent.dims, sent.shape, sent.stride, sent.memory) == (("B", "T", "H", "d_k"), (1, 3, 2, 4),
                                                                 (24, 4, 12, 1), "view")
    # torch's TransposeBackward0 on the same sizes, untraced
    x = torch.randn(1, 3, 2, 4, requires_grad=True)                     # (B, T, H, d_k)
    dy = torch.randn(1, 2, 3, 4)                                        # (B, H, T, d_k)
    grads = []
    x.register_hook(grads.append)
    (x.transpose(1, 2) * dy).sum().backward()
    assert grads[0].stride() == sent.stride and not grads[0].is_contiguous()
    assert x.grad.stride() == (24, 8, 4, 1)   # stored in x's own strides: "the view lasts only inside the backward"
    # the hand-written grad drawn in the next example is that same layout
    (event,) = diagram.trace.events
    assert (event.output.stride, event.output.dims) == (sent.stride, sent.dims)
    assert diagram.diagram == 0 and "memory  6 blocks of 4 floats" in render([diagram], width=100)


def test_dw_of_the_query_projection_is_the_weights_shape_and_the_question_is_answered_by_torch(examples):
    linear = examples[2]
    assert linear.predict == "w_q.weight.grad" and linear.answer == (8, 8) == linear.trace.backward.params[1].shape
    weight = next(g for g in made(linear, "linear") if g.of == "weight")
    assert (weight.shape, weight.stride, weight.memory) == ((8, 8), (8, 1), "new")
    assert tuple(_run_plain(linear.body)["w_q"].weight.grad.shape) == linear.answer
    (row,) = [r for r in linear.trace.backward.rows if r.op == "linear"]
    assert "dW = dYᵀ · x, summed over B, T: [8, 8]" in row.sentence


def test_the_grad_of_repeat_kv_is_a_new_tensor_summed_over_n_rep(examples):
    gqa = examples[3]
    assert gqa.answer == (1, 2, 4, 5) == tuple(_run_plain(gqa.body)["kv"].grad.shape)
    (summed,) = made(gqa, "expand")
    assert (summed.dims, summed.shape, summed.memory) == (("B", "H_kv", None, "T", "d_k"), (1, 2, 1, 4, 5), "new")
    (back,) = made(gqa, "reshape")                     # copied in the forward, a view in the backward
    assert (back.dims, back.memory) == (("B", "H_kv", "n_rep", "T", "d_k"), "view")
    assert [e.op for e in gqa.trace.events if e.copy_bytes] == ["reshape"]
    # the sum is autograd's: the grad of kv is dy summed over each group of n_rep query heads
    ns = _run_plain(gqa.body)
    assert torch.allclose(ns["kv"].grad, ns["dy"].view(1, 2, 3, 4, 5).sum(dim=2))


def test_one_heads_backward_runs_as_the_lesson_reads_it(examples):
    head = examples[4]
    assert [r.op for r in head.trace.backward.rows] == ["matmul", "softmax", "matmul", "transpose"]
    assert [r.event for r in head.trace.backward.rows] == [3, 2, 1, 0]
    dp, dv = made(head, "softmax")[0], head.trace.backward.rows[0].made[1]
    assert (dv.dims, dp.dims) == (("T_k", "d_k"), ("T", "T_k"))
    assert "dy − Σ dy ⊙ y along the softmax axis" in head.trace.backward.rows[1].sentence
    assert "`dv = Pᵀ · dY` and `dP = dY · vᵀ` at `#3 matmul`, the row term at `#2 softmax`" in text()


def test_what_autograd_keeps_and_the_numbers_the_lesson_states(examples):
    kept = examples[5].trace.backward
    P = torch.empty(1, 8, 64, 64)                                       # (B, H, T, T)
    q = torch.empty(1, 8, 64, 16)                                       # (B, H, T, d_k)
    assert kept.weights_bytes == P.nbytes == 128 * 1024 and q.nbytes == 32 * 1024
    assert "128 KiB here against 32 KiB for each of q, k and v" in text()
    # saved, counted by torch's own hooks on the same forward, untraced
    seen = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: seen.append(t) or t, lambda t: t):
        _run_plain(examples[5].body)
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in seen}
    assert kept.saved_bytes == sum(storages.values())
    # twice the tokens, four times the weights
    doubled = run_live(examples[5].body.replace("64", "128"), "t13", "B=1 H=8 T=128 d_k=16 backward").trace
    assert doubled.backward.weights_bytes == 4 * kept.weights_bytes
    long = torch.empty(1, 8, 4096, 4096, device="meta")                 # (B, H, T, T)
    assert long.nbytes == 512 * 2**20 and "At a 4096-token context that tensor alone is 512 MiB" in text()


# -- the markup: ``backward`` and a predicted grad -------------------------------------------------------------------

def test_the_backward_flag_traces_the_backward_and_without_it_nothing_changes():
    code = "x = torch.randn(2, 3, requires_grad=True)   # (B, D)\nshapetrace.name(x, 'B D')\ny = x.t()   # (D, B)\n"
    plain = run_live(code, "t13", "B=2 D=3").trace
    assert plain.backward is None and plain.events[0].output is not None
    traced = run_live(code, "t13", "B=2 D=3 backward").trace
    (row,) = traced.backward.rows
    assert (row.op, row.made[0].dims, row.made[0].memory) == ("t", ("B", "D"), "view")
    assert fence_options("B=2 backward predict=x.grad") == fence_options("backward B=2 predict=x.grad")
    assert fence_options("B=2 backward").dims == "B=2"


def test_a_predicted_grad_is_read_after_the_backward_and_only_by_attribute():
    run = run_live("w = torch.nn.Linear(3, 2)\ny = w(torch.randn(4, 3))   # (N, 2)\n", "t13",
                   "N=4 backward predict=w.weight.grad")
    assert run.answer == (2, 3)
    assert dotted({"w": None}, "w.weight.grad") is None and dotted({}, "__import__") is None


def test_a_raising_backward_example_shows_its_error_and_no_backward_view(examples):
    out = render([examples[-1]])
    assert "raised RuntimeError: Trying to backward through the graph a second time" in out
    assert "backward pass (in the order autograd ran it)" not in out
    first = render([examples[0]])
    assert first.index("example 1, traced:") < first.index("backward pass (in the order autograd ran it)")
    assert "→ operand 0  [B=1, T=3, H=2, d_k=4]  (24, 4, 12, 1)  view" in first


def test_present_asks_each_grad_on_its_own_screen_and_traces_the_answer():
    screens = split_screens(LESSON.text())
    asked = [(n, part[1]) for n, screen in enumerate(screens) for part in screen if part[0] == "question"]
    assert len(asked) == 2
    for n, body in asked:
        kind, answered, fence = screens[n + 1][0]
        assert kind == "answer" and answered == body
        (block,) = traced_blocks([(kind, answered, fence)], "lesson 13", first=2)
        assert block.answer_first and block.answer is not None and block.trace.backward.rows
