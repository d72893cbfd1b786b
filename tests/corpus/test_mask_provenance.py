"""A mask built for another attention (issue 33 item 4): the encoder's source padding mask given to the
decoder's self-attention, the target's mask given to cross-attention, a causal mask built from the
target's length on cross-attention. Each lines up with the scores only because the two lengths are equal
(S == T), so torch runs it without a word; the mask's axes carry the sequence they were built from
(``src != pad`` has the source's tokens, ``tgt.size(1)`` the target's), and that decides, never sizes.

Inputs are named (``shapetrace.name``): with names from ``--dims`` alone, S == T cannot be told apart,
and nothing is said (:func:`test_names_from_sizes_alone_decide_nothing`).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import shapetrace
from tests.corpus.helpers import Case, corpus_tests, trace_case

EQUAL = "B=2 S=6 T=6 D=32 H=4"          # S == T: every bug below runs
SQUARE = "B=4 S=4 T=4 D=32 H=4"         # B = S = T = H = 4
DISTINCT = "B=2 S=5 T=7 D=32 H=4"       # S != T: only the correct twins run
NAMES = ("B S", "B T")


def subsequent_mask(size: int):
    """The Annotated Transformer's ``subsequent_mask``: True where a query may see a key, (1, T, T)."""
    attn_shape = (1, size, size)
    return torch.triu(torch.ones(attn_shape), diagonal=1).type(torch.uint8) == 0  # (1, T, T)


def attention(query, key, value, mask=None):
    """The Annotated Transformer's ``attention``."""
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)  # (B, H, L, L_kv)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)                    # (B, H, L, L_kv) [fill]
    return torch.matmul(scores.softmax(dim=-1), value)                  # (B, H, L, d_k)


class MultiHeadedAttention(nn.Module):
    """The Annotated Transformer's ``MultiHeadedAttention`` (``mask.unsqueeze(1)`` for the heads)."""

    def __init__(self, h: int, d_model: int):
        super().__init__()
        self.h, self.d_k = h, d_model // h
        self.linears = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(4)])

    def forward(self, query, key, value, mask=None):
        if mask is not None:
            mask = mask.unsqueeze(1)                                    # (B, 1, L or 1, L_kv)
        nbatches = query.size(0)
        query, key, value = [lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)  # (B, H, L, d_k)
                             for lin, x in zip(self.linears, (query, key, value))]
        x = attention(query, key, value, mask=mask)                     # (B, H, L, d_k)
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)  # (B, L, D)
        return self.linears[-1](x)


class AnnotatedEncoderDecoder(nn.Module):
    """The Annotated Transformer's ``EncoderDecoder`` reduced to one attention of each kind, with its
    ``Batch`` masks: ``src_mask = (src != pad).unsqueeze(-2)`` (B, 1, S) and ``tgt_mask`` (B, T, T).
    ``swap``: ``"self"`` gives the decoder's self-attention the source mask, ``"cross"`` gives the
    cross-attention the target mask (the arguments of ``DecoderLayer.forward`` swapped)."""

    def __init__(self, swap: str = "", d_model: int = 32, h: int = 4, vocab: int = 50):
        super().__init__()
        self.swap = swap
        self.embed = nn.Embedding(vocab, d_model)
        self.enc_attn, self.self_attn, self.src_attn = (MultiHeadedAttention(h, d_model) for _ in range(3))

    def forward(self, src, tgt, pad: int = 0):
        src_mask = (src != pad).unsqueeze(-2)                           # (B, 1, S)
        tgt_mask = (tgt != pad).unsqueeze(-2)                           # (B, 1, T)
        tgt_mask = tgt_mask & subsequent_mask(tgt.size(-1)).type_as(tgt_mask.data)  # (B, T, T)
        x = self.embed(src)                                             # (B, S, D)
        memory = self.enc_attn(x, x, x, src_mask)                       # (B, S, D) [enc-mask]
        y = self.embed(tgt)                                             # (B, T, D)
        y = self.self_attn(y, y, y, src_mask if self.swap == "self" else tgt_mask)  # (B, T, D) [self-mask]
        return self.src_attn(y, memory, memory, tgt_mask if self.swap == "cross" else src_mask)  # [cross-mask]


