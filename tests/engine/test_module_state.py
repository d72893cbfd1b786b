"""engine/module_state.py: a module's attributes and buffer values copied, then put back exactly."""

from __future__ import annotations

import torch
from torch import nn

from shapetrace.engine.module_state import restore, snapshot


class Cached(nn.Module):
    """A cache kept as an attribute (replaced at each call) and one written in place into a buffer
    (meta-llama/llama model.py writes ``self.cache_k[:bsz, start_pos:start_pos + seqlen] = xk``)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache_k", torch.zeros(2, 4))
        self.k_cache, self.inner = None, nn.Linear(4, 4)

    def forward(self, x):
        self.cache_k[:, :1] = x[:, :1]
        self.k_cache = x if self.k_cache is None else torch.cat([self.k_cache, x], dim=1)
        return self.inner(x)


def test_a_snapshot_puts_back_the_attribute_and_the_buffer_values_the_call_found():
    model, x = Cached(), torch.ones(2, 4)
    state = snapshot(model)
    model(x)
    model(x)
    assert model.k_cache.shape == (2, 8) and model.cache_k[0, 0] == 1
    restore(state)
    assert model.k_cache is None
    assert torch.equal(model.cache_k, torch.zeros(2, 4))


def test_buffers_on_the_meta_device_are_not_copied():
    with torch.device("meta"):
        model = Cached()
    assert snapshot(model) is None
