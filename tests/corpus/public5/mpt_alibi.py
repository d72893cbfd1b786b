"""mosaicml/llm-foundry, llmfoundry/models/layers/attention.py (``gen_slopes``, ``build_alibi_bias``,
``scaled_multihead_dot_product_attention``) with MPT's fused ``Wqkv`` and einops: the bias is
``arange(1 - S, 1).view(1, 1, 1, S)`` times the slopes ``view(1, H, 1, 1)`` (``[1, H, 1, S]``: a penalty
growing with the key's distance from the last position), added to the scores with a causal mask.

Bugs (argument): ``alibi-sign``: the bidirectional branch's ``alibi_bias.abs().mul(-1)`` written
``abs()`` alone: the penalty turns into a reward for distance, far keys favoured (the
reversed-direction class of Bloom's ALiBi, https://github.com/huggingface/transformers/pull/19834);
``alibi-queries``: the bias laid along the queries, ``view(1, 1, S, 1)``: constant along the keys,
softmax ignores it (ALiBi silently off)."""

import math
import sys

import torch
from einops import rearrange
from torch import nn


def gen_slopes(n_heads, alibi_bias_max=8):
    _n_heads = 2 ** math.ceil(math.log2(n_heads))
    m = torch.arange(1, _n_heads + 1, dtype=torch.float32)
    m = m.mul(alibi_bias_max / _n_heads)
    slopes = 1.0 / torch.pow(2, m)
    if _n_heads != n_heads:
        slopes = torch.concat([slopes[1::2], slopes[::2]])[:n_heads]
    return slopes.view(1, n_heads, 1, 1)  # (1, H, 1, 1)


def build_alibi_bias(n_heads, seq_len, bug=""):
    if bug == "alibi-sign":
        alibi_bias = torch.arange(1 - seq_len, 1, dtype=torch.int32).view(1, 1, 1, seq_len).abs()  # bug: no .mul(-1)
    elif bug == "alibi-queries":
        alibi_bias = torch.arange(1 - seq_len, 1, dtype=torch.int32).view(1, 1, seq_len, 1)  # bug: along i
    else:
        alibi_bias = torch.arange(1 - seq_len, 1, dtype=torch.int32).view(1, 1, 1, seq_len)  # (1, 1, 1, S)
    return alibi_bias * gen_slopes(n_heads)  # (1, H, 1, S)


class MPTAttention(nn.Module):
    def __init__(self, d_model=32, n_heads=4, bug=""):
        super().__init__()
        self.n_heads, self.bug = n_heads, bug
        self.Wqkv = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        qkv = self.Wqkv(x)  # (B, T, 3*D)
        query, key, value = qkv.chunk(3, dim=2)  # (B, T, D) each
        q = rearrange(query, "b s (h d) -> b h s d", h=self.n_heads)
        k = rearrange(key, "b s (h d) -> b h d s", h=self.n_heads)
        v = rearrange(value, "b s (h d) -> b h s d", h=self.n_heads)
        softmax_scale = 1 / math.sqrt(q.size(-1))
        attn_weight = q.matmul(k) * softmax_scale  # (B, H, T, S)
        s_q, s_k = attn_weight.size(-2), attn_weight.size(-1)
        attn_weight = attn_weight + build_alibi_bias(self.n_heads, s_k, self.bug)
        causal_mask = torch.ones(s_q, s_k, dtype=torch.bool).tril().logical_not()  # (T, S): keys after
        attn_weight = attn_weight.masked_fill(causal_mask.view(1, 1, s_q, s_k), torch.finfo(q.dtype).min)
        attn_weight = torch.softmax(attn_weight, dim=-1)
        out = attn_weight.matmul(v)  # (B, H, T, d)
        out = rearrange(out, "b h s d -> b s (h d)")
        return self.out_proj(out)


def build(bug="", B=2, T=6, D=32, H=4):
    """--dims B=2,T=6,D=32,H=4."""
    torch.manual_seed(0)
    return MPTAttention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
