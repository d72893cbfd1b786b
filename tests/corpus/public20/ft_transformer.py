"""yandex-research/rtdl, rtdl/modules.py (``NumericalFeatureTokenizer``, ``CLSToken``, ``MultiheadAttention``,
``Transformer``, rtdl 0.0.13): numerical features ``x_num`` ``(B, F)`` become tokens ``weight[None] *
x_num[..., None] + bias[None]`` with per-feature tables ``weight, bias`` ``(F, D)``; a CLS token appended
*last* (``torch.cat([x, cls.expand(B, 1, D)], dim=1)``); ``MultiheadAttention``: ``W_q, W_k, W_v``,
``_reshape``: ``x.reshape(B, T, H, d).transpose(1, 2).reshape(B * H, T, d)``; ``attention = softmax(q @
k.transpose(1, 2) / sqrt(d), dim=-1)``; ``x = attention @ v``, back ``reshape(B, H, T, d).transpose(1,
2).reshape(B, T, D)``; ``W_out``; the head reads the CLS token ``x[:, -1]``.

Bugs (argument): ``heads-without-transpose``: ``_reshape`` as ``x.reshape(B * H, T, d)`` (the heads cut out of
the token axis: the FuxiCTR issue #30 slip); ``cls-readout-first``: the head reads ``x[:, 0]`` (the first
feature's token) where rtdl appends the CLS token last (a natural slip from BERT's CLS-first layout)."""

import math
import sys

import torch
from torch import nn


class NumericalFeatureTokenizer(nn.Module):
    def __init__(self, n_features, d_token):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_features, d_token) * 0.1)
        self.bias = nn.Parameter(torch.randn(n_features, d_token) * 0.1)

    def forward(self, x):                                                          # (B, F)
        return self.weight[None] * x[..., None] + self.bias[None]                  # (B, F, D)


class MultiheadAttention(nn.Module):
    def __init__(self, d_token, n_heads, bug=""):
        super().__init__()
        self.n_heads, self.bug = n_heads, bug
        self.W_q, self.W_k, self.W_v = (nn.Linear(d_token, d_token) for _ in range(3))
        self.W_out = nn.Linear(d_token, d_token)

    def _reshape(self, x):
        B, T, D = x.shape
        d = D // self.n_heads
        if self.bug == "heads-without-transpose":
            return x.reshape(B * self.n_heads, T, d)
        return x.reshape(B, T, self.n_heads, d).transpose(1, 2).reshape(B * self.n_heads, T, d)

    def forward(self, x_q, x_kv):                                                  # (B, T, D)
        q, k, v = self.W_q(x_q), self.W_k(x_kv), self.W_v(x_kv)
        B, T, D = q.shape
        d = D // self.n_heads
        q, k, v = self._reshape(q), self._reshape(k), self._reshape(v)             # (B*H, T, d)
        attention = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(d), dim=-1)
        x = attention @ v
        x = x.reshape(B, self.n_heads, T, d).transpose(1, 2).reshape(B, T, D)
        return self.W_out(x)


class FTTransformer(nn.Module):
    def __init__(self, n_features, d_token, n_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.tokenizer = NumericalFeatureTokenizer(n_features, d_token)
        self.cls = nn.Parameter(torch.randn(d_token) * 0.1)
        self.norm = nn.LayerNorm(d_token)
        self.attention = MultiheadAttention(d_token, n_heads, bug)
        self.head = nn.Linear(d_token, 1)

    def forward(self, x_num):                                                      # (B, F)
        x = self.tokenizer(x_num)
        x = torch.cat([x, self.cls.view(1, 1, -1).expand(len(x), 1, -1)], dim=1)   # (B, F+1, D)
        h = self.norm(x)
        x = x + self.attention(h, h)
        cls = x[:, 0] if self.bug == "cls-readout-first" else x[:, -1]
        return self.head(cls)


BUGS = ("heads-without-transpose", "cls-readout-first")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return FTTransformer(T, D, H, bug).eval(), (torch.randn(B, T),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
