"""The inference's state (engine/infer/state.py): what later uses prove is named again only where it
reaches (:func:`~shapetrace.engine.infer.state.corrected`).

Each record's name rule and element replay run once per trace, except on the records a pin reaches
(the pinned tensor and what is computed from it): a call upstream of every pin is answered from the
first walk's memos, never worked out twice."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import shapetrace
from shapetrace.engine.infer import corrections, elements, names, state

B, T, D, H, L = 2, 1, 16, 4, 8


class StaticCacheStep(nn.Module):
    """One decode step of huggingface/transformers' Llama attention with a ``StaticCache``:
    ``StaticCache.update`` writes ``k_out.index_copy_(2, cache_position, key_states)`` into buffers
    allocated for ``max_cache_len`` tokens up front, then attention reads the whole buffers. Nothing
    names the buffers' ``L`` axis until the write does, so the write pins it (its capacity, ``L``)."""

    def __init__(self):
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(D, D, bias=False) for _ in range(4))

    def forward(self, x, position):
        d_k = D // H
        k_out = torch.zeros(B, H, L, d_k)                                       # (B, H, L, d_k)
        v_out = torch.zeros(B, H, L, d_k)                                       # (B, H, L, d_k)
        q = self.q_proj(x).view(B, T, H, d_k).transpose(1, 2)                   # (B, H, T, d_k)
        k = self.k_proj(x).view(B, T, H, d_k).transpose(1, 2)                   # (B, H, T, d_k)
        v = self.v_proj(x).view(B, T, H, d_k).transpose(1, 2)                   # (B, H, T, d_k)
        k_out.index_copy_(2, position, k)                                       # (B, H, L, d_k)
        v_out.index_copy_(2, position, v)                                       # (B, H, L, d_k)
        w = (q @ k_out.transpose(-2, -1) / math.sqrt(d_k)).softmax(-1)          # (B, H, T, L)
        y = (w @ v_out).transpose(1, 2).reshape(B, T, D)                        # (B, T, D)
        return self.o_proj(y)


@pytest.fixture
def counted(monkeypatch):
    """Name-rule and replay evaluations per record index, and the pins the trace was corrected with."""
    seen = {"record": None, "rules": {}, "replays": {}, "pins": {}}

    def per_record(step):
        def run(inference, index, *rest):
            seen["record"] = index
            return step(inference, index, *rest)
        return run

    def counting(kind, fn):
        def run(*args, **kwargs):
            seen[kind][seen["record"]] = seen[kind].get(seen["record"], 0) + 1
            return fn(*args, **kwargs)
        return run

    def pins_kept(fn):
        def run(inference):
            found = fn(inference)
            seen["pins"].update(found)
            return found
        return run

    monkeypatch.setattr(state, "infer_op", per_record(state.infer_op))
    monkeypatch.setattr(names, "checked", counting("rules", names.checked))
    monkeypatch.setattr(elements, "_named", counting("replays", elements._named))
    monkeypatch.setattr(corrections, "corrections", pins_kept(corrections.corrections))
    return seen


def _reached(capture, pinned) -> set[int]:
    """The indices of the records that read or make a pinned node or anything computed from one."""
    reach, found = set(pinned), set()
    for index, record in enumerate(capture.records):
        ins, outs = getattr(record, "ins", ()), getattr(record, "outs", ())
        if reach & set(ins) or reach & set(outs):
            found.add(index)
            reach.update(outs)
    return found


def test_a_static_cache_is_named_from_its_write_and_nothing_upstream_is_named_twice(counted):
    torch.manual_seed(0)
    model = StaticCacheStep().eval()
    x, position = torch.randn(B, T, D), torch.tensor([3])
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        model(x, position)
    writes = [e for e in t.events if e.op == "index_copy_"]
    # the buffers, read first by their writes, hold what the writes prove: L, the cache's capacity
    assert [e.inputs[0].dims for e in writes] == [("B", "H", "L", "d_k")] * 2
    assert len(counted["pins"]) == 2
    reached = _reached(t.capture, counted["pins"])
    twice = {i for kind in ("rules", "replays") for i, n in counted[kind].items() if n > 1}
    assert twice, "the pins reach records that must be named again"
    assert twice <= reached, f"records named twice that no pin reaches: {sorted(twice - reached)}"
    upstream = [i for i in counted["rules"] if i not in reached]
    assert upstream and all(counted["rules"][i] == 1 for i in upstream)
