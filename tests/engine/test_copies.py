"""shapetrace/engine/infer/copies.py: a ``cat`` of one tensor with itself is named as the ``repeat`` it is."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import shapetrace

DIMS = "B=2 T=5 N=3 D=8 H=2"


def _traced(fn, *inputs):
    with torch.no_grad(), shapetrace.trace(dims=DIMS) as t:
        fn(*inputs)
    return t


def test_a_join_of_copies_of_one_tensor_is_named_as_its_repeat():
    """``torch.cat([x] * 2, 0)`` of ``[B, N, D]`` is ``x.repeat(2, 1, 1)``, copy index major: ``2·B``. Was unnamed
    on main 781b178 (the join's rule gives blocks of one batch axis no name)."""
    t = _traced(lambda x: torch.cat([x] * 2, dim=0), torch.randn(2, 3, 8))
    assert t.events[0].outputs[0].dims == ("2*B", "N", "D")


def test_a_join_of_different_tensors_keeps_the_joins_rule():
    """Two different ``[B, N, D]`` tensors joined on the batch (the Set Transformer's blocks): still no name."""
    t = _traced(lambda x, y: torch.cat([x, y], dim=0), torch.randn(2, 3, 8), torch.randn(2, 3, 8))
    assert t.events[0].outputs[0].dims == (None, "N", "D")


def _ip(copies):
    """diffusers issue #9813: image embeddings joined once per prompt again, viewed ``(batch, -1, heads, d)``."""
    def run(x, image):
        batch = x.shape[0]
        ip = torch.cat([image] * (batch if copies else 1), dim=0)                 # (n B, N, D)
        q = x.view(batch, -1, 2, 4).transpose(1, 2)                               # (B, H, T, d_k)
        k = ip.view(batch, -1, 2, 4).transpose(1, 2)                              # (B, H, n·N, d_k)
        return F.scaled_dot_product_attention(q, k, k)
    return run


def test_copies_folded_into_the_keys_attend_over_the_batch_and_one_copy_is_silent():
    """Failed on main 781b178 (``?``: the joined axis had no name, so the view's key axis had none)."""
    t = _traced(_ip(True), torch.randn(2, 5, 8), torch.randn(2, 3, 8))
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["attends-over-batch"]
    t = _traced(_ip(False), torch.randn(2, 5, 8), torch.randn(2, 3, 8))
    assert [d.kind for d in t.diagnostics if d.severity in ("error", "warning")] == []
