"""google/flax, flax/linen/attention.py (``MultiHeadDotProductAttention``, ``dot_product_attention_weights``,
``dot_product_attention``, ``make_attention_mask``, ``make_causal_mask``, ``combine_masks``) and
flax/linen/linear.py (``DenseGeneral``), v0.8.5, written in PyTorch the way JAX-to-PyTorch ports keep Flax's
einsums: q, k, v by ``DenseGeneral(features=(num_heads, head_dim))`` (``einsum('...d,dhk->...hk')``, a kernel
``[D, H, head_dim]``); ``query = query / jnp.sqrt(depth)``; ``attn_weights =
jnp.einsum('...qhd,...khd->...hqk', query, key)``; the mask ``combine_masks(make_attention_mask(valid, valid),
make_causal_mask(valid))`` (``make_attention_mask(query_input, key_input)`` is ``pairwise_fn(
expand_dims(query_input, -1), expand_dims(key_input, -2))`` with ``expand_dims(..., -3)``: ``[B, 1, T_q, T_k]``)
applied by ``jnp.where(mask, attn_weights, big_neg)``; ``jax.nn.softmax`` over the last axis;
``jnp.einsum('...hqk,...khd->...qhd', attn_weights, value)``; the output ``DenseGeneral(features=D, axis=(-2,
-1))`` (``einsum('...hk,hkd->...d')``).

Bug: ``causal-less-equal``: the causal mask made ``make_attention_mask(idxs, idxs, jnp.less_equal)`` (the
pairwise function read as "key <= query" with the arguments in Flax's query-first order): each query sees
itself and the keys AFTER it (an anti-causal mask), a slip that runs at every size."""

import math
import sys

import torch
from torch import nn


class DenseGeneral(nn.Module):
    def __init__(self, equation, kernel_shape, bias_shape):
        super().__init__()
        self.equation = equation
        self.kernel = nn.Parameter(torch.randn(*kernel_shape) / math.sqrt(kernel_shape[0]))
        self.bias = nn.Parameter(torch.zeros(*bias_shape))

    def forward(self, x):
        return torch.einsum(self.equation, x, self.kernel) + self.bias


def make_attention_mask(query_input, key_input, pairwise_fn=torch.mul):
    mask = pairwise_fn(query_input.unsqueeze(-1), key_input.unsqueeze(-2))  # (B, T, T)
    return mask.unsqueeze(-3).bool()                                        # (B, 1, T, T)


def make_causal_mask(x, pairwise_fn=torch.greater_equal):
    idxs = torch.arange(x.shape[-1]).expand(x.shape)                        # (B, T)
    return make_attention_mask(idxs, idxs, pairwise_fn)                     # (B, 1, T, T)


def dot_product_attention(query, key, value, mask):
    depth = query.shape[-1]
    query = query / math.sqrt(depth)
    attn_weights = torch.einsum("...qhd,...khd->...hqk", query, key)       # (B, H, T, T)
    big_neg = torch.finfo(attn_weights.dtype).min
    attn_weights = torch.where(mask, attn_weights, big_neg)
    attn_weights = torch.softmax(attn_weights, dim=-1)
    return torch.einsum("...hqk,...khd->...qhd", attn_weights, value)      # (B, T, H, d_k)


class MultiHeadDotProductAttention(nn.Module):
    def __init__(self, num_heads, qkv_features, bug=""):
        super().__init__()
        self.bug = bug
        head_dim = qkv_features // num_heads
        shape, bias = (qkv_features, num_heads, head_dim), (num_heads, head_dim)
        self.query = DenseGeneral("...d,dhk->...hk", shape, bias)
        self.key = DenseGeneral("...d,dhk->...hk", shape, bias)
        self.value = DenseGeneral("...d,dhk->...hk", shape, bias)
        self.out = DenseGeneral("...hk,hkd->...d", (num_heads, head_dim, qkv_features), (qkv_features,))

    def forward(self, inputs_q, inputs_kv, mask):
        query = self.query(inputs_q)                                        # (B, T, H, d_k)
        key = self.key(inputs_kv)                                           # (B, T, H, d_k)
        value = self.value(inputs_kv)                                       # (B, T, H, d_k)
        x = dot_product_attention(query, key, value, mask)                  # (B, T, H, d_k)
        return self.out(x)                                                  # (B, T, D)


class DecoderBlock(nn.Module):
    def __init__(self, d_model, heads, bug=""):
        super().__init__()
        self.bug = bug
        self.norm = nn.LayerNorm(d_model)
        self.attn = MultiHeadDotProductAttention(heads, d_model, bug)

    def forward(self, x, lengths):
        valid = torch.arange(x.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)  # (B, T)
        pad = make_attention_mask(valid, valid, torch.logical_and)          # (B, 1, T, T)
        if self.bug == "causal-less-equal":
            causal = make_causal_mask(valid, torch.less_equal)              # (B, 1, T, T) [wrong]
        else:
            causal = make_causal_mask(valid)                                # (B, 1, T, T)
        y = self.norm(x)
        return x + self.attn(y, y, pad & causal)


BUGS = ("causal-less-equal",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    model = DecoderBlock(D, H, bug).eval()
    lengths = torch.tensor([T - (i % 2) for i in range(B)])
    return model, (torch.randn(B, T, D), lengths)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
