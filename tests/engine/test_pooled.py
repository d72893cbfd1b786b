"""The pooled-output contract of a causal model, measured on the values (engine/pooled.py): a pooled vector
reads the last token of a batch entry without padding. A causal encoder with a right-padding mask pools its
last real token (correct: the contract holds, ``✓``) or, as sentence-transformers before PR #2111, the first
token of the row without padding (``pooled-misses-last-token``, ``✗``); without a padding mask that proves
entry 0 whole, or with entry 0 padded, nothing is claimed. Each test fails on b2f62da (main: no such
contract, no ``pooled-misses-last-token`` kind, no ``engine/pooled.py``)."""

from __future__ import annotations

from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn

import shapetrace
from shapetrace.engine.kinds import Kind
from shapetrace.engine.pooled import blind, entry_zero_unpadded

B, T, D, H = 2, 6, 16, 2


class CausalPool(nn.Module):
    """A causal self-attention (``tril`` and the padding mask, combined) and a gather of one token per row;
    ``pick``: "last" (the last real token), "first" (token 0: the bug), "argmax" (CLIP's end-of-text: the
    largest id, no padding mask in the call)."""

    def __init__(self, pick="last"):
        super().__init__()
        self.pick, self.emb, self.qkv, self.out = pick, nn.Embedding(50, D), nn.Linear(D, 3 * D), nn.Linear(D, D)

    def forward(self, ids, mask=None):                                             # (B, T), (B, T)
        x = self.emb(ids)                                                          # (B, T, D)
        q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in self.qkv(x).split(D, dim=2))
        allowed = torch.ones(T, T, dtype=torch.bool).tril()[None, None]
        if mask is not None:
            allowed = allowed & mask[:, None, None, :].bool()
        x = self.out(F.scaled_dot_product_attention(q, k, v, attn_mask=allowed).transpose(1, 2).reshape(B, T, D))
        if self.pick == "argmax":
            index = ids.argmax(dim=-1)
        elif self.pick == "first":
            index = torch.zeros(B, dtype=torch.long)
        else:
            index = mask.sum(dim=1) - 1
        return torch.gather(x, 1, index[:, None, None].expand(B, 1, D)).squeeze(1)   # (B, D)


def _traced(pick, mask, dependencies=True):
    torch.manual_seed(0)
    model, ids = CausalPool(pick).eval(), torch.randint(1, 50, (B, T))
    args = (ids,) if mask is None else (ids.masked_fill(mask == 0, 0), mask)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}", dependencies=dependencies) as t:
        model(*args)
    return t


def _right_padded(row=1):
    mask = torch.ones(B, T, dtype=torch.long)
    mask[row, -2:] = 0
    return mask


def test_a_last_token_pool_holds_and_a_first_token_pool_of_an_unpadded_row_is_an_error():
    ok = _traced("last", _right_padded())
    assert [d.kind for d in ok.diagnostics if d.severity == "error"] == []
    assert ok.report().verdict.errors == 0 and ok.report().verdict.mark == "?"   # (the tril's axes unnamed)
    bug = _traced("first", _right_padded())
    found = [d for d in bug.diagnostics if d.kind == "pooled-misses-last-token"]
    assert len(found) == 1 and found[0].severity == "error"
    assert found[0].message.startswith(
        "measured on the values: the pooled output of batch 0, a sequence without padding, does not change when "
        "its last input token changes, though the code declares a causal mask (tril #")
    assert bug.report().verdict.line.startswith("✗ 1 error")


def test_nothing_is_claimed_without_a_mask_that_proves_entry_zero_whole():
    # CLIP's text tower pools at the end-of-text token (the largest id), padding written into the ids after it
    clip = _traced("argmax", None)
    assert "pooled-misses-last-token" not in [d.kind for d in clip.diagnostics]
    # entry 0 padded: its last token is padding, which the pooled output must not read
    padded_first = _traced("first", _right_padded(row=0))
    assert "pooled-misses-last-token" not in [d.kind for d in padded_first.diagnostics]


def _probe(mask, axis=0, causal="tril #3", out_tokens=None):
    return SimpleNamespace(args=(torch.zeros(B, T, dtype=torch.long), mask), kwargs={}, position=0, tokens=1,
                           companions=((1, axis),), causal=causal, out_tokens=out_tokens)


def test_entry_zero_unpadded_reads_the_padding_mask_rows():
    assert entry_zero_unpadded(_probe(_right_padded(row=1))) is True
    assert entry_zero_unpadded(_probe(_right_padded(row=1).T.contiguous(), axis=1)) is True   # (T, B): batch 1
    assert entry_zero_unpadded(_probe(_right_padded(row=0))) is False                        # entry 0 padded
    assert entry_zero_unpadded(_probe(torch.ones(B, T))) is False                            # nobody padded
    assert entry_zero_unpadded(_probe(torch.randn(B, T))) is False                           # not two values
    assert entry_zero_unpadded(_probe(torch.ones(B, T + 1).masked_fill(torch.eye(B, T + 1) > 0, 0))) is False


def test_blind_needs_a_causal_mask_a_pooled_output_and_an_unchanged_one():
    mask = _right_padded(row=1)
    assert [d.kind for d in blind(_probe(mask), [[False]])] == [Kind.POOLED_MISSES_LAST_TOKEN]
    assert blind(_probe(mask), [[True]]) == []                                   # it read the last token
    assert blind(_probe(mask, causal=None), [[False]]) == []                     # no causal mask declared
    assert blind(_probe(mask, out_tokens=1), [[False]]) == []                    # the output has tokens

