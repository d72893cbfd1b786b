"""How the tracer records (issue 14): what it reads at call time, what it leaves for first read, and
the name memo that answers a repeated call (the next layer) without running its name rule again.

Every check here is against torch itself or against the same trace made without the shortcut."""

from __future__ import annotations

import gc
import weakref

import torch
import torch.nn.functional as F

import shapetrace
from shapetrace.engine import tracer as tr
from shapetrace.engine.events import Event, TensorInfo

DIMS = "B=2 T=6 D=32 H=4"


def _attention(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    B, T, D = x.shape
    q = F.linear(x, w).view(B, T, 4, D // 4).transpose(1, 2)       # (B, H, T, d_k)
    scores = q @ q.transpose(-2, -1)                                 # (B, H, T, T)
    return scores.softmax(dim=-1)


def _trace(fn, *args):
    with shapetrace.trace(dims=DIMS) as t:
        fn(*args)
    return t


def test_events_are_dataclasses_made_on_first_read_with_the_same_facts():
    x, w = torch.randn(2, 6, 32), torch.nn.Parameter(torch.randn(32, 32))
    t = _trace(_attention, x, w)
    assert len(t) == 6 and all(type(r) is tuple for r in t._records)   # nothing made while recording
    events = t.events
    assert all(isinstance(e, Event) for e in events) and t._made == 6
    view = events[1]
    assert (view.op, view.args, view.output.dims) == ("view", "2, 6, 4, 8", ("B", "T", "H", "d_k"))
    assert view.output == TensorInfo((2, 6, 4, 8), (192, 32, 8, 1), 0, "float32", True, ("B", "T", "H", "d_k"),
                                     "cpu", 2 * 6 * 32 * 4)
    assert view.source == "tests/test_recording.py:23" and view.function == "_attention"
    assert view.code == "q = F.linear(x, w).view(B, T, 4, D // 4).transpose(1, 2)       # (B, H, T, d_k)"
    assert view.stack[:2] == ("_attention", "_trace")
    assert events[3].args == "-2, -1" and events[4].args == "tensor[2, 4, 8, 6]"
    assert events[0].args == "tensor[2, 6, 32], tensor[32, 32]"
    assert events is t.events   # made once


def test_a_tensor_argument_is_not_kept_alive_by_the_trace():
    x = torch.randn(2, 6, 32)
    with shapetrace.trace(dims=DIMS) as t:
        other = torch.randn(2, 6, 32)
        gone = weakref.ref(other)
        torch.cat([x, other], dim=1)
        del other
    gc.collect()
    assert gone() is None
    assert t.events[0].args == "[tensor[2, 6, 32], tensor[2, 6, 32]], dim=1"


def test_labels_are_made_from_the_axes_when_first_read():
    x = torch.randn(2, 6, 32)
    t = _trace(lambda a: a.view(2, 6, 4, 8), x)
    info = t.events[0].output
    assert info.__dict__.get("_dims") is None       # not labelled yet
    assert info.dims == ("B", "T", "H", "d_k")
    assert info.__dict__["_dims"] == ("B", "T", "H", "d_k")


def test_metadata_is_read_at_call_time_not_when_the_event_is_made():
    """An in-place op that changes a tensor's layout after it was recorded changes nothing recorded."""
    x = torch.randn(2, 6, 32)
    with shapetrace.trace(dims=DIMS) as t:
        y = x.view(2, 6, 4, 8)
        y.transpose_(1, 2)                       # y itself now has another shape and strides
    first = t.events[0].output
    assert (first.shape, first.stride) == ((2, 6, 4, 8), (192, 32, 8, 1))


def _layers(x, weights):
    for w in weights:
        x = x + _attention(x, w).mean(dim=1).sum(dim=-1, keepdim=True)
    return x


def _without_memo(fn, *args):
    original = tr.Trace._names_of

    def fresh(self, *a, **k):
        self._name_memo.clear()
        return original(self, *a, **k)

    tr.Trace._names_of = fresh
    try:
        return _trace(fn, *args)
    finally:
        tr.Trace._names_of = original


def _facts(t):
    return [(e.op, e.args, [i.dims for i in e.inputs], [o.dims for o in e.outputs], e.view, e.copy_bytes)
            for e in t.events]


def test_the_name_memo_changes_no_name():
    x = torch.randn(2, 6, 32)
    weights = [torch.nn.Parameter(torch.randn(32, 32)) for _ in range(3)]
    remembered, fresh = _trace(_layers, x, weights), _without_memo(_layers, x, weights)
    assert _facts(remembered) == _facts(fresh)
    assert len(remembered._name_memo) < len(remembered)   # layers 1 and 2 were answered from layer 0
    assert remembered.name_mismatches == fresh.name_mismatches == 0


def test_the_memo_keys_tensor_arguments_by_kind():
    """A parameter weight is structure; a computed weight is not: the same shapes, different names."""
    x = torch.randn(2, 6, 32)
    param, computed = torch.nn.Parameter(torch.randn(32, 32)), torch.randn(32, 32)
    with shapetrace.trace(dims=DIMS) as t:
        F.linear(x, param)
        F.linear(x, computed)
    assert [e.output.dims for e in t.events] == [("B", "T", "D"), ("B", "T", None)]
    fresh = _without_memo(lambda: (F.linear(x, param), F.linear(x, computed)))
    assert _facts(t) == _facts(fresh)


def test_freeze_keeps_what_name_rules_read_and_shows_lists_and_slices():
    x = torch.zeros(2, 3)
    frozen, kwargs = tr.freeze_args((x, [1, 2], (3, slice(0, 2)), None), {"dim": -1})
    assert hash((frozen, kwargs)) is not None
    assert frozen[0] == (torch.Size([2, 3]), torch.float32, False, torch.Tensor)
    from shapetrace.engine.events import format_args
    assert format_args("op", frozen, kwargs) == "[1, 2], (3, 0:2), None, dim=-1"


def test_a_projection_sentence_names_a_width_only_when_it_has_a_name():
    from shapetrace.engine.sentences import annotate

    x = torch.randn(1, 4, 32)
    with shapetrace.trace(dims="B=1 T=4 D=32 H=4") as t:
        F.linear(x, torch.nn.Parameter(torch.randn(48, 32)))
        F.linear(x, torch.nn.Parameter(torch.randn(32, 32)))
    assert [annotate(e) for e in t.events] == [
        "projects each token's 32 features to 48 with a 48×32 weight; new buffer 768 B",
        "projects each token's 32 features to 32 (D) with a 32×32 weight; new buffer 512 B"]
