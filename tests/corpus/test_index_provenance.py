"""Indices carry what they count (issue 33 item 3): the indices ``argsort`` gives count the axis it sorted,
and a ``gather`` / ``index_select`` / ``take_along_dim`` that picks along another axis of a tensor that holds
the counted one elsewhere is ``index-wrong-axis``. Decided from where the indices came from, never from
sizes: the same at distinct sizes and at B = T = H = d_k = 4. MAE's unshuffle is in test_vision_files.py.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import shapetrace

DIMS = "B=3 T=5 D=24 H=3"            # d_k = 8
SQUARE = "B=4 T=4 D=16 H=4"          # B = T = H = d_k = 4
RUNS = "B=3 T=3 D=24 H=3"            # B = T: the slip runs only where the batch is as long as a sequence


class SortedByLength(nn.Module):
    """pytorch/pytorch torch/nn/utils/rnn.py ``pack_padded_sequence(..., enforce_sorted=False)``:
    ``lengths, sorted_indices = torch.sort(lengths, descending=True)``; ``batch_dim = 0 if batch_first else 1``;
    ``input = input.index_select(batch_dim, sorted_indices)``: a batch sorted by length (longest first) before
    attention, here with ``torch.argsort``. ``seq_first_dim=True`` keeps the sequence-first ``batch_dim = 1``
    on a batch-first input: the sort then reorders the tokens of each sequence by batch positions."""

    def __init__(self, dim: int, heads: int, seq_first_dim: bool = False):
        super().__init__()
        self.heads, self.batch_dim = heads, 1 if seq_first_dim else 0
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x, attention_mask):
        B, T, C = x.shape
        lengths = attention_mask.sum(-1)                                    # (B,)
        sorted_indices = torch.argsort(lengths, descending=True)            # (B,)
        x = x.index_select(self.batch_dim, sorted_indices)                  # (B, T, C)
        q, k, v = self.qkv(x).split(C, dim=2)                               # (B, T, C) x 3
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)       # (B, H, T, d_k)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)       # (B, H, T, d_k)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)       # (B, H, T, d_k)
        y = F.scaled_dot_product_attention(q, k, v)                         # (B, H, T, d_k)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))                # (B, T, C)


def _traced(dims: str, **kwargs):
    sizes = dict(part.split("=") for part in dims.split())
    B, T, D, H = (int(sizes[k]) for k in "BTDH")
    torch.manual_seed(0)
    model = SortedByLength(D, H, **kwargs).eval()
    x, mask = torch.randn(B, T, D), torch.ones(B, T)
    mask[0, T - 2:] = 0                                                     # sequence 0 is the shortest
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        shapetrace.name(x, "B T D")
        shapetrace.name(mask, "B T")
        model(x, mask)
    return t


@pytest.mark.parametrize("dims", [DIMS, SQUARE])
def test_a_batch_sorted_along_its_batch_axis_is_silent(dims):
    t = _traced(dims)
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []


@pytest.mark.parametrize("dims", [RUNS, SQUARE])
def test_batch_sort_indices_picked_along_the_tokens_are_an_error(dims):
    """At B != T the slip fails (index_select keeps B tokens); at B = T it runs and reorders each sequence's
    tokens by the batch's length order."""
    t = _traced(dims, seq_first_dim=True)
    [d] = [d for d in t.diagnostics if d.severity != "note"]
    e = t.events[d.event]
    B, T, D = (t.dims[k] for k in "BTD")
    assert (d.kind, e.op) == ("index-wrong-axis", "index_select")
    assert d.message == (
        f"index_select #{e.index} picks along axis 1 (T, tokens) of [B={B}, T={T}, D={D}] with indices that count "
        "B (batch): argsort made them along B. Its batch axis is axis 0 (B), so the pick reorders other values by "
        "positions of B.")
    assert t.report().verdict.mark == "✗"
