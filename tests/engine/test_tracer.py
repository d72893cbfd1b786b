"""The tracer against torch itself: shapes, strides, offsets, contiguity, views, copies."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import model_line
from torch.overrides import TorchFunctionMode

import shapetrace
from shapetrace.app.session import trace_reference
from shapetrace.attention.config import AttentionConfig
from shapetrace.attention.reference import build
from shapetrace.engine.ops import spec_of_callable
from shapetrace.engine.tracer import Trace


class Capture(TorchFunctionMode):
    """Entered inside the tracer: keeps the real input and output tensors of every tracked call."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        spec = spec_of_callable(func)   # the op the tracer records: found by its function
        if spec is not None and spec.row:
            op = spec.name
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            outs = [out] if isinstance(out, torch.Tensor) else [o for o in out if isinstance(o, torch.Tensor)]
            self.calls.append((op, tensors, outs))
        return out


def traced_with_truth(config: AttentionConfig):
    model, x = build(config)
    trace = Trace(config.dims)
    cap = Capture()
    with torch.no_grad(), trace, cap:
        trace.set_names(x, ["B", "T", "D"])
        model(x)
    return trace, cap.calls


CONFIGS = [AttentionConfig(), AttentionConfig(d_model=64, heads=8, batch=3, seq_len=8),
           AttentionConfig(d_model=96, heads=4, batch=1, seq_len=24), AttentionConfig(d_model=48, heads=6, seq_len=8)]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"D{c.d_model}H{c.heads}B{c.batch}T{c.seq_len}")
def test_every_record_matches_torch(config):
    trace, calls = traced_with_truth(config)
    assert [e.op for e in trace.events] == [c[0] for c in calls]
    for event, (_op, inputs, outs) in zip(trace.events, calls):
        for info, real in zip(event.outputs, outs):
            assert info.shape == tuple(real.shape)
            assert info.stride == real.stride()
            assert info.storage_offset == real.storage_offset()
            assert info.contiguous == real.is_contiguous()
            assert info.dtype == "float32"
        shares = all(o.untyped_storage().data_ptr() == inputs[0].untyped_storage().data_ptr() for o in outs)
        assert event.view == shares, event
        expected_bytes = 0 if shares else sum(o.numel() * o.element_size() for o in outs)
        assert event.alloc_bytes == expected_bytes


def test_reference_op_sequence_and_memory_verdicts():
    trace = trace_reference(AttentionConfig())
    rows = [(e.op, "view" if e.view else "copy" if e.copy_bytes else "new") for e in trace.events]
    split = [("linear", "new"), ("view", "view"), ("transpose", "view")]
    assert rows == split * 3 + [
        ("transpose", "view"), ("matmul", "new"), ("softmax", "new"), ("matmul", "new"),
        ("transpose", "view"), ("contiguous", "copy"), ("view", "view"), ("linear", "new")]
    contiguous = trace.events[14]
    assert contiguous.copy_bytes == 2 * 6 * 512 * 4 == 24576
    assert trace.events[2].output.stride == (3072, 64, 512, 1)
    assert not trace.events[2].output.contiguous


def test_reference_names_default_config():
    trace = trace_reference(AttentionConfig())
    dims = [e.output.dims for e in trace.events]
    assert dims[0] == ("B", "T", "D")
    assert dims[1] == ("B", "T", "H", "d_k")
    assert dims[2] == ("B", "H", "T", "d_k")
    assert dims[9] == ("B", "H", "d_k", "T")
    assert dims[10] == ("B", "H", "T", "T")
    assert [a.role for a in trace.events[10].output.axes] == [None, None, "query", "key"]
    assert dims[12] == ("B", "H", "T", "d_k")
    assert dims[13] == ("B", "T", "H", "d_k")
    assert dims[15] == ("B", "T", "D")
    assert dims[16] == ("B", "T", "D")


@pytest.mark.parametrize("T,H,D", [(8, 8, 512), (64, 8, 512), (4, 2, 8), (2, 2, 4), (16, 4, 16)])
def test_names_propagate_when_sizes_coincide(T, H, D):
    trace = trace_reference(AttentionConfig(d_model=D, heads=H, seq_len=T, batch=2))
    assert trace.events[2].output.dims == ("B", "H", "T", "d_k")
    assert trace.events[10].output.dims == ("B", "H", "T", "T")
    assert trace.events[15].output.dims == ("B", "T", "D")
    assert [d for d in trace.diagnostics if d.severity != "note"] == []


@pytest.mark.parametrize("config", CONFIGS[:2])
def test_tracing_never_changes_results(config):
    model, x = build(config)
    with torch.no_grad():
        untraced = model(x)
        with shapetrace.trace(dims=config.dims):
            traced = model(x)
    assert torch.equal(untraced, traced)


def test_hook_removed_on_exit_even_when_code_raises():
    x = torch.zeros(2, 6, 8, 64).transpose(1, 2)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        with shapetrace.trace(dims="B=2 T=6 D=512 H=8") as t:
            x.view(2, 6, 512)
    assert torch.overrides._get_current_function_mode_stack() == []
    assert t.events[-1].op == "view" and t.events[-1].error.startswith("RuntimeError")
    x.contiguous()  # after the block: not recorded
    assert len(t.events) == 1
    assert isinstance(t.exception, RuntimeError)


