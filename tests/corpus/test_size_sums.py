"""Sizes carried through a sum (issue 33 item 3: sizes and indices carry their provenance).

huggingface/transformers models/llama/modeling_llama.py ``LlamaModel.forward`` numbers the new tokens
``cache_position = torch.arange(past_seen_tokens, past_seen_tokens + inputs_embeds.shape[1])``, with
``past_seen_tokens = past_key_values.get_seq_length() if past_key_values is not None else 0`` (a
cache's ``size(-2)``). ``past + T`` used to be a plain int, so those positions, and the rotary tables
built from them, had no name (``[?, ?]``; the prefill's were counted only on their values). A sum now
keeps its terms, and ``arange(past, past + n)`` counts the axis ``n`` was read from: the tables are
``[T, ?]`` at the prefill and ``[T[-1:], ?]`` at a decode step. The verdict is unchanged: a decode
step's one position still earns nothing on the values, and the frequencies keep no name. The twin
that restarts its positions at 0 stays an error. Each case runs at distinct sizes and at B = T = H =
d_k = 4.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import shapetrace
from tests.corpus.test_rotary_positions import rotate_half

DIMS = "B=2 T=5 D=32 H=4"            # d_k = 8
SQUARE = "B=4 T=4 D=16 H=4"          # B = T = H = d_k = 4


class CachedRotaryAttention(nn.Module):
    """Llama-style attention with a KV cache grown by ``torch.cat`` along the tokens (transformers'
    ``DynamicCache.update``), rotary positions ``arange(past, past + T)`` with ``past`` the cache's
    ``size(-2)`` (0 at the prefill). ``restart=True`` numbers every step's tokens from 0 again
    (``torch.arange(T)``): the decode step's token is rotated as if it were the first one."""

    def __init__(self, dim: int, heads: int, restart: bool = False):
        super().__init__()
        self.heads, self.hd, self.restart = heads, dim // heads, restart
        self.wq, self.wk = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.wv, self.wo = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.inv_freq = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
        self.k_cache = self.v_cache = None

    def rope(self, x, positions):
        freqs = torch.outer(positions.float(), self.inv_freq)                      # (T, d_k/2)
        emb = torch.cat((freqs, freqs), dim=-1)                                    # (T, d_k)
        return x * emb.cos() + rotate_half(x) * emb.sin()                          # [rope]

    def forward(self, x):
        B, T, _ = x.shape
        past = 0 if self.k_cache is None else self.k_cache.size(-2)
        positions = torch.arange(T) if self.restart else torch.arange(past, past + T)  # (T,) [positions]
        q = self.wq(x).view(B, T, self.heads, self.hd).transpose(1, 2)             # (B, H, T, d_k)
        k = self.wk(x).view(B, T, self.heads, self.hd).transpose(1, 2)             # (B, H, T, d_k)
        v = self.wv(x).view(B, T, self.heads, self.hd).transpose(1, 2)             # (B, H, T, d_k)
        q, k = self.rope(q, positions), self.rope(k, positions)
        if self.k_cache is not None:
            k = torch.cat([self.k_cache, k], dim=2)                                # (B, H, past+T, d_k)
            v = torch.cat([self.v_cache, v], dim=2)                                # (B, H, past+T, d_k)
        self.k_cache, self.v_cache = k, v
        out = F.scaled_dot_product_attention(q, k, v, is_causal=T > 1)             # (B, H, T, d_k)
        return self.wo(out.transpose(1, 2).reshape(B, T, -1))                      # (B, T, D)


def _decoded(dims: str, steps: int = 2, **kwargs):
    sizes = dict(part.split("=") for part in dims.split())
    B, T, D, H = (int(sizes[k]) for k in "BTDH")
    torch.manual_seed(0)
    model = CachedRotaryAttention(D, H, **kwargs).eval()
    x = torch.randn(B, T, D)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        shapetrace.name(x, "B T D")
        y = model(x)
        for _ in range(steps):
            y = model(y[:, -1:])
    return t


def _tables(t) -> list:
    return [e.outputs[0].dims for e in t.events if e.op == "cat" and "freqs, freqs" in e.code]


@pytest.mark.parametrize("dims", [DIMS, SQUARE])
def test_positions_after_the_cache_count_the_new_tokens(dims):
    """The prefill's ``arange(0, 0 + T)`` is T; a decode step's ``arange(past, past + 1)`` with the 1
    read from the step's input (``y[:, -1:]``) is that token, ``T[-1:]``: the tables built from them
    carry those names (their frequencies none); the prefill's two are checked on the values (as
    before); a decode step's one position is checked on the values too, where the position its tables
    hold (read against the prefill's table) is the one its token takes: the key joined after ``past``
    cached keys, the query the newest of the keys it meets (tests/corpus/test_public_round9.py; it
    earned nothing on 10552a7: ``? checked 65 of 69 ops``)."""
    t = _decoded(dims)
    assert _tables(t) == [("T", None)] * 2 + [("T[-1:]", None)] * 4
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []
    verdict = t.report().verdict
    assert (verdict.mark, verdict.on_values) == ("✓", 6)
    # (69 before lib13: the decode step's ``y[:, -1:]`` of one token reads it as it lies: not counted)
    assert verdict.line.startswith("✓ checked all 68 ops that could carry a layout bug (6 of them on the values "
                                   "of the rotary tables or causal masks they build)")


@pytest.mark.parametrize("dims", [DIMS, SQUARE])
def test_positions_restarted_at_each_decode_step_are_an_error(dims):
    """The buggy twin (it was an error before too: ``arange(T)`` of a read size had its name)."""
    t = _decoded(dims, restart=True)
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["rotary-position-restarts"]
    assert t.report().verdict.mark == "✗"


def test_a_sum_keeps_its_terms_and_only_a_count_from_one_term_reads_the_other():
    from shapetrace.engine.sizes import SizeOf, SizeSum, other_term, size_of

    past, n = size_of(6, 3, 2), size_of(1, 7, 1)
    total = past + n
    assert (type(total), int(total), total.terms) == (SizeSum, 7, (past, n))
    assert other_term(total, size_of(6, 3, 2)) is n           # the same read, made again
    assert other_term(total, size_of(6, 4, 2)) is None        # another tensor's size of the same value
    assert other_term(0 + n, 0) is n and other_term(n, 0) is n
    assert other_term(total, 6) is None and other_term(7, 6) is None
    assert type(total + 1) is int and type(past - n) is int and type(n + True) is int
    assert type(past * 2) is int and type(SizeOf(3)) is SizeOf
