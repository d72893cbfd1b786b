"""A call's arguments as the capture reads them (engine/call_args.py): the one-pass reading
(:class:`~shapetrace.engine.call_args.OnePass`) gives exactly what the general reading gives (the
operands as :func:`all_operands` or :func:`first_operand` find them, their nodes and layouts,
:func:`freeze_args`, :func:`zero_d_argument`), or steps aside.

Each case is a call as public code writes it; the one-pass reading must agree with the general one on
every field, types included (a frozen list is a ``ListOf``, a size read from an axis stays a
``SizeOf``)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import shapetrace
from shapetrace.engine.call_args import freeze_args, zero_d_argument
from shapetrace.engine.capture import Capture
from shapetrace.engine.events import ListOf, ShapeOf
from shapetrace.engine.op_args import all_operands, first_operand
from shapetrace.engine.sizes import SizeOf, size_of

X = torch.randn(2, 6, 32)                                                   # (B, T, D)
K = torch.randn(2, 4, 6, 8)                                                 # (B, H, T, d_k)
W, BIAS = torch.nn.Parameter(torch.randn(96, 32)), torch.nn.Parameter(torch.randn(96))
SCALE = torch.tensor(0.125)                                                 # a 0-d tensor
B, T = size_of(2, 0, 0), size_of(6, 0, 1)                                   # read from x.size()

#: (what it follows, the op's operands (all, or the first), args, kwargs)
CASES = [
    # nanoGPT CausalSelfAttention: k.view(B, T, self.n_head, C // self.n_head) with B, T from x.size()
    ("nanoGPT view", all_operands, (X, B, T, 4, 8), {}),
    # nanoGPT: .transpose(1, 2) and att = (q @ k.transpose(-2, -1))
    ("nanoGPT transpose", all_operands, (K, -2, -1), {}),
    ("nanoGPT matmul", all_operands, (K, K), {}),
    # transformers' GPT-2 (past key values): key = torch.cat((past_key, key), dim=-2)
    ("GPT-2 cat of a tuple", all_operands, ((K, K),), {"dim": -2}),
    # Llama's KV cache as many write it: torch.cat([cache_k, xk], dim=1)
    ("Llama cat of a list", all_operands, ([K, K],), {"dim": 1}),
    # the Annotated Transformer: scores.masked_fill(mask == 0, -1e9); a 0-d scale: scores * self.scale
    ("0-d operand", all_operands, (K, SCALE), {}),
    # a stack of 0-d tensors (torch.stack(losses)): a 0-d tensor inside a list is not a 0-d argument
    ("stack of 0-d", all_operands, ([SCALE, SCALE],), {}),
    # F.softmax(att, dim=-1, dtype=torch.float32) (transformers' Llama upcast)
    ("softmax with dtype", all_operands, (K,), {"dim": -1, "dtype": torch.float32}),
    # x.view(x.size()[:-1] + (H, d)) (Annotated Transformer, transformers' split heads): a torch.Size
    ("view of a Size", all_operands, (X, torch.Size([B, T, 4, 8])), {}),
    # x.reshape([B, T, -1]) and x.reshape((B, T, -1)): a flat list or tuple of sizes
    ("reshape list", all_operands, (X, [B, T, -1]), {}),
    ("reshape tuple", all_operands, (X, (B, T, -1)), {}),
    # F.linear(x, self.weight, self.bias) (nanoGPT's c_attn); Llama's projections have no bias
    ("linear with bias", first_operand, (X, W, BIAS), {}),
    ("linear, no bias", first_operand, (X, W), {}),
    ("linear, bias None", first_operand, (X, W, None), {}),
    ("linear, bias by name", first_operand, (X, W), {"bias": BIAS}),
    # nanoGPT's LayerNorm: F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)
    ("nanoGPT layer_norm", all_operands, (X, W[0].shape, BIAS[:32], None, 1e-5), {}),
    # F.dropout(att, p, training=self.training); F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ("dropout", all_operands, (K, 0.1), {"training": False}),
    ("SDPA", all_operands, (K, K, K), {"attn_mask": None, "dropout_p": 0.0, "is_causal": True}),
    # x[..., None] and F.cross_entropy(..., reduction="mean")
    ("ellipsis", all_operands, (X, ..., None), {}),
    ("plain strings", all_operands, (X, None, 1.5, True, "mean"), {}),
]


def _general(capture: Capture, operands, args, kwargs) -> tuple:
    """What the capture read before the one-pass reading, operand by operand."""
    inputs = operands(args, kwargs)
    nodes = [capture.node_of(t) for t in inputs]
    raws = [(t.shape, t.stride(), t.storage_offset(), t.dtype) for t in inputs]
    frozen = freeze_args(args, kwargs, inputs, raws)
    return inputs, nodes, raws, frozen, zero_d_argument(frozen)


def _kinds(frozen) -> list:
    """The type of every frozen value, inside lists and keyword pairs too."""
    args, kwargs = frozen
    values = [*args, *(v for _, v in kwargs or ())]
    return [(type(v), [type(i) for i in v]) if type(v) in (tuple, ListOf) else type(v) for v in values]


@pytest.mark.parametrize(("operands", "args", "kwargs"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_one_pass_reads_what_the_general_reading_reads(operands, args, kwargs):
    fast_capture, general_capture = Capture(), Capture()
    fast = fast_capture._read_in_one_pass(args, kwargs, operands is first_operand)
    general = _general(general_capture, operands, args, kwargs)
    assert fast is not None
    assert len(fast[0]) == len(general[0]) and all(a is b for a, b in zip(fast[0], general[0]))
    assert list(fast[1]) == list(general[1])
    assert list(fast[2]) == list(general[2])
    assert fast[3] == general[3] and repr(fast[3]) == repr(general[3])
    assert _kinds(fast[3]) == _kinds(general[3])
    assert fast[4] == general[4]
    assert fast_capture.nodes == general_capture.nodes


def test_the_frozen_view_keeps_its_sizes_and_the_operand_as_its_shape():
    # nanoGPT: k.view(B, T, self.n_head, C // self.n_head): B and T stay sizes read from an axis
    _, nodes, raws, frozen, zero_d = Capture()._read_in_one_pass((X, B, T, 4, 8), {}, False)
    assert frozen == ((ShapeOf((torch.Size([2, 6, 32]), torch.float32, False, torch.Tensor)), 2, 6, 4, 8), None)
    assert [type(a) for a in frozen[0][1:3]] == [SizeOf, SizeOf] and (frozen[0][1].node, frozen[0][1].axis) == (0, 0)
    assert nodes == [0] and raws == [(torch.Size([2, 6, 32]), (192, 32, 1), 0, torch.float32)] and not zero_d


def test_linear_reads_only_its_input_as_an_operand():
    # nanoGPT's c_attn(x): F.linear(x, weight, bias): the weight and bias are frozen, not operands
    capture = Capture()
    inputs, nodes, _, frozen, _ = capture._read_in_one_pass((X, W, BIAS), {}, True)
    assert len(inputs) == 1 and inputs[0] is X and nodes == [0] and len(capture.nodes) == 1
    assert frozen[0][1:] == (ShapeOf((torch.Size([96, 32]), torch.float32, True, torch.nn.Parameter)),
                             ShapeOf((torch.Size([96]), torch.float32, True, torch.nn.Parameter)))


def test_a_0d_argument_is_noted_only_where_zero_d_argument_finds_it():
    assert Capture()._read_in_one_pass((K, SCALE), {}, False)[4] is True           # scores * scale
    assert Capture()._read_in_one_pass(([SCALE, SCALE],), {}, False)[4] is False   # torch.stack(losses)
    assert Capture()._read_in_one_pass((K,), {"other": SCALE}, False)[4] is True


class _Tagged(torch.Tensor):
    """A tensor subclass (as libraries wrap tensors): which of its arguments are operands is
    :func:`all_operands`' call."""


