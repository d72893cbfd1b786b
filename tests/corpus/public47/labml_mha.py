"""labmlai/annotated_deep_learning_paper_implementations, labml_nn/transformers/mha.py
(``PrepareForMultiHeadAttention``, ``MultiHeadAttention``) with labml_nn/transformers/utils.py
(``subsequent_mask``), master (2023): sequence-first throughout, ``x`` is ``[seq_len, batch_size, d_model]``.
``PrepareForMultiHeadAttention`` keeps the leading axes (``head_shape = x.shape[:-1]``) and cuts the features
``x.view(*head_shape, self.heads, self.d_k)``; ``get_scores`` is ``torch.einsum('ibhd,jbhd->ijbh', query, key)``
(scores ``[seq_len_q, seq_len_k, batch, heads]``); ``prepare_mask`` takes a mask ``[seq_len_q, seq_len_k,
batch]`` (here the causal ``subsequent_mask``, ``[T, T, 1]``) and adds the heads by ``mask.unsqueeze(-1)``;
``scores *= self.scale``, ``masked_fill(mask == 0, float('-inf'))``, ``self.softmax = nn.Softmax(dim=1)`` (the
key axis is axis 1 in this layout), ``torch.einsum("ijbh,jbhd->ibhd", attn, value)``, ``x.reshape(seq_len,
batch_size, -1)`` and ``self.output``.

Bug: ``softmax-last-axis``: ``nn.Softmax(dim=-1)`` (the habit of batch-first code, where the keys are last): in
``ijbh`` the last axis is the heads, so each (query, key) pair's weights sum to 1 over the heads."""

import math
import sys

import torch
from torch import nn


def subsequent_mask(seq_len):
    mask = torch.tril(torch.ones(seq_len, seq_len)).to(torch.bool).unsqueeze(-1)  # (T, T, 1)
    return mask


class PrepareForMultiHeadAttention(nn.Module):
    def __init__(self, d_model, heads, d_k, bias):
        super().__init__()
        self.linear = nn.Linear(d_model, heads * d_k, bias=bias)
        self.heads = heads
        self.d_k = d_k

    def forward(self, x):
        head_shape = x.shape[:-1]
        x = self.linear(x)
        return x.view(*head_shape, self.heads, self.d_k)                    # (T, B, H, d_k)


class MultiHeadAttention(nn.Module):
    def __init__(self, heads, d_model, bias=True, bug=""):
        super().__init__()
        self.d_k = d_model // heads
        self.heads = heads
        self.query = PrepareForMultiHeadAttention(d_model, heads, self.d_k, bias=bias)
        self.key = PrepareForMultiHeadAttention(d_model, heads, self.d_k, bias=bias)
        self.value = PrepareForMultiHeadAttention(d_model, heads, self.d_k, bias=True)
        self.softmax = nn.Softmax(dim=-1 if bug == "softmax-last-axis" else 1)
        self.output = nn.Linear(d_model, d_model)
        self.scale = 1 / math.sqrt(self.d_k)

    def get_scores(self, query, key):
        return torch.einsum("ibhd,jbhd->ijbh", query, key)                 # (T, T, B, H)

    def prepare_mask(self, mask, query_shape, key_shape):
        assert mask.shape[0] == 1 or mask.shape[0] == query_shape[0]
        assert mask.shape[1] == key_shape[0]
        assert mask.shape[2] == 1 or mask.shape[2] == query_shape[1]
        return mask.unsqueeze(-1)                                           # (T, T, B, 1)

    def forward(self, *, query, key, value, mask=None):
        seq_len, batch_size, _ = query.shape
        if mask is not None:
            mask = self.prepare_mask(mask, query.shape, key.shape)
        query = self.query(query)
        key = self.key(key)
        value = self.value(value)
        scores = self.get_scores(query, key)
        scores = scores * self.scale
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float("-inf"))
        attn = self.softmax(scores)
        x = torch.einsum("ijbh,jbhd->ibhd", attn, value)                   # (T, B, H, d_k)
        x = x.reshape(seq_len, batch_size, -1)                              # (T, B, D)
        return self.output(x)


class TransformerLayer(nn.Module):
    def __init__(self, d_model, heads, bug=""):
        super().__init__()
        self.norm_self_attn = nn.LayerNorm([d_model])
        self.self_attn = MultiHeadAttention(heads, d_model, bug=bug)

    def forward(self, x):
        mask = subsequent_mask(x.shape[0])
        z = self.norm_self_attn(x)
        return x + self.self_attn(query=z, key=z, value=z, mask=mask)


BUGS = ("softmax-last-axis",)
TWINS = ()
DIMS = ("T=6 B=2 D=32 H=4",)


def build(bug="", T=6, B=2, D=32, H=4):
    torch.manual_seed(0)
    model = TransformerLayer(D, H, bug).eval()
    return model, (torch.randn(T, B, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
