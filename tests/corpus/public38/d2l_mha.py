"""d2l-ai/d2l-en, d2l/torch.py (v1.0.3, ``MultiHeadAttention``, ``DotProductAttention``, ``masked_softmax``,
``sequence_mask``, ``transpose_qkv``, ``transpose_output``; chapter 11.5 "Multi-Head Attention"): the textbook's
heads folded into the batch: ``transpose_qkv`` ``reshape(B, T, H, -1).permute(0, 2, 1, 3).reshape(-1, T, d)``,
``torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)``, the padding as ``valid_lens`` per sequence,
``repeat_interleave``d over the heads (``(B*H)`` is batch-major) and turned into a ``-1e6`` fill by
``sequence_mask`` on the scores reshaped to ``(-1, T_k)``; ``transpose_output`` undoes the fold; ``W_o``.

Bugs: ``transpose-output-without-permute``: ``transpose_output`` written as ``X.reshape(-1, H, T, d)
.reshape(B, T, -1)`` (the permute back forgotten: heads and tokens mixed, the slip d2l's forum reports from
readers porting the chapter); ``valid-lens-repeat``:
``valid_lens.repeat(H)`` instead of ``repeat_interleave(valid_lens, repeats=H, dim=0)`` (the lengths tiled
head-major while ``(B*H)`` is batch-major: the question asked under the chapter's discussion)."""

import math
import sys

import torch
from torch import nn


def sequence_mask(X, valid_len, value=0):
    maxlen = X.size(1)
    mask = torch.arange(maxlen, dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
    return nn.functional.softmax(X.reshape(shape), dim=-1)


class DotProductAttention(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        d = queries.shape[-1]
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)


class MultiHeadAttention(nn.Module):
    def __init__(self, num_hiddens, num_heads, dropout=0.0, bias=False, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        self.attention = DotProductAttention(dropout)
        self.W_q = nn.LazyLinear(num_hiddens, bias=bias)
        self.W_k = nn.LazyLinear(num_hiddens, bias=bias)
        self.W_v = nn.LazyLinear(num_hiddens, bias=bias)
        self.W_o = nn.LazyLinear(num_hiddens, bias=bias)

    def forward(self, queries, keys, values, valid_lens):
        queries = self.transpose_qkv(self.W_q(queries))
        keys = self.transpose_qkv(self.W_k(keys))
        values = self.transpose_qkv(self.W_v(values))
        if valid_lens is not None:
            if self.bug == "valid-lens-repeat":
                valid_lens = valid_lens.repeat(self.num_heads)
            else:
                valid_lens = torch.repeat_interleave(valid_lens, repeats=self.num_heads, dim=0)
        output = self.attention(queries, keys, values, valid_lens)
        output_concat = self.transpose_output(output)
        return self.W_o(output_concat)

    def transpose_qkv(self, X):
        X = X.reshape(X.shape[0], X.shape[1], self.num_heads, -1)
        X = X.permute(0, 2, 1, 3)
        return X.reshape(-1, X.shape[2], X.shape[3])

    def transpose_output(self, X):
        X = X.reshape(-1, self.num_heads, X.shape[1], X.shape[2])
        if self.bug == "transpose-output-without-permute":
            return X.reshape(X.shape[0], X.shape[2], -1)
        X = X.permute(0, 2, 1, 3)
        return X.reshape(X.shape[0], X.shape[1], -1)


class Encoder(nn.Module):
    """Self-attention over the padded batch, the chapter's usage (``attention(X, X, X, valid_lens)``)."""

    def __init__(self, num_hiddens, num_heads, bug=""):
        super().__init__()
        self.attention = MultiHeadAttention(num_hiddens, num_heads, bug=bug)
        self.ln = nn.LayerNorm(num_hiddens)

    def forward(self, X, valid_lens):
        return self.ln(X + self.attention(X, X, X, valid_lens))


BUGS = ("transpose-output-without-permute", "valid-lens-repeat")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    model = Encoder(D, H, bug).eval()
    X = torch.randn(B, T, D)
    valid_lens = torch.tensor([T - 2 * (i % 2) for i in range(B)])
    with torch.no_grad():
        model(X, valid_lens)   # (materialise the lazy layers outside the trace)
    return model, (X, valid_lens)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
