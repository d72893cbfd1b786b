"""A table picked by an index takes the names of the index's axes (issue 33 items 2 and 3: names from
where each element came from; indices carry their provenance).

``cos_cached[position_ids]`` reads one row of an unnamed table per entry of ``position_ids``: the result's
axes follow the index's (replayed with the index counting along each of its axes in turn, never from
sizes), so with ``position_ids = torch.arange(T)[None]`` they are ``[1, T, ?]``. Before this the result
had no names at all, and positions counted along the batch (``torch.arange(bsz)``) laid along the tokens
at B = T passed unseen; now they are ``B`` lined up with ``T``: an error. The feature axis of the table
stays unnamed (nothing proves it).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.corpus.helpers import traced_named_input
from tests.corpus.test_rotary_positions import rotate_half

DIMS = "B=2 T=5 D=32 H=4"
SQUARE = "B=4 T=4 D=16 H=4"          # B = T = H = d_k = 4


class LlamaCachedTables(nn.Module):
    """huggingface/transformers models/llama/modeling_llama.py (v4.30): ``LlamaRotaryEmbedding`` keeps
    ``cos_cached``/``sin_cached`` of ``max_position_embeddings`` rows; ``apply_rotary_pos_emb(q, k, cos,
    sin, position_ids)`` reads ``cos = cos[position_ids].unsqueeze(1)`` with ``position_ids =
    torch.arange(past_key_values_length, seq_length + past_key_values_length).unsqueeze(0)``.
    ``from_batch=True``: ``torch.arange(bsz)``, the positions counted along the batch."""

    def __init__(self, dim: int, heads: int, from_batch: bool = False, max_pos: int = 16):
        super().__init__()
        self.heads, self.hd, self.from_batch = heads, dim // heads, from_batch
        self.q_proj, self.k_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.v_proj, self.o_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
        emb = torch.cat((torch.outer(torch.arange(max_pos).float(), inv),) * 2, dim=-1)   # (max_pos, d_k)
        self.register_buffer("cos_cached", emb.cos(), persistent=False)
        self.register_buffer("sin_cached", emb.sin(), persistent=False)

    def forward(self, x):
        bsz, q_len, _ = x.size()
        q = self.q_proj(x).view(bsz, q_len, self.heads, self.hd).transpose(1, 2)   # (B, H, T, d_k)
        k = self.k_proj(x).view(bsz, q_len, self.heads, self.hd).transpose(1, 2)   # (B, H, T, d_k)
        v = self.v_proj(x).view(bsz, q_len, self.heads, self.hd).transpose(1, 2)   # (B, H, T, d_k)
        position_ids = torch.arange(bsz if self.from_batch else q_len).unsqueeze(0)  # (1, T)
        cos = self.cos_cached[position_ids].unsqueeze(1)                           # (1, 1, T, d_k) [cos]
        sin = self.sin_cached[position_ids].unsqueeze(1)                           # (1, 1, T, d_k)
        q = q * cos + rotate_half(q) * sin                                         # [rope]
        k = k * cos + rotate_half(k) * sin                                         # [rope]
        w = (q @ k.transpose(2, 3) / self.hd ** 0.5).softmax(dim=-1)               # (B, H, T, T)
        return self.o_proj((w @ v).transpose(1, 2).reshape(bsz, q_len, -1))       # (B, T, D)


def _traced(dims: str, **kwargs):
    return traced_named_input(LlamaCachedTables, dims, **kwargs)


def _picks(t) -> list:
    return [e.outputs[0].dims for e in t.events if e.op == "__getitem__" and "_cached[position_ids]" in e.code]


@pytest.mark.parametrize("dims", [DIMS, SQUARE])
def test_a_table_picked_by_positions_of_the_tokens_has_the_tokens_axis(dims):
    t = _traced(dims)
    assert _picks(t) == [(None, "T", None)] * 2
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []
    assert t.report().verdict.mark == "✓"


@pytest.mark.parametrize("dims", ["B=5 T=5 D=32 H=4", SQUARE])   # (it runs only where B = T)
def test_positions_counted_along_the_batch_pick_a_batch_axis_lined_up_with_the_tokens(dims):
    t = _traced(dims, from_batch=True)
    assert _picks(t) == [(None, "B", None)] * 2
    errors = [d for d in t.diagnostics if d.severity == "error"]
    assert [d.kind for d in errors] == ["broadcast-mismatch"] * 2
    assert "pairs B (batch) of the first with T (tokens) of the second" in errors[0].message
    assert t.report().verdict.mark == "✗"
