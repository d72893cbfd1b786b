"""An attention whose tokens never meet: ``tokens-never-mix``, measured on the values (shapetrace/engine/mixing.py).

Each bug below keeps every name right (nothing about a layout is wrong), so until the contract existed each got
``✓`` with "each token depends on itself" held: the token contracts moved only the last token, and in a causal
attention no other output may change when it moves, while in these bugs none changes either.

* lucidrains/linear-attention-transformer's ``causal_linear_attn`` (the context is a running sum over the
  tokens, ``cumsum(dim=-3)``; causal by construction, with no mask the trace could read): the bug drops the
  cumsum. The correct file is the case that needs the second run: moving the last token changes no other output
  there, by design.
* an einsum attention in lucidrains' style (``einsum('b h i d, b h j d -> b h i j')`` for the scores, ``einsum('b h
  i j, b h j d -> b h i d', attn, v)`` for the values) in a module whose class name says nothing: the bug types the
  values' letters as ``b h i d``, which sums each query's weights (1 after the softmax) and returns its own value.
  The names prove the attention here (a softmax over the scores of one sequence), not the class name.
* cosFormer's ``kv-summed-over-features`` (tests/corpus/public19/cosformer.py): ``✓`` until now; its correct file and
  its other bug (a normaliser over the features, where the tokens do meet) keep their lines.

Correct code that must stay silent: the same repository's non-causal ``linear_attn`` (``context =
einsum('bhnd,bhne->bhde', k, v)``; moving the last token moves every output, so nothing more is run; written with
the context per token, ``'->bhnde'``, its tokens would still meet, through the keys' softmax over the tokens), a
cross-attention (lucidrains' ``Attention(x, context)``: the keys come from
``context``, and the input's tokens need not meet, so nothing is measured), packed documents with a block-diagonal
causal mask (tests/corpus/reports7/olmo_packed_positions.py: moving a seeded half of the tokens can leave every kept
token in documents of unmoved tokens, which is why the complement is moved too), and FLASH's gated attention unit
(tests/corpus/public19/flash_gau.py: a ReLU attention whose last query reads no key at this initialisation).
"""

from __future__ import annotations

import importlib

import pytest
import torch
from torch import einsum, nn

import shapetrace
from tests.corpus.helpers import traced_build

D, H = 32, 4
HELD = "held on the values: batch entries stay apart, each token depends on itself"


