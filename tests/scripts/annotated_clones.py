"""An encoder in the style of the Annotated Transformer (harvardnlp/annotated-transformer): ``clones()``
deep-copies a layer N times and ``make_model`` deep-copies the attention with ``c = copy.deepcopy``, a
``tril`` buffer registered in a constructor, MultiHeadedAttention with view/transpose. Written for
tests/app/test_setup.py (issue 35: construction is not the forward pass)."""

import copy
import math

import torch
import torch.nn as nn


def clones(module, n):
    return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])


class MultiHeadedAttention(nn.Module):
    def __init__(self, h, d_model):
        super().__init__()
        self.d_k = d_model // h
        self.h = h
        self.linears = clones(nn.Linear(d_model, d_model), 4)

    def forward(self, query, key, value):
        nbatches = query.size(0)
        query, key, value = [lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)  # (B, H, T, d_k)
                             for lin, x in zip(self.linears, (query, key, value))]
        scores = query @ key.transpose(-2, -1) / math.sqrt(self.d_k)  # (B, H, T, T)
        x = scores.softmax(dim=-1) @ value  # (B, H, T, d_k)
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)  # (B, T, D)
        return self.linears[-1](x)


class Encoder(nn.Module):
    def __init__(self, layer, n):
        super().__init__()
        self.layers = clones(layer, n)
        self.register_buffer("mask", torch.tril(torch.ones(6, 6)))

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x, x, x)
        return x


c = copy.deepcopy
attn = MultiHeadedAttention(4, 32)
model = Encoder(c(attn), 2)
x = torch.randn(2, 6, 32)
y = model(x)