class AdditiveCrossAttention(nn.Module):
    """fairseq / OpenNMT style: additive float masks, ``future_mask`` for the decoder
    (``torch.triu(fill_with_neg_inf(torch.zeros(dim, dim)), 1)``) and a source padding mask. With
    ``causal_on_cross``, the future mask built from the target's length is also added to the
    cross-attention scores (T queries over S keys): it hides source tokens by their index."""

    def __init__(self, causal_on_cross: bool = False, d_model: int = 32, h: int = 4, vocab: int = 50):
        super().__init__()
        self.h, self.causal_on_cross = h, causal_on_cross
        self.embed = nn.Embedding(vocab, d_model)
        self.q, self.k, self.v = (nn.Linear(d_model, d_model) for _ in range(3))

    def heads(self, x):
        B, L, D = x.shape
        return x.view(B, L, self.h, D // self.h).transpose(1, 2)        # (B, H, L, d_k)

    def forward(self, src, tgt, pad: int = 0):
        T = tgt.size(1)
        future_mask = torch.triu(torch.full((T, T), float("-inf")), 1)  # (T, T)
        padding = torch.zeros(src.shape, dtype=torch.float).masked_fill(src == pad, float("-inf"))  # (B, S)
        memory, y = self.embed(src), self.embed(tgt)                   # (B, S, D), (B, T, D)
        q, k, v = self.heads(self.q(y)), self.heads(self.k(memory)), self.heads(self.v(memory))
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))        # (B, H, T, S)
        scores = scores + padding[:, None, None, :]                     # (B, H, T, S) [pad-add]
        if self.causal_on_cross:
            scores = scores + future_mask                               # (B, H, T, S) [future-add]
        return scores.softmax(dim=-1) @ v                               # (B, H, T, d_k)


class SdpaDecoderLayer(nn.Module):
    """A decoder layer on ``F.scaled_dot_product_attention`` (transformers' ``sdpa_attention_forward``
    style: a boolean ``attn_mask`` [B, 1, L, S], True where a query may attend). ``swap``: the decoder's
    self-attention is given the encoder's padding mask (the arguments of a ``forward(tgt, memory,
    tgt_mask, memory_mask)`` passed in the wrong order)."""

    def __init__(self, swap: bool = False, d_model: int = 32, h: int = 4, vocab: int = 50):
        super().__init__()
        self.h, self.swap = h, swap
        self.embed = nn.Embedding(vocab, d_model)
        self.self_qkv, self.cross_q, self.cross_kv = (nn.Linear(d_model, n * d_model) for n in (3, 1, 2))

    def heads(self, x):
        B, L, D = x.shape
        return x.view(B, L, self.h, D // self.h).transpose(1, 2)        # (B, H, L, d_k)

    def forward(self, src, tgt, pad: int = 0):
        memory_mask = (src != pad)[:, None, None, :]                    # (B, 1, 1, S)
        T = tgt.size(1)
        causal = torch.ones(T, T, dtype=torch.bool).tril()             # (T, T)
        tgt_mask = causal[None, None] & (tgt != pad)[:, None, None, :]  # (B, 1, T, T)
        memory, y = self.embed(src), self.embed(tgt)                   # (B, S, D), (B, T, D)
        q, k, v = (self.heads(t) for t in self.self_qkv(y).chunk(3, dim=-1))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=memory_mask if self.swap else tgt_mask)  # [sdpa-self]
        y = y.transpose(1, 2).flatten(2)                                # (B, T, D)
        k, v = (self.heads(t) for t in self.cross_kv(memory).chunk(2, dim=-1))
        return F.scaled_dot_product_attention(self.heads(self.cross_q(y)), k, v, attn_mask=memory_mask)  # [sdpa-x]


def sdpa(B: int, S: int, T: int, swap: bool = False):
    def make():
        return SdpaDecoderLayer(swap).eval(), (torch.randint(1, 50, (B, S)), torch.randint(1, 50, (B, T)))
    return make


def annotated(B: int, S: int, T: int, swap: str = ""):
    def make():
        return AnnotatedEncoderDecoder(swap).eval(), (torch.randint(1, 50, (B, S)), torch.randint(1, 50, (B, T)))
    return make


def additive(B: int, S: int, T: int, causal_on_cross: bool = False):
    def make():
        return AdditiveCrossAttention(causal_on_cross).eval(), \
            (torch.randint(1, 50, (B, S)), torch.randint(1, 50, (B, T)))
    return make


MASK_LINES = ("enc-mask", "self-mask", "cross-mask", "fill")