def test_contiguous_on_contiguous_is_a_noop():
    x = torch.randn(2, 3)
    with shapetrace.trace() as t:
        y = x.contiguous()
    assert y is x
    e = t.events[0]
    assert (e.noop, e.view, e.copy_bytes, e.alloc_bytes) == (True, True, 0, 0)


def test_linear_is_not_a_view_although_torch_says_is_view():
    x, w, b = torch.randn(2, 3, 4), torch.randn(5, 4), torch.randn(5)
    with shapetrace.trace() as t:
        y = F.linear(x, w, b)
    assert y._is_view()  # what torch reports; storage says otherwise
    assert y.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    assert t.events[0].view is False and t.events[0].alloc_bytes == 2 * 3 * 5 * 4


def test_copying_reshape_is_a_copy_and_viewing_reshape_a_view():
    x = torch.randn(2, 6, 8, 4)
    with shapetrace.trace() as t:
        x.reshape(2, 6, 32)
        x.transpose(1, 2).reshape(2, 8, 24)
    assert t.events[0].view and t.events[0].copy_bytes == 0
    assert not t.events[2].view and t.events[2].copy_bytes == 2 * 6 * 8 * 4 * 4


def test_source_location_is_the_user_line():
    x = torch.randn(2, 6, 16)
    with shapetrace.trace() as t:
        y = x.view(2, 6, 4, 4)  # the line
    e = t.events[0]
    assert e.source.endswith(f"test_tracer.py:{test_source_location_is_the_user_line.__code__.co_firstlineno + 3}")
    assert e.code == "y = x.view(2, 6, 4, 4)  # the line"
    assert e.function == "test_source_location_is_the_user_line"
    assert y.shape == (2, 6, 4, 4)


def test_einops_rearrange_shows_the_torch_calls_it_makes():
    from einops import rearrange

    x = torch.randn(2, 6, 512)
    with shapetrace.trace(dims="B=2 T=6 D=512 H=8") as t:
        shapetrace.name(x, "B T D")
        y = rearrange(x, "b t (h d) -> b h t d", h=8)
    assert [e.op for e in t.events] == ["reshape", "permute"]
    assert t.events[-1].output.dims == ("B", "H", "T", "d_k")
    assert t.events[-1].source.endswith(".py:" + str(t.events[-1].source.split(":")[-1]))
    assert "rearrange" in t.events[-1].code
    assert torch.equal(y, x.view(2, 6, 8, 64).transpose(1, 2))


def test_all_listed_ops_are_recorded():
    x = torch.randn(2, 6, 24)
    with shapetrace.trace() as t:
        a, b, c = x.split(8, dim=2)
        x.chunk(3, dim=-1)
        x.unbind(0)
        torch.cat([a, b], dim=-1)
        torch.stack([a, b])
        x.unsqueeze(1).squeeze(1)
        x.flatten(1).unflatten(1, (6, 24))
        x[:, None].expand(2, 3, 6, 24)
        torch.bmm(a, b.mT)
        torch.einsum("btd,bsd->bts", a, b)
        x.masked_fill(torch.ones(6, 24, dtype=torch.bool), 0.0)
        F.scaled_dot_product_attention(a, b, c)
        x.permute(2, 0, 1)
    ops = [e.op for e in t.events]
    for op in ["split", "chunk", "unbind", "cat", "stack", "unsqueeze", "squeeze", "flatten", "unflatten",
               "__getitem__", "expand", "mT", "bmm", "einsum", "masked_fill", "scaled_dot_product_attention",
               "permute"]:
        assert op in ops, op
    split = t.events[0]
    assert len(split.outputs) == 3 and split.view
    assert [o.storage_offset for o in split.outputs] == [0, 8, 16]


def test_json_schema_v1():
    import json

    trace = trace_reference(AttentionConfig())
    data = json.loads(trace.to_json())
    assert data["version"] == 2
    assert data["dims"] == {"B": 2, "T": 6, "D": 512, "H": 8, "d_k": 64}
    first = data["events"][0]
    cited = model_line("q = self.split_heads(self.w_q(x))")
    assert first["op"] == "linear" and first["source"] == f"shapetrace/attention/reference.py:{cited}"
    assert first["code"].startswith("q = self.split_heads(self.w_q(x))")
    assert first["inputs"] == [{"shape": [2, 6, 512], "stride": [3072, 512, 1], "dims": ["B", "T", "D"],
                                "contiguous": True, "storage_offset": 0, "dtype": "float32"}]
    assert data["events"][2]["output"]["stride"] == [3072, 64, 512, 1]
    assert data["events"][2]["output"]["dims"] == ["B", "H", "T", "d_k"]
    assert data["events"][14]["copy_bytes"] == 24576 and data["events"][14]["view"] is False
    assert data["diagnostics"] == []
    assert math.prod(data["events"][10]["output"]["shape"]) == 2 * 8 * 6 * 6
