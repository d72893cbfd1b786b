"""keras-team/keras, keras/src/layers/attention/multi_head_attention.py (``MultiHeadAttention``,
``_build_attention_equation``, ``_build_proj_equation``; keras/src/layers/core/einsum_dense.py ``EinsumDense``),
v3.3, written in PyTorch the way Keras-to-PyTorch ports keep the layer's einsum equations: the projections are
``EinsumDense("abc,cde->abde", output_shape=(None, num_heads, key_dim))`` (a kernel ``[D, H, d_k]``: q, k, v
``[B, T, H, d_k]``); ``_compute_attention`` scales the query by ``1 / sqrt(key_dim)``, takes the scores by the
dot-product equation ``"aecd,abcd->acbe"`` applied to ``(key, query)`` (scores ``[B, H, T_q, T_k]``), a
``Softmax(axis=-1)`` with the padding mask (``attention_mask`` ``[B, T_q, T_k]``, here from
``use_causal_mask=True`` and a ``[B, T]`` padding mask: ``_compute_attention_mask`` ands the query mask
``[B, T, 1]``, the key mask ``[B, 1, T]`` and the causal lower triangle), expanded for the heads by
``expand_dims(mask, axis=-3)``; the combination ``"acbe,aecd->abcd"`` of ``(scores, value)`` and the output
``EinsumDense("abcd,cde->abe")`` over heads and features together.

Bug: ``combine-contracts-queries``: the combination equation hand-written ``"acbe,abcd->aecd"`` with the
scores' letters read the other way round: the weights, normalised over the keys, are summed over the queries
(each output row mixes the values by one key's column of weights). Twin: ``dot-operands-swapped``: the
dot-product equation applied to ``(query, key)`` (the order one reads from "q·k", not Keras's ``(key, query)``):
the scores come out ``[B, H, T_k, T_q]``, but with the combination contracting the same axis the layer is the
correct one with the query and key kernels' roles exchanged (q·k is symmetric): the same model, trained."""

import math
import sys

import torch
from torch import nn


class EinsumDense(nn.Module):
    def __init__(self, equation, kernel_shape, bias_shape):
        super().__init__()
        self.equation = equation
        self.kernel = nn.Parameter(torch.randn(*kernel_shape) / math.sqrt(kernel_shape[0]))
        self.bias = nn.Parameter(torch.zeros(*bias_shape))

    def forward(self, x):
        return torch.einsum(self.equation, x, self.kernel) + self.bias


class MultiHeadAttention(nn.Module):
    def __init__(self, num_heads, key_dim, model_dim, bug=""):
        super().__init__()
        self.bug = bug
        self._key_dim = key_dim
        self._query_dense = EinsumDense("abc,cde->abde", (model_dim, num_heads, key_dim), (num_heads, key_dim))
        self._key_dense = EinsumDense("abc,cde->abde", (model_dim, num_heads, key_dim), (num_heads, key_dim))
        self._value_dense = EinsumDense("abc,cde->abde", (model_dim, num_heads, key_dim), (num_heads, key_dim))
        self._output_dense = EinsumDense("abcd,cde->abe", (num_heads, key_dim, model_dim), (model_dim,))
        self._dot_product_equation = "aecd,abcd->acbe"
        self._combine_equation = "acbe,aecd->abcd"
        self._softmax = nn.Softmax(dim=-1)

    def _compute_attention_mask(self, query_mask, key_mask, length):
        mask = query_mask.unsqueeze(-1) & key_mask.unsqueeze(-2)              # (B, T, T)
        causal = torch.tril(torch.ones(1, length, length, dtype=torch.bool))  # (1, T, T)
        return mask & causal

    def _compute_attention(self, query, key, value, attention_mask):
        query = query * (1.0 / math.sqrt(float(self._key_dim)))
        if self.bug == "dot-operands-swapped":
            scores = torch.einsum(self._dot_product_equation, query, key)      # (B, H, T, T)
        else:
            scores = torch.einsum(self._dot_product_equation, key, query)      # (B, H, T, T)
        mask = attention_mask.unsqueeze(-3)                                   # (B, 1, T, T)
        scores = scores.masked_fill(~mask, -1e9)
        scores = self._softmax(scores)
        if self.bug == "combine-contracts-queries":
            return torch.einsum("acbe,abcd->aecd", scores, value), scores    # (B, T, H, d_k) [wrong]
        return torch.einsum(self._combine_equation, scores, value), scores    # (B, T, H, d_k)

    def forward(self, query, value, padding_mask):
        key = value
        attention_mask = self._compute_attention_mask(padding_mask, padding_mask, query.shape[1])
        query = self._query_dense(query)                                      # (B, T, H, d_k)
        key = self._key_dense(key)                                            # (B, T, H, d_k)
        value = self._value_dense(value)                                      # (B, T, H, d_k)
        attention_output, _ = self._compute_attention(query, key, value, attention_mask)
        return self._output_dense(attention_output)                           # (B, T, D)


class SelfAttentionBlock(nn.Module):
    def __init__(self, d_model, heads, bug=""):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.mha = MultiHeadAttention(heads, d_model // heads, d_model, bug)

    def forward(self, x, lengths):
        padding_mask = torch.arange(x.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)   # (B, T)
        y = self.norm(x)
        return x + self.mha(y, y, padding_mask)


BUGS = ("combine-contracts-queries",)
TWINS = ("dot-operands-swapped",)
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    model = SelfAttentionBlock(D, H, bug).eval()
    lengths = torch.tensor([T - (i % 2) for i in range(B)])
    return model, (torch.randn(B, T, D), lengths)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