@pytest.mark.parametrize("args", [
    (X, slice(0, 2)),                          # getitem's argument of x[:, :2]: a slice
    (X, [[0, 1]]),                             # a nested list (advanced indexing)
    (X, (slice(None), 0)),                     # x[:, 0]: a tuple holding a slice
    (X.as_subclass(_Tagged), 1, 2),            # a tensor subclass
    (torch.ones(3), X),                        # a tensor after an operand: read fine (control)
], ids=["slice", "nested list", "tuple of slices", "subclass", "control"])
def test_anything_else_steps_aside_and_the_general_reading_finds_the_same_nodes(args):
    capture = Capture()
    stepped_aside = capture._read_in_one_pass(args, {}, False) is None
    assert stepped_aside == (type(args[-1]) is not torch.Tensor)
    spec = type("Spec", (), {"operands": None})()
    read = capture._read_args(spec, args, {})   # (the one pass tried again, then the general reading)
    general = _general(Capture(), all_operands, args, {})
    assert list(read[1]) == general[1] and read[3] == general[3] and read[4] == general[4]
    assert capture.nodes == [capture.nodes[n] for n in general[1]]


def test_a_traced_block_freezes_the_same_arguments_as_before():
    # nanoGPT's block: the args text of each row (from the frozen arguments) as shapetrace has always shown it
    w = torch.nn.Parameter(torch.randn(96, 32))
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        x = torch.randn(2, 6, 32)
        B_, T_, C = x.size()
        q, k, v = F.linear(x, w).split(32, dim=2)
        k = k.view(B_, T_, 4, C // 4).transpose(1, 2)                      # (B, H, T, d_k)
        cat = torch.cat([k, k], dim=-2)                                    # (B, H, 2T, d_k)
        F.layer_norm(x, (32,), eps=1e-5)
    args = [(e.op, e.args) for e in t.events]
    assert args[:4] == [("linear", "tensor[2, 6, 32], tensor[96, 32]"), ("split", "32, dim=2"),
                        ("view", "2, 6, 4, 8"), ("transpose", "1, 2")]
    assert ("cat", "[tensor[2, 4, 6, 8], tensor[2, 4, 6, 8]], dim=-2") in args
    assert cat.shape == (2, 4, 12, 8)