def _heads(t: torch.Tensor, b: int, n: int) -> torch.Tensor:
    return t.view(b, n, H, D // H).transpose(1, 2)                                 # (B, H, T, d)


def _merged(t: torch.Tensor, b: int, n: int) -> torch.Tensor:
    return t.transpose(1, 2).reshape(b, n, D)                                      # (B, T, D)


class _Projected(nn.Module):
    """lucidrains' layout: one ``to_qkv`` projection chunked into q, k, v, and ``to_out``."""

    def __init__(self, bug: str = ""):
        super().__init__()
        self.to_qkv, self.to_out, self.bug = nn.Linear(D, 3 * D, bias=False), nn.Linear(D, D), bug

    def qkv(self, x):                                                              # (B, T, D)
        b, n, _ = x.shape
        return b, n, *(_heads(t, b, n) for t in self.to_qkv(x).chunk(3, dim=-1))   # (B, H, T, d) each


class LinearSelfAttention(_Projected):
    """lucidrains' ``linear_attn``: softmax feature maps, one context per head summed over the tokens."""

    def forward(self, x):                                                          # (B, T, D)
        b, n, q, k, v = self.qkv(x)                                                # (B, H, T, d) each
        q, k = q.softmax(dim=-1) * (D // H) ** -0.5, k.softmax(dim=-2)
        context = einsum("bhnd,bhne->bhde", k, v)                                  # (B, H, d, d)
        out = einsum("bhnd,bhde->bhne", q, context)                                # (B, H, T, d)
        return self.to_out(_merged(out, b, n))


class CausalLinearAttention(LinearSelfAttention):
    """lucidrains' ``causal_linear_attn``: the context is a running sum over the tokens."""

    def forward(self, x):                                                          # (B, T, D)
        b, n, q, k, v = self.qkv(x)                                                # (B, H, T, d) each
        q, k = q.softmax(dim=-1) * (D // H) ** -0.5, torch.exp(k)
        context = einsum("bhnd,bhne->bhnde", k, v)                                 # (B, H, T, d, d)
        if self.bug != "cumsum-dropped":
            context = context.cumsum(dim=-3)                                       # (B, H, T, d, d)
        norm = k if self.bug == "cumsum-dropped" else k.cumsum(dim=-2)             # (B, H, T, d)
        out = einsum("bhnd,bhnde->bhne", q, context) / einsum("bhnd,bhnd->bhn", q, norm).unsqueeze(-1)
        return self.to_out(_merged(out, b, n))                                     # (B, T, D)


class Block(_Projected):
    """Softmax attention written with einsum, in a module named for no attention."""

    def forward(self, x):                                                          # (B, T, D)
        b, n, q, k, v = self.qkv(x)                                                # (B, H, T, d) each
        attn = (einsum("b h i d, b h j d -> b h i j", q, k) * (D // H) ** -0.5).softmax(dim=-1)  # (B, H, T, T)
        values = "b h i j, b h i d -> b h i d" if self.bug == "values-read-by-query" else \
            "b h i j, b h j d -> b h i d"
        return self.to_out(_merged(einsum(values, attn, v), b, n))                 # (B, T, D)


class CrossAttention(nn.Module):
    """lucidrains' ``Attention(x, context)``: queries from ``x``, keys and values from ``context``."""

    def __init__(self):
        super().__init__()
        self.to_q, self.to_kv, self.to_out = nn.Linear(D, D, bias=False), nn.Linear(D, 2 * D, bias=False), \
            nn.Linear(D, D)

    def forward(self, x, context):                                                 # (B, T, D), (B, S, D)
        b, n, _ = x.shape
        q = _heads(self.to_q(x), b, n)                                             # (B, H, T, d)
        k, v = (_heads(t, b, context.shape[1]) for t in self.to_kv(context).chunk(2, dim=-1))   # (B, H, S, d)
        attn = (q @ k.transpose(-2, -1) * (D // H) ** -0.5).softmax(dim=-1)       # (B, H, T, S)
        return self.to_out(_merged(attn @ v, b, n))                                # (B, T, D)


def _traced(model: nn.Module, B: int, T: int, *more: torch.Tensor):
    torch.manual_seed(0)
    x = torch.randn(B, T, D)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}", dependencies=True) as t:
        model.eval()(x, *more)
    return t


def _never_mix(t) -> list:
    return [d for d in t.diagnostics if d.kind == "tokens-never-mix"]


BUGS = [(CausalLinearAttention, "cumsum-dropped", "the module CausalLinearAttention"),
        (Block, "values-read-by-query", "softmax #")]


@pytest.mark.parametrize(("B", "T"), [(2, 6), (3, 5)])
@pytest.mark.parametrize(("cls", "bug", "declared"), BUGS, ids=[b for _, b, _ in BUGS])
def test_an_attention_whose_tokens_never_meet_is_an_error(cls, bug, declared, B, T):
    torch.manual_seed(0)
    t = _traced(cls(bug), B, T)
    errors = [d for d in t.diagnostics if d.severity == "error"]
    assert [d.kind for d in errors] == ["tokens-never-mix"], [(d.kind, d.message) for d in t.diagnostics]
    assert t.report().verdict.line == "✗ 1 error: the findings above say where and how to fix it"
    assert errors[0].message.startswith("measured on the values: no output token reads another token. With input "
                                        "tokens 0, "), errors[0].message
    assert f"last token moved), though {declared}" in errors[0].message, errors[0].message
    assert errors[0].message.endswith("is an attention: each output is made of its own token alone.")


@pytest.mark.parametrize(("B", "T"), [(2, 6), (3, 5)])
@pytest.mark.parametrize("cls", [LinearSelfAttention, CausalLinearAttention, Block])
def test_their_correct_twins_keep_every_contract(cls, B, T):
    torch.manual_seed(0)
    t = _traced(cls(), B, T)
    line = t.report().verdict.line
    assert _never_mix(t) == [] and line.startswith("✓ checked all "), line
    assert HELD in line, line


def test_the_message_names_both_halves_of_the_tokens():
    """T = 6: token 0 and a seeded half of 1..5 (the same every run), then the rest."""
    torch.manual_seed(0)
    (found,) = _never_mix(_traced(CausalLinearAttention("cumsum-dropped"), 2, 6))
    assert found.message == (
        "measured on the values: no output token reads another token. With input tokens 0, 1 and 5 of batch 0 "
        "moved, the outputs of tokens 2, 3 and 4 did not change; with 2, 3 and 4 moved, those of 0, 1 and 5 did not "
        "either (nor any other when the last token moved), though the module CausalLinearAttention is an attention: "
        "each output is made of its own token alone.")
    assert found.fix.startswith("Find where the tokens should meet: the keys contracted with the values over the "
                                "tokens (einsum('n l d, n l m -> n d m'), not '-> n l m')")


def test_a_cross_attention_is_not_asked_for_its_inputs_tokens_to_meet():
    torch.manual_seed(0)
    context = torch.randn(2, 5, D)
    t = _traced(CrossAttention(), 2, 6, context)
    assert _never_mix(t) == [] and [d.severity for d in t.diagnostics if d.severity == "error"] == []


@pytest.mark.parametrize(("module", "bug", "line"), [
    ("tests.corpus.public19.cosformer", "kv-summed-over-features",
     "✗ 1 error: the findings above say where and how to fix it"),
    ("tests.corpus.public19.cosformer", "", "✓ checked all 19 ops"),
    ("tests.corpus.reports7.olmo_packed_positions", "", "✓ checked all 25 ops"),
    ("tests.corpus.public19.flash_gau", "", "? checked 10 of 11 ops"),
])
def test_the_corpus_files_it_reads(module, bug, line):
    m = importlib.import_module(module)
    t = traced_build(m, bug, m.DIMS[0], dependencies=True)
    got = t.report().verdict.line
    assert got.startswith(line), got
    assert bool(_never_mix(t)) == (bug == "kv-summed-over-features")
