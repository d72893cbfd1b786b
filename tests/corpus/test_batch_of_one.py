"""A batch of one folded into another axis (``view(tgt_len, bsz * num_heads, head_dim)`` at ``bsz = 1``):
the fold holds the other axis alone. Before, torch's own ``nn.MultiheadAttention`` and fairseq-style
seq-first attention at B = 1 got scores ``[H, T·B, T·B]`` and a false ``✗ attends-over-batch`` on
correct code (the one batch entry read as a batch the queries weigh). The twin below keeps the real bug:
keys laid along the batch at B = 2 are still ``attends-over-batch``.

Sources: pytorch ``torch/nn/functional.py`` ``multi_head_attention_forward`` (``q.view(tgt_len, bsz *
num_heads, head_dim).transpose(0, 1)``, then ``baddbmm``/``bmm``), which ``nn.MultiheadAttention`` runs;
facebookresearch/fairseq ``fairseq/modules/multihead_attention.py`` (the same view, ``torch.bmm(q,
k.transpose(1, 2))``); tests/styles/seq_first.py and tests/styles/mha_batch_first.py.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import shapetrace
from tests.styles import mha_batch_first, mha_seq_first


class FairseqAttention(nn.Module):
    """fairseq ``MultiheadAttention.forward`` on ``[T, B, D]``: heads folded with the batch by
    ``view(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)``. ``bug``: the input read as if batch
    first (``view(T, B, H, d_k).transpose(1, 2)`` of ``[T, B, D]``): the scores weigh batch entries."""

    def __init__(self, dim: int, heads: int, bug: bool = False):
        super().__init__()
        self.heads, self.bug = heads, bug
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(dim, dim) for _ in range(3))

    def forward(self, query):
        tgt_len, bsz, dim = query.size()  # (T, B, D)
        hd = dim // self.heads
        if self.bug:
            q = self.q_proj(query).view(tgt_len, bsz, self.heads, hd).transpose(1, 2)  # (T, H, B, d_k)
            k = self.k_proj(query).view(tgt_len, bsz, self.heads, hd).transpose(1, 2)  # (T, H, B, d_k)
            return (q @ k.transpose(-2, -1)).softmax(-1)  # (T, H, B, B)
        q = self.q_proj(query).contiguous().view(tgt_len, bsz * self.heads, hd).transpose(0, 1)  # (B*H, T, d_k)
        k = self.k_proj(query).contiguous().view(-1, bsz * self.heads, hd).transpose(0, 1)  # (B*H, T, d_k)
        v = self.v_proj(query).contiguous().view(-1, bsz * self.heads, hd).transpose(0, 1)  # (B*H, T, d_k)
        scores = torch.bmm(q, k.transpose(1, 2))  # (B*H, T, T)
        return torch.bmm(F.softmax(scores, dim=-1), v).transpose(0, 1).contiguous().view(tgt_len, bsz, dim)  # (T, B, D)


def _traced(model, x, dims: str, names: str | None = None):
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        if names:
            shapetrace.name(x, names)
        model(x)
    return t


def _findings(t) -> list[str]:
    return [d.kind for d in t.diagnostics if d.severity in ("error", "warning")]


@pytest.mark.parametrize("T", [6, 4], ids=["T=6", "T=H=4"])
def test_fairseq_heads_folded_with_a_batch_of_one(T):
    torch.manual_seed(0)
    t = _traced(FairseqAttention(32, 4).eval(), torch.randn(T, 1, 32), f"B=1 T={T} D=32 H=4", "T B D")
    assert _findings(t) == []
    scores = [e.outputs[0].dims for e in t.events if e.op == "bmm"][0]
    assert scores == ("H", "T", "T")   # (B·H of one batch entry: the heads alone)
    assert t.report().verdict.mark == "✓"


@pytest.mark.parametrize("style", [mha_batch_first, mha_seq_first], ids=["batch_first", "seq_first"])
def test_torch_multihead_attention_with_a_batch_of_one(style):
    """tests/styles' ``nn.MultiheadAttention`` blocks at B = 1 (a key padding mask: ``baddbmm``; none: ``bmm``)."""
    model, inputs = style.build({"B": 1, "T": 6, "D": 32, "H": 4})
    with torch.no_grad(), shapetrace.trace(dims="B=1 T=6 D=32 H=4") as t:
        for x, names in zip(inputs, getattr(style, "NAMES", ()) or ()):
            if names:
                shapetrace.name(x, names)
        model(*inputs)
    assert _findings(t) == []
    assert [e.outputs[0].dims for e in t.events if e.op in ("bmm", "baddbmm")][0] == ("H", "T", "T")   # (scores)


def test_keys_along_the_batch_are_still_attention_over_the_batch():
    torch.manual_seed(0)
    t = _traced(FairseqAttention(32, 4, bug=True).eval(), torch.randn(6, 2, 32), "B=2 T=6 D=32 H=4", "T B D")
    assert _findings(t) == ["attends-over-batch"]
