"""d2l-ai/d2l-en, d2l/torch.py (``MultiHeadAttention``, ``DotProductAttention``, ``masked_softmax``,
``sequence_mask``, ``transpose_qkv``, ``transpose_output``; chapter 11.5 "Multi-Head Attention", 2023): the heads
folded into the batch, ``transpose_qkv`` ``X.reshape(X.shape[0], X.shape[1], num_heads, -1)``,
``X.permute(0, 2, 1, 3)``, ``X.reshape(-1, X.shape[2], X.shape[3])`` (``(B*H)`` batch-major); scores by
``torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)``; ``valid_lens`` per sequence ``repeat_interleave``d
over the heads (``torch.repeat_interleave(valid_lens, repeats=self.num_heads, dim=0)``), then over the queries in
``masked_softmax``, and turned into a ``-1e6`` fill by ``sequence_mask`` on the scores viewed ``(-1, S)``;
``transpose_output`` undoes the fold; ``W_o``. Queries ``[B, T, D]`` over keys and values ``[B, S, D]``, as in the
chapter's example (``queries`` of 4 tokens over 6 key-value pairs, ``valid_lens = [3, 2]``).

Bugs: ``transpose-qkv-heads-outer``: ``transpose_qkv`` permuted ``X.permute(2, 0, 1, 3)`` before the fold (the
heads outer: ``(H*B)``, head-major, while ``valid_lens`` is repeated batch-major and ``transpose_output`` unfolds
``reshape(-1, num_heads, ...)``: the lengths and the merged heads fall on other sequences);
``sequence-mask-inclusive``: ``sequence_mask`` compares ``arange(maxlen)[None, :] <= valid_len[:, None]`` (one
padding key past each length stays visible)."""

import math
import sys

import torch
from torch import nn


def sequence_mask(X, valid_len, value=0, bug=""):
    maxlen = X.size(1)
    if bug == "sequence-mask-inclusive":
        mask = torch.arange(maxlen, dtype=torch.float32)[None, :] <= valid_len[:, None]
    else:
        mask = torch.arange(maxlen, dtype=torch.float32)[None, :] < valid_len[:, None]   # (B*H*T, S)
    X[~mask] = value
    return X


def masked_softmax(X, valid_lens, bug=""):
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    shape = X.shape                                                                  # (B*H, T, S)
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])                   # (B*H*T,)
    else:
        valid_lens = valid_lens.reshape(-1)
    X = sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6, bug=bug)     # (B*H*T, S)
    return nn.functional.softmax(X.reshape(shape), dim=-1)


class DotProductAttention(nn.Module):
    def __init__(self, dropout, bug=""):
        super().__init__()
        self.dropout, self.bug = nn.Dropout(dropout), bug

    def forward(self, queries, keys, values, valid_lens=None):
        d = queries.shape[-1]
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)             # (B*H, T, S)
        self.attention_weights = masked_softmax(scores, valid_lens, self.bug)
        return torch.bmm(self.dropout(self.attention_weights), values)               # (B*H, T, d)


class MultiHeadAttention(nn.Module):
    def __init__(self, num_hiddens, num_heads, dropout=0.0, bias=False, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        self.attention = DotProductAttention(dropout, bug)
        self.W_q = nn.LazyLinear(num_hiddens, bias=bias)
        self.W_k = nn.LazyLinear(num_hiddens, bias=bias)
        self.W_v = nn.LazyLinear(num_hiddens, bias=bias)
        self.W_o = nn.LazyLinear(num_hiddens, bias=bias)

    def transpose_qkv(self, X):
        X = X.reshape(X.shape[0], X.shape[1], self.num_heads, -1)                    # (B, T, H, d)
        if self.bug == "transpose-qkv-heads-outer":
            X = X.permute(2, 0, 1, 3)                                                # (H, B, T, d)
        else:
            X = X.permute(0, 2, 1, 3)                                                # (B, H, T, d)
        return X.reshape(-1, X.shape[2], X.shape[3])                                 # (B*H, T, d)

    def transpose_output(self, X):
        X = X.reshape(-1, self.num_heads, X.shape[1], X.shape[2])                    # (B, H, T, d)
        X = X.permute(0, 2, 1, 3)                                                    # (B, T, H, d)
        return X.reshape(X.shape[0], X.shape[1], -1)                                 # (B, T, D)

    def forward(self, queries, keys, values, valid_lens):
        queries = self.transpose_qkv(self.W_q(queries))                              # (B*H, T, d)
        keys = self.transpose_qkv(self.W_k(keys))                                    # (B*H, S, d)
        values = self.transpose_qkv(self.W_v(values))                                # (B*H, S, d)
        if valid_lens is not None:
            valid_lens = torch.repeat_interleave(valid_lens, repeats=self.num_heads, dim=0)   # (B*H,)
        output = self.attention(queries, keys, values, valid_lens)                   # (B*H, T, d)
        output_concat = self.transpose_output(output)                                # (B, T, D)
        return self.W_o(output_concat)


BUGS = ("transpose-qkv-heads-outer", "sequence-mask-inclusive")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 S=5",)
EQUAL = {"B=2 T=6 D=32 H=4 S=5": "B=4 T=4 D=32 H=4 S=4"}


def build(bug="", B=2, T=6, D=32, H=4, S=5):
    torch.manual_seed(0)
    model = MultiHeadAttention(D, H, bug=bug)
    X, Y = torch.randn(B, T, D), torch.randn(B, S, D)
    with torch.no_grad():
        model(X, Y, Y, None)                                                         # the lazy linears sized
    valid_lens = torch.tensor([S - 2 * (b % 2) for b in range(B)])                   # every other sequence padded
    return model.eval(), (X, Y, Y, valid_lens)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