CASES = [
    # -- correct: each attention gets the mask built for it ------------------------------------------------
    # the Annotated Transformer as published
    Case("annotated-masks", EQUAL, annotated(2, 6, 6), names=NAMES, silent=MASK_LINES),
    Case("annotated-masks-B-S-T-H-4", SQUARE, annotated(4, 4, 4), names=NAMES, silent=MASK_LINES),
    Case("annotated-masks-distinct", DISTINCT, annotated(2, 5, 7), names=NAMES, silent=MASK_LINES),
    # fairseq / OpenNMT: the source padding mask added on cross-attention
    Case("additive-padding-on-cross", EQUAL, additive(2, 6, 6), names=NAMES, silent=("pad-add",)),
    Case("additive-padding-on-cross-B-S-T-H-4", SQUARE, additive(4, 4, 4), names=NAMES, silent=("pad-add",)),
    # SDPA with a boolean attn_mask per attention
    Case("sdpa-masks", EQUAL, sdpa(2, 6, 6), names=NAMES, silent=("sdpa-self", "sdpa-x")),
    Case("sdpa-masks-B-S-T-H-4", SQUARE, sdpa(4, 4, 4), names=NAMES, silent=("sdpa-self", "sdpa-x")),
    # -- bugs: a mask built for another attention -----------------------------------------------------------
    # the source padding mask [B, 1, 1, S] on the decoder's self-attention scores [B, H, T, T]
    Case("annotated-source-mask-on-self-attention", EQUAL, annotated(2, 6, 6, "self"), names=NAMES,
         bug=("fill",)),
    Case("annotated-source-mask-on-self-attention-B-S-T-H-4", SQUARE, annotated(4, 4, 4, "self"), names=NAMES,
         bug=("fill",)),
    # the target mask [B, 1, T, T] on cross-attention scores [B, H, T, S]
    Case("annotated-target-mask-on-cross-attention", EQUAL, annotated(2, 6, 6, "cross"), names=NAMES,
         bug=("fill",)),
    Case("annotated-target-mask-on-cross-attention-B-S-T-H-4", SQUARE, annotated(4, 4, 4, "cross"), names=NAMES,
         bug=("fill",)),
    # a causal mask [T, T] built from the target's length, added to cross-attention scores [B, H, T, S]
    Case("future-mask-on-cross-attention", EQUAL, additive(2, 6, 6, True), names=NAMES, bug=("future-add",)),
    Case("future-mask-on-cross-attention-B-S-T-H-4", SQUARE, additive(4, 4, 4, True), names=NAMES,
         bug=("future-add",)),
    # the encoder's padding mask [B, 1, 1, S] as SDPA's attn_mask on the decoder's self-attention [B, H, T, T]
    Case("sdpa-source-mask-on-self-attention", EQUAL, sdpa(2, 6, 6, True), names=NAMES, bug=("sdpa-self",)),
    Case("sdpa-source-mask-on-self-attention-B-S-T-H-4", SQUARE, sdpa(4, 4, 4, True), names=NAMES,
         bug=("sdpa-self",)),
]

test_names, test_verdict = corpus_tests(__name__, CASES)


def test_names_from_sizes_alone_decide_nothing():
    """Without ``shapetrace.name``, S == T are told apart by sizes alone: no mask is called foreign (the
    ambiguity note says why the names are not proven)."""
    case = Case("unnamed", EQUAL, annotated(2, 6, 6, "self"))
    torch.manual_seed(0)
    model, inputs = case.build()
    with torch.no_grad(), shapetrace.trace(dims=case.dims) as t:
        model(*inputs)
    assert [d.kind for d in t.diagnostics if d.kind == "mask-wrong-axis"] == []
    assert "ambiguous-sizes" in [d.kind for d in t.diagnostics]


@pytest.mark.parametrize(("dims", "sizes"), [(EQUAL, (2, 6, 6)), (SQUARE, (4, 4, 4))], ids=["S=T", "B=S=T=H=4"])
def test_the_published_model_at_equal_lengths_named_from_sizes_has_no_error(dims, sizes):
    """The Annotated Transformer as published, traced with ``--dims`` alone at S == T: which sequence is
    T was decided by sizes (a guess), so its cross-attention ``query @ key.T`` (the decoder's tokens
    against the memory's) is never called ``query-key-swapped`` (it was, before: a false error)."""
    torch.manual_seed(0)
    model, inputs = Case("published", dims, annotated(*sizes)).build()
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        model(*inputs)
    assert [(d.kind, d.severity) for d in t.diagnostics] == [("ambiguous-sizes", "note")]


def test_the_finding_names_both_sequences_and_the_mask_to_use():
    """The wording, for the source mask on the decoder's self-attention and the future mask on
    cross-attention (a causal mask is offered for self-attention only)."""
    t = trace_case(Case("self", EQUAL, annotated(2, 6, 6, "self"), names=NAMES))
    (d,) = [d for d in t.diagnostics if d.kind == "mask-wrong-axis"]
    assert (d.severity, d.message, d.fix) == ("error", (
        f"masked_fill #{d.event} lines up the mask [B=2, 1, 1, S=6] with the scores [B=2, H=4, T=6, T=6]: the "
        "mask's key axis (-1) holds S tokens where the scores' keys are T, so the mask was built for another "
        "attention and lines up only because S and T have the same length here: it hides the wrong tokens."),
        "Give this attention a mask built from its own keys, the T tokens: a padding mask [B, 1, 1, T] or a "
        "causal mask [T, T].")
    t = trace_case(Case("future", EQUAL, additive(2, 6, 6, True), names=NAMES))
    (d,) = [d for d in t.diagnostics if d.kind == "mask-wrong-axis"]
    assert t.events[d.event].op == "add" and d.message.startswith(
        f"add #{d.event} lines up the mask [T=6, T=6] with the scores [B=2, H=4, T=6, S=6]: the mask's key axis "
        "(-1) holds T tokens where the scores' keys are S")
    assert d.fix == "Give this attention a mask built from its own keys, the S tokens: a padding mask [B, 1, 1, S] " \
                    "over the S keys."
