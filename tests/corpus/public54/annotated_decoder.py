"""harvardnlp/annotated-transformer, the_annotated_transformer.py (``MultiHeadedAttention``, ``attention``,
``clones``, ``subsequent_mask``, ``Batch.make_std_mask``; the 2022 revision of the 2018 post): four linears made
by ``clones(nn.Linear(d_model, d_model), 4)``; ``lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)``
for q, k, v; ``attention()`` ``scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)``,
``scores.masked_fill(mask == 0, -1e9)``, softmax; ``mask.unsqueeze(1)`` (the same mask for every head); the
merge ``x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)``. A decoder layer's two
attentions: self-attention under ``tgt_mask = (tgt != pad).unsqueeze(-2) & subsequent_mask(T)`` ``[B, T, T]``,
then source attention over the memory under ``src_mask = (src != pad).unsqueeze(-2)`` ``[B, 1, S]``.

Bugs: ``subsequent-mask-not-inverted``: ``subsequent_mask`` returns ``torch.triu(ones, diagonal=1)`` itself, the
``== 0`` dropped (the ones are the future: each token keeps its future and loses itself and its past; the last
row is all hidden); ``std-mask-or``: ``make_std_mask`` joins the padding and the triangle with ``|`` instead of
``&`` (every real token is visible to every query, the future included)."""

import copy
import math
import sys

import torch
from torch import nn


def clones(module, N):
    return nn.ModuleList([copy.deepcopy(module) for _ in range(N)])


def subsequent_mask(size, bug=""):
    attn_shape = (1, size, size)
    upper = torch.triu(torch.ones(attn_shape), diagonal=1).type(torch.uint8)      # (1, T, T)
    if bug == "subsequent-mask-not-inverted":
        return upper
    return upper == 0


def make_std_mask(tgt, pad, bug=""):
    tgt_mask = (tgt != pad).unsqueeze(-2)                                            # (B, 1, T)
    if bug == "std-mask-or":
        return tgt_mask | subsequent_mask(tgt.size(-1), bug).type_as(tgt_mask.data)
    return tgt_mask & subsequent_mask(tgt.size(-1), bug).type_as(tgt_mask.data)    # (B, T, T)


def attention(query, key, value, mask=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)             # (B, h, T, S)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    return torch.matmul(p_attn, value), p_attn                                       # (B, h, T, d_k)


class MultiHeadedAttention(nn.Module):
    def __init__(self, h, d_model):
        super().__init__()
        assert d_model % h == 0
        self.d_k, self.h = d_model // h, h
        self.linears = clones(nn.Linear(d_model, d_model), 4)
        self.attn = None

    def forward(self, query, key, value, mask=None):
        if mask is not None:
            mask = mask.unsqueeze(1)                                                 # (B, 1, T|1, S)
        nbatches = query.size(0)
        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)              # (B, h, T, d_k)
            for lin, x in zip(self.linears, (query, key, value))
        ]
        x, self.attn = attention(query, key, value, mask=mask)
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)     # (B, T, d_model)
        del query, key, value
        return self.linears[-1](x)


class DecoderAttentions(nn.Module):
    """The two attentions of the Annotated Transformer's ``DecoderLayer`` (its sublayer connections kept)."""

    def __init__(self, d_model, h, pad=0, bug=""):
        super().__init__()
        self.self_attn, self.src_attn = MultiHeadedAttention(h, d_model), MultiHeadedAttention(h, d_model)
        self.norm = clones(nn.LayerNorm(d_model), 2)
        self.pad, self.bug = pad, bug

    def forward(self, x, memory, src, tgt):
        src_mask = (src != self.pad).unsqueeze(-2)                                   # (B, 1, S)
        tgt_mask = make_std_mask(tgt, self.pad, self.bug)                            # (B, T, T)
        y = self.norm[0](x)
        x = x + self.self_attn(y, y, y, tgt_mask)
        y = self.norm[1](x)
        return x + self.src_attn(y, memory, memory, src_mask)                        # (B, T, d_model)


BUGS = ("subsequent-mask-not-inverted", "std-mask-or")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 S=5",)
EQUAL = {"B=2 T=6 D=32 H=4 S=5": "B=4 T=4 D=32 H=4 S=4"}


def build(bug="", B=2, T=6, D=32, H=4, S=5):
    torch.manual_seed(0)
    src = torch.randint(1, 11, (B, S))
    src[1:, S - 2:] = 0                                                              # the later sources padded
    tgt = torch.randint(1, 11, (B, T))
    tgt[1:, T - 1:] = 0
    inputs = (torch.randn(B, T, D), torch.randn(B, S, D), src, tgt)
    return DecoderAttentions(D, H, bug=bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
