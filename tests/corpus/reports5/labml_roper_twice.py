"""labmlai/annotated_deep_learning_paper_implementations issue #251 ("Question about value_pe"; vpj: "Thanks. It's
a bug", fixed in 09d0937): ``labml_nn/transformers/rope/value_pe`` (RoPER: rotary embeddings on the values
too, the weighted sum rotated back by the query's position, so each value contributes by its relative
position) rotated the values twice: ``value = self.value_rotary_pe(value)``, then
``einsum("ijbh,jbhd->ibhd", attn, self.value_rotary_pe(value))``. After the reverse rotation a value at
place j carried the angle of 2j − i instead of j − i. The fix rotates the values once.

labml's idiom: sequence-first ``[seq_len, batch_size, heads, d_k]`` heads from ``PrepareForMultiHeadAttention``
(a Linear viewed ``(*head_shape, heads, d_k)``), ``RotaryPositionalEmbeddings(d)`` rotating the first
``d = rope_percentage·d_k`` features (``x[..., :d]``, ``torch.cat([-x[..., d/2:], x[..., :d/2]])``,
``cos_cached[:x.shape[0]]`` of ``[seq, 1, 1, d]``), scores ``einsum("ibhd,jbhd->ijbh")``, a causal mask
``[seq_q, seq_k, 1]``, ``softmax(dim=1)`` over the keys, the reverse rotation ``x·cos − neg_half(x)·sin``,
``reshape(seq_len, batch_size, -1)``, ``output`` Linear.

Bug (argument): ``values-rotated-twice``."""

import math
import sys

import torch
from torch import nn

BUGS = ("values-rotated-twice",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class RotaryPositionalEmbeddings(nn.Module):
    def __init__(self, d, base=10_000):
        super().__init__()
        self.base, self.d = base, d

    def _build_cache(self, x):
        seq_len = x.shape[0]
        theta = 1.0 / (self.base ** (torch.arange(0, self.d, 2).float() / self.d))
        seq_idx = torch.arange(seq_len).float()
        idx_theta = torch.einsum("n,d->nd", seq_idx, theta)                  # [seq, d/2]
        idx_theta2 = torch.cat([idx_theta, idx_theta], dim=1)                 # [seq, d]
        self.cos_cached = idx_theta2.cos()[:, None, None, :]                  # [seq, 1, 1, d]
        self.sin_cached = idx_theta2.sin()[:, None, None, :]

    def _neg_half(self, x):
        d_2 = self.d // 2
        return torch.cat([-x[:, :, :, d_2:], x[:, :, :, :d_2]], dim=-1)

    def forward(self, x):
        self._build_cache(x)
        x_rope, x_pass = x[..., : self.d], x[..., self.d:]
        neg_half_x = self._neg_half(x_rope)
        x_rope = (x_rope * self.cos_cached[: x.shape[0]]) + (neg_half_x * self.sin_cached[: x.shape[0]])
        return torch.cat((x_rope, x_pass), dim=-1)


class ReverseRotaryPositionalEmbeddings(RotaryPositionalEmbeddings):
    def forward(self, x):
        self._build_cache(x)
        x_rope, x_pass = x[..., : self.d], x[..., self.d:]
        neg_half_x = self._neg_half(x_rope)
        x_rope = (x_rope * self.cos_cached[: x.shape[0]]) - (neg_half_x * self.sin_cached[: x.shape[0]])
        return torch.cat((x_rope, x_pass), dim=-1)


class PrepareForMultiHeadAttention(nn.Module):
    def __init__(self, d_model, heads, d_k):
        super().__init__()
        self.linear = nn.Linear(d_model, heads * d_k)
        self.heads, self.d_k = heads, d_k

    def forward(self, x):
        head_shape = x.shape[:-1]
        return self.linear(x).view(*head_shape, self.heads, self.d_k)        # [seq, batch, heads, d_k]


class RotaryValuePEMultiHeadAttention(nn.Module):
    def __init__(self, d_model, heads, rope_percentage=0.5, bug=""):
        super().__init__()
        self.d_k, self.heads, self.bug = d_model // heads, heads, bug
        self.query = PrepareForMultiHeadAttention(d_model, heads, self.d_k)
        self.key = PrepareForMultiHeadAttention(d_model, heads, self.d_k)
        self.value = PrepareForMultiHeadAttention(d_model, heads, self.d_k)
        self.output = nn.Linear(d_model, d_model)
        self.scale = 1 / math.sqrt(self.d_k)
        d_rope = int(self.d_k * rope_percentage)
        self.query_rotary_pe = RotaryPositionalEmbeddings(d_rope)
        self.key_rotary_pe = RotaryPositionalEmbeddings(d_rope)
        self.value_rotary_pe = RotaryPositionalEmbeddings(d_rope)
        self.value_reverse_rotary_pe = ReverseRotaryPositionalEmbeddings(d_rope)

    def forward(self, x, mask):
        seq_len, batch_size, _ = x.shape
        query, key, value = self.query(x), self.key(x), self.value(x)      # [seq, batch, heads, d_k]
        scores = torch.einsum("ibhd,jbhd->ijbh", self.query_rotary_pe(query), self.key_rotary_pe(key))
        scores = scores * self.scale                                        # [seq_q, seq_k, batch, heads]
        scores = scores.masked_fill(mask.unsqueeze(-1) == 0, float("-inf"))
        attn = torch.softmax(scores, dim=1)
        if self.bug == "values-rotated-twice":
            value = self.value_rotary_pe(value)                             # [rope-v]
        x = torch.einsum("ijbh,jbhd->ibhd", attn, self.value_rotary_pe(value))   # [seq, batch, heads, d_k]
        x = self.value_reverse_rotary_pe(x)
        return self.output(x.reshape(seq_len, batch_size, -1))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool)).unsqueeze(-1)    # [seq_q, seq_k, 1]
    return RotaryValuePEMultiHeadAttention(D, H, bug=bug).eval(), (torch.randn(T, B, D), mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
