"""The hidden copy inside a batched matmul, checked against what torch really dispatches."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

from shapetrace.engine.events import Event, TensorInfo
from shapetrace.engine.hidden import matmul_hidden_copies


class _Clones(TorchDispatchMode):
    """Records the (shape, stride) of every tensor torch clones."""

    def __init__(self):
        super().__init__()
        self.clones = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.clone.default:
            self.clones.append((tuple(args[0].shape), args[0].stride()))
        return func(*args, **(kwargs or {}))


def _info(t: torch.Tensor) -> TensorInfo:
    return TensorInfo(tuple(t.shape), t.stride(), t.storage_offset(), "float32", t.is_contiguous(),
                      (None,) * t.dim(), nbytes=t.numel() * 4)


@st.composite
def operand(draw, shape):
    order = draw(st.permutations(range(len(shape))))
    base = torch.zeros([shape[i] for i in order])
    inverse = [order.index(i) for i in range(len(shape))]
    return base.permute(inverse)  # logical shape `shape`, random memory order


@st.composite
def matmul_case(draw):
    batch = draw(st.lists(st.integers(1, 3), min_size=1, max_size=2))
    m, k, n = (draw(st.integers(1, 4)) for _ in range(3))
    b_batch = [s if draw(st.booleans()) else 1 for s in batch][draw(st.integers(0, len(batch) - 1)):]
    a = draw(operand(tuple(batch) + (m, k)))
    b = draw(operand(tuple(b_batch) + (k, n)))
    return a, b


@settings(max_examples=120, deadline=None)
@given(matmul_case())
def test_predicted_copies_are_the_clones_torch_makes(case):
    a, b = case
    mode = _Clones()
    with torch.no_grad(), mode:
        a @ b
    event = Event(0, "matmul", "", "", "", [_info(a), _info(b)], [])
    predicted = matmul_hidden_copies(event)
    assert len(predicted) == len(mode.clones), (a.shape, a.stride(), b.shape, b.stride(), mode.clones)
    for copy, (shape, _stride) in zip(predicted, mode.clones):
        assert copy.after.shape == shape
        assert copy.nbytes == math.prod(shape) * 4


def test_reference_attention_copies_q_k_and_v():
    from shapetrace.app.session import trace_reference
    from shapetrace.attention.config import AttentionConfig

    trace = trace_reference(AttentionConfig())
    found = {e.index: [(c.operand, c.before.dims, c.after.stride) for c in matmul_hidden_copies(e)]
             for e in trace.events if e.op == "matmul"}
    assert found == {10: [(0, ("B", "H", "T", "d_k"), (3072, 384, 64, 1)),
                          (1, ("B", "H", "d_k", "T"), (3072, 384, 6, 1))],
                     12: [(1, ("B", "H", "T", "d_k"), (3072, 384, 64, 1))]}


def test_json_carries_the_hidden_copies_the_diagram_draws(cli):
    """The engine computes the hidden copies, so --json has them too (not only the --diagrams view)."""
    import json

    data = json.loads(cli("run", "--json").stdout)
    hidden = {e["index"]: [(c["operand"], c["bytes"], c["after"]["stride"]) for c in e["hidden_copies"]]
              for e in data["events"] if "hidden_copies" in e}
    # q @ k_t copies both operands (B and H do not chain in memory); weights @ v copies v only.
    assert hidden == {10: [(0, 24576, [3072, 384, 64, 1]), (1, 24576, [3072, 384, 6, 1])],
                      12: [(1, 24576, [3072, 384, 64, 1])]}
