"""Self-attention called with its input three times (``attn(x, x, x)``): the dependency contracts move the keys
and values with the queries they are.

The call style is the Annotated Transformer's (harvardnlp/annotated-transformer, ``EncoderLayer.forward``:
``self.self_attn(x, x, x, mask)`` into ``MultiHeadedAttention.forward(query, key, value, mask)``), also
torch.nn.MultiheadAttention's ``mha(x, x, x)``. The bug multiplies the scores by the 0/1 causal mask instead
of adding ``-inf`` where it is 0 (``scores * mask``: a hidden key's score becomes 0, not minus infinity, so
softmax still gives it weight, and every query reads the future).

The same holds for the padding contract (the bug: a key padding mask multiplied into the scores, ``scores *
mask[:, None, None, :]``, so a pad's score is 0 and real tokens read it): moving only the queries' pads never
reaches a real token through the keys, and "padding stays unread" was printed, with ``✓``.

The measuring run used to move only the first argument (the queries); the keys and values were entry 0 of the
traced input twice, so no later token could reach an earlier output through them and "the causal mask holds"
was printed, with ``✓``, on this bug. shapetrace/engine/module_state.py ``moved_with_input``: an argument that is
the input tensor itself is given the moved input too.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import shapetrace

D, H = 32, 4


class MultiHeadedAttention(nn.Module):
    """Four linears, heads by ``view(B, -1, h, d_k).transpose(1, 2)``, a causal ``tril`` built in the call."""

    def __init__(self, multiplied: bool):
        super().__init__()
        self.linears, self.multiplied = nn.ModuleList([nn.Linear(D, D) for _ in range(4)]), multiplied

    def forward(self, query, key, value):                                          # (B, T, D) each
        B, T, _ = query.shape
        q, k, v = [lin(x).view(B, -1, H, D // H).transpose(1, 2)                   # (B, H, T, d_k) each
                   for lin, x in zip(self.linears, (query, key, value))]
        scores = q @ k.transpose(-2, -1) / math.sqrt(D // H)                       # (B, H, T, T)
        keep = torch.ones(T, T).tril()                                             # (T, T)
        scores = scores * keep if self.multiplied else scores + keep.log()         # (B, H, T, T)
        y = F.softmax(scores, dim=-1) @ v                                          # (B, H, T, d_k)
        return self.linears[3](y.transpose(1, 2).contiguous().view(B, T, D))      # (B, T, D)


class PaddedAttention(MultiHeadedAttention):
    """The same heads with a key padding mask ``(B, T)`` (1 for a real token) instead of the causal one."""

    def forward(self, query, key, value, mask):                                    # (B, T, D) x3, (B, T)
        B, T, _ = query.shape
        q, k, v = [lin(x).view(B, -1, H, D // H).transpose(1, 2)                   # (B, H, T, d_k) each
                   for lin, x in zip(self.linears, (query, key, value))]
        scores = q @ k.transpose(-2, -1) / math.sqrt(D // H)                       # (B, H, T, T)
        m = mask[:, None, None, :]                                                 # (B, 1, 1, T)
        scores = scores * m if self.multiplied else scores.masked_fill(m == 0, float("-inf"))  # (B, H, T, T)
        y = F.softmax(scores, dim=-1) @ v                                          # (B, H, T, d_k)
        return self.linears[3](y.transpose(1, 2).contiguous().view(B, T, D))      # (B, T, D)


def _traced(multiplied: bool, B: int, T: int):
    torch.manual_seed(0)
    model, x = MultiHeadedAttention(multiplied).eval(), torch.randn(B, T, D)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}", dependencies=True) as t:
        model(x, x, x)
    return t


@pytest.mark.parametrize(("B", "T"), [(2, 6), (3, 5)])
def test_the_causal_contract_moves_the_keys_passed_as_the_input_again(B, T):
    correct = _traced(False, B, T).report().verdict.line
    assert correct.startswith("✓ checked all 18 ops that could carry a layout bug"), correct
    assert correct.endswith("held on the values: batch entries stay apart, each token depends on itself, "
                            "the causal mask holds, heads stay apart"), correct
    t = _traced(True, B, T)
    errors = [d for d in t.diagnostics if d.severity == "error"]
    assert [d.kind for d in errors] == ["causal-mask-leaks"]
    assert errors[0].message.startswith(
        f"measured on the values: output token 0 of batch 0 depends on input token {T - 1}, a later token, "
        "though the code declares a causal mask (tril #"), errors[0].message
    assert t.report().verdict.line == "✗ 1 error: the findings above say where and how to fix it"


def test_at_equal_sizes_neither_gets_a_claim_the_trace_cannot_make():
    """B = T = H = 4: which axis is the batch is not told by sizes, so no token contract is measured and neither
    the correct file nor the bug gets ``✓`` (nor a false ``✗``)."""
    for multiplied in (False, True):
        t = _traced(multiplied, 4, 4)
        line = t.report().verdict.line
        assert line.startswith("? checked 1 of 18 ops that could carry a layout bug"), line
        assert line.endswith("not measured: batch entries stay apart, each token depends on itself (names were "
                             "found from sizes alone, and the batch and the tokens are as long as each other)"), line
        assert [d.kind for d in t.diagnostics] == ["ambiguous-sizes"]


@pytest.mark.parametrize(("B", "T"), [(2, 6), (3, 5)])
def test_the_padding_contract_moves_the_pads_of_the_keys_passed_as_the_input_again(B, T):
    outcomes = []
    for multiplied in (False, True):
        torch.manual_seed(0)
        model, x, mask = PaddedAttention(multiplied).eval(), torch.randn(B, T, D), torch.ones(B, T)
        mask[0, T - 2:] = 0                                                        # (entry 0 ends in two pads)
        with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}", dependencies=True) as t:
            model(x, x, x, mask)
        outcomes.append((t.report().verdict.line, [d for d in t.diagnostics if d.severity in ("error", "warning")]))
    (correct, quiet), (bug, found) = outcomes
    assert correct.startswith("✓ checked all 18 ops that could carry a layout bug"), correct
    assert "held on the values: batch entries stay apart, each token depends on itself, padding stays unread" \
        in correct and quiet == [], correct
    assert bug == "✗ 1 error: the findings above say where and how to fix it"
    assert [d.kind for d in found] == ["padding-read"]
    assert found[0].message.startswith("measured on the values: the output at real token 0 of batch entry 0 changes "
                                       "when only the padding of that entry changes"), found[0].message


def test_the_traced_arguments_are_left_as_they_were():
    torch.manual_seed(0)
    model, x = MultiHeadedAttention(False).eval(), torch.randn(2, 6, D)
    before = x.clone()
    with torch.no_grad(), shapetrace.trace(dims=f"B=2 T=6 D={D} H={H}", dependencies=True):
        model(x, x, x)
    assert torch.equal(x, before)
