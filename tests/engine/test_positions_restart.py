"""engine/lookups.restarted_positions + rules/steps.positions_restart: a decode step whose tokens are embedded
from a position table at the sequence's first positions again, while its keys are appended after a cache.

The class: transformers issue #15736 (M2M100/XGLM positions made from ``inputs_embeds`` without
``past_key_values_length``, fixed by PR #15751) and mosaicml/examples PR #244 (MosaicGPT's ``wpe(arange(S))`` at
every step). Values decide: the positions the trace counted itself (``arange`` and what only moves it), never
a size. Each bug case fails on f9f916c (no finding: ``?`` there, from an unnamed step mask; ``✓`` once that mask
is named, which this change also does)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import shapetrace
from tests.corpus.helpers import verdict_line


class TinyGPT(nn.Module):
    """GPT-2's embeddings (``wte`` + ``wpe``) and one causal attention with a legacy tuple cache: a prefill of T
    tokens, then one step (transformers' ``GPT2Model`` before its ``Cache`` classes, nanoGPT's block)."""

    def __init__(self, vocab=50, d_model=32, heads=4, max_len=64, offset_positions=True):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d_model), nn.Embedding(max_len, d_model)
        self.c_attn, self.c_proj = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)
        self.heads, self.offset_positions = heads, offset_positions

    def block(self, ids, past=None):
        B, T = ids.shape
        past_length = 0 if past is None else past[0].size(-2)
        start = past_length if self.offset_positions else 0
        position_ids = torch.arange(start, start + T).unsqueeze(0)                 # (1, T)
        x = self.wte(ids) + self.wpe(position_ids)                                 # (B, T, D)
        q, k, v = self.c_attn(x).split(x.size(-1), dim=2)                          # (B, T, D) each
        q, k, v = (t.view(B, T, self.heads, -1).transpose(1, 2) for t in (q, k, v))   # (B, H, T, d_k)
        if past is not None:
            k, v = torch.cat((past[0], k), dim=-2), torch.cat((past[1], v), dim=-2)   # (B, H, P+T, d_k)
        total = k.size(-2)
        causal = torch.ones(T, total, dtype=torch.bool).tril(total - T)            # (T, P+T)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.size(-1))                 # (B, H, T, P+T)
        weights = scores.masked_fill(~causal, float("-inf")).softmax(-1)
        out = (weights @ v).transpose(1, 2).reshape(B, T, -1)                      # (B, T, D)
        return self.c_proj(out), (k, v)

    def forward(self, prompt, next_ids):
        _, past = self.block(prompt)
        out, _ = self.block(next_ids, past)
        return out


def _traced(model, B=2, T=6):
    torch.manual_seed(0)
    prompt, step = torch.randint(0, 50, (B, T)), torch.randint(0, 50, (B, 1))
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D=32 H=4") as t:
        model.eval()(prompt, step)
    return t


@pytest.mark.parametrize("T", [6, 4])
def test_a_step_embedded_at_the_first_position_again_is_an_error_at_its_lookup(T):
    torch.manual_seed(0)
    t = _traced(TinyGPT(offset_positions=False), T=T)
    found = [d for d in t.diagnostics if d.severity == "error"]
    assert [d.kind for d in found] == ["positions-restart"]
    lookups = [e.index for e in t.events if e.op == "embedding"]
    assert found[0].event == lookups[3]   # (the step's wpe: wte, wpe, then the step's wte, wpe)
    assert found[0].message.startswith(f"embedding #{lookups[3]} looks up the position table at the same first "
                                       f"position as embedding #{lookups[1]} did")
    assert f"appends this step's keys along T+1 after {T} cached ones" in found[0].message
    assert verdict_line(t).startswith("✗ 1 error")


def test_a_step_embedded_after_the_cache_is_checked_whole():
    """The fix (positions ``arange(past, past + T)``): no finding, and every op checked now that the step's mask
    ``ones(1, T+1).tril(T)``, its 1 read from the step's unnamed token axis, is ``[1, T+1]``."""
    torch.manual_seed(0)
    t = _traced(TinyGPT(offset_positions=True))
    assert [d.kind for d in t.diagnostics if d.severity in ("error", "warning")] == []
    step_mask = [e for e in t.events if e.op == "tril"][1]
    assert (tuple(step_mask.output.shape), step_mask.output.dims) == ((1, 7), (None, "T+1"))
    assert verdict_line(t).startswith("✓ checked all")


def test_two_sequences_embedded_from_the_first_position_and_joined_on_the_features_are_no_step():
    """A siamese encoder (sentence-transformers' ``[u, v, |u - v|]``): each sentence's positions start at 0, and
    the two are joined along the features, never as a cache along the tokens: no finding."""
    wte, wpe = nn.Embedding(50, 16), nn.Embedding(32, 16)
    a, b = torch.randint(0, 50, (2, 5)), torch.randint(0, 50, (2, 3))

    def encode(ids):
        positions = torch.arange(ids.size(1)).unsqueeze(0)            # (1, T)
        return (wte(ids) + wpe(positions)).mean(1)                     # (B, D)

    with torch.no_grad(), shapetrace.trace(dims="B=2 D=16") as t:
        u, v = encode(a), encode(b)
        torch.cat([u, v, (u - v).abs()], dim=-1)                       # (B, 3·D)
    assert "positions-restart" not in [d.kind for d in t.diagnostics]


def test_positions_the_caller_gives_are_not_read():
    """Positions handed in by the caller (``position_ids`` built outside the trace) have no values the trace
    counted: nothing is said of them, whichever they are."""
    model = TinyGPT()
    prompt, step = torch.randint(0, 50, (2, 6)), torch.randint(0, 50, (2, 1))
    given = torch.zeros(1, 1, dtype=torch.long)

    def block_with(ids, past, positions):
        x = model.wte(ids) + model.wpe(positions)                     # (B, T, D)
        k = model.c_attn(x)[..., 32:64].view(2, ids.size(1), 4, 8).transpose(1, 2)   # (B, H, T, d_k)
        return torch.cat((past, k), dim=-2)                           # (B, H, P+T, d_k)

    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        _, (k, _) = model.block(prompt)
        block_with(step, k, given)
    assert "positions-restart" not in [d.kind for d in t.diagnostics]
