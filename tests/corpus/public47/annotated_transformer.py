"""harvardnlp/annotated-transformer, the_annotated_transformer.py (``MultiHeadedAttention``, ``attention``,
``subsequent_mask``, ``Batch.make_std_mask``, master of 2022): the course code of "The Annotated Transformer".
Four ``nn.Linear(d_model, d_model)`` (``clones``); q, k and v each ``lin(x).view(nbatches, -1, self.h,
self.d_k).transpose(1, 2)``; ``scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)``,
``masked_fill(mask == 0, -1e9)``, ``scores.softmax(dim=-1)``, ``torch.matmul(p_attn, value)``; the heads
merged by ``x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)`` and the last linear. The
decoder's target mask ``(tgt != pad).unsqueeze(-2) & subsequent_mask(tgt.size(-1))`` (``[B, 1, T] & [1, T,
T]``) is widened for the heads by ``mask.unsqueeze(1)``.

Bugs (natural slips of a from-scratch port): ``split-without-transpose``: the query heads cut by
``view(nbatches, self.h, -1, self.d_k)`` (no transpose: each "head" is a run of tokens' features, the FuxiCTR
issue #30 slip), keys and values cut right; ``merge-without-transpose``: the heads merged by
``x.contiguous().view(nbatches, -1, self.h * self.d_k)`` with the ``transpose(1, 2)`` left out (heads and tokens
mixed in the merged rows)."""

import math
import sys

import torch
from torch import nn


def subsequent_mask(size):
    attn_shape = (1, size, size)
    upper = torch.triu(torch.ones(attn_shape), diagonal=1).type(torch.uint8)
    return upper == 0                                                       # (1, T, T)


def make_std_mask(tgt, pad):
    tgt_mask = (tgt != pad).unsqueeze(-2)                                   # (B, 1, T)
    return tgt_mask & subsequent_mask(tgt.size(-1))                         # (B, T, T)


def attention(query, key, value, mask=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)   # (B, H, T, T)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    return torch.matmul(p_attn, value), p_attn                              # (B, H, T, d_k)


class MultiHeadedAttention(nn.Module):
    def __init__(self, h, d_model, bug=""):
        super().__init__()
        self.bug = bug
        self.d_k = d_model // h
        self.h = h
        self.linears = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(4)])

    def forward(self, query, key, value, mask=None):
        if mask is not None:
            mask = mask.unsqueeze(1)                                        # (B, 1, T, T)
        nbatches = query.size(0)
        query, key, value = [lin(x) for lin, x in zip(self.linears, (query, key, value))]
        if self.bug == "split-without-transpose":
            query = query.view(nbatches, self.h, -1, self.d_k)              # (B, H, T, d_k) [wrong]
        else:
            query = query.view(nbatches, -1, self.h, self.d_k).transpose(1, 2)  # (B, H, T, d_k)
        key = key.view(nbatches, -1, self.h, self.d_k).transpose(1, 2)      # (B, H, T, d_k)
        value = value.view(nbatches, -1, self.h, self.d_k).transpose(1, 2)  # (B, H, T, d_k)
        x, self.attn = attention(query, key, value, mask=mask)
        if self.bug == "merge-without-transpose":
            x = x.contiguous().view(nbatches, -1, self.h * self.d_k)        # (B, T, D) [wrong]
        else:
            x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)  # (B, T, D)
        return self.linears[-1](x)


class DecoderSelfAttention(nn.Module):
    def __init__(self, d_model, h, bug=""):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.self_attn = MultiHeadedAttention(h, d_model, bug)

    def forward(self, x, tgt):
        tgt_mask = make_std_mask(tgt, pad=0)                                # (B, T, T)
        y = self.norm(x)
        return x + self.self_attn(y, y, y, tgt_mask)


BUGS = ("split-without-transpose", "merge-without-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    model = DecoderSelfAttention(D, H, bug).eval()
    tgt = torch.randint(1, 9, (B, T))
    tgt[0, -1] = 0
    return model, (torch.randn(B, T, D), tgt)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
