"""engine/unrowed.py: under ``--all`` every call without a row of its own (elementwise math, casts, ops
the registry does not know) becomes an event the table can show, numbered as the row it ran before;
nothing the analysis reads changes. And a rowless call that raised the exception ending the block gets
its row."""

from __future__ import annotations

import math

import pytest


def _nanogpt_attention(torch, x, n_head):
    """nanoGPT's CausalSelfAttention.forward (karpathy/nanoGPT model.py), without the mask: the scale is
    one elementwise ``*`` and the MLP's GELU another; both pass names on and have no row."""
    B, T, C = x.size()
    q = x.view(B, T, n_head, C // n_head).transpose(1, 2)  # (B, nh, T, hs)
    att = (q @ q.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))  # (B, nh, T, T)
    att = torch.softmax(att, dim=-1)
    y = att @ q  # (B, nh, T, hs)
    return torch.nn.functional.gelu(y)  # (B, nh, T, hs)


def _traced(every_call: bool, dims: str, shape):
    import torch

    from shapetrace.engine.dims import parse_dims
    from shapetrace.engine.tracer import Trace
    from shapetrace.engine.unrowed import recording_every_call

    with recording_every_call() if every_call else _nothing():
        trace = Trace(parse_dims(dims))
    with trace:
        _nanogpt_attention(torch, torch.randn(*shape), 2 if shape[-1] == 8 else 4)
    return trace.report()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_every_call_keeps_each_rowless_call_as_an_event_before_the_row_it_ran_before():
    report = _traced(True, "B=2 T=6 D=8 H=2", (2, 6, 8))
    rows = [(e.index, e.op) for e in report.events]
    assert rows == [(0, "view"), (1, "transpose"), (2, "transpose"), (3, "matmul"), (4, "softmax"), (5, "matmul")]
    unrowed = [(e.index, e.op, e.output.dims, e.output.shape, e.code.strip()) for e in report.unrowed]
    assert unrowed == [
        (4, "mul", ("B", "H", "T", "T"), (2, 2, 6, 6),
         "att = (q @ q.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))  # (B, nh, T, T)"),
        (6, "gelu", ("B", "H", "T", "d_k"), (2, 2, 6, 4),
         "return torch.nn.functional.gelu(y)  # (B, nh, T, hs)"),
    ]
    assert report.unrowed[0].alloc_bytes == 2 * 2 * 6 * 6 * 4 and not report.unrowed[0].view
    assert report.left_out == {"mul": 1, "gelu": 1}
    data = report.to_dict()["unrowed"]
    assert [(d["index"], d["op"], d["output"]["dims"]) for d in data] == \
        [(4, "mul", ["B", "H", "T", "T"]), (6, "gelu", ["B", "H", "T", "d_k"])]


def test_without_every_call_no_event_is_kept():
    report = _traced(False, "B=2 T=6 D=8 H=2", (2, 6, 8))
    assert report.unrowed == [] and report.left_out == {"mul": 1, "gelu": 1}
    assert "unrowed" not in report.to_dict()


@pytest.mark.parametrize("dims, shape", [("B=2 T=6 D=8 H=2", (2, 6, 8)), ("B=4 T=4 D=16 H=4", (4, 4, 16))])
def test_names_findings_and_the_verdict_are_the_same_with_every_call(dims, shape):
    # T = H = B = 4: equal sizes decide nothing, with or without the extra records
    plain, every = _traced(False, dims, shape), _traced(True, dims, shape)
    assert [(e.index, e.op, e.output.dims) for e in plain.events] == \
        [(e.index, e.op, e.output.dims) for e in every.events]
    assert [d.to_dict() for d in plain.diagnostics] == [d.to_dict() for d in every.diagnostics]
    assert plain.verdict.line == every.verdict.line


def test_a_rowless_call_that_ends_the_block_gets_its_row():
    """transformers' ``q * cos`` of a rotary table on the wrong axis (the Llama issue of a cos table laid
    out for [B, T, H, d_k] applied to [B, H, T, d_k]): torch refuses the broadcast; the table shows the
    call where the run ended. A caught failure of the same call leaves no row (tests/app/test_runner.py)."""
    import torch

    import shapetrace

    with pytest.raises(RuntimeError), shapetrace.trace() as t:
        q = torch.randn(1, 2, 4, 4)  # (B, H, T, d_k)
        cos = torch.randn(4, 4)[None, :, None, :]  # (1, T, 1, d_k)
        q * cos  # noqa: B018
    assert [(e.op, bool(e.error)) for e in t.events] == [("__getitem__", False), ("mul", True)]
    assert t.events[1].error.startswith("RuntimeError: The size of tensor a (2) must match the size of tensor b (4)")
