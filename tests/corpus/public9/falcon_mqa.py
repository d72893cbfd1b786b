"""huggingface/transformers, src/transformers/models/falcon/modeling_falcon.py (``FalconAttention``, Falcon-7B's
``multi_query`` branch of ``_split_heads`` and the eager attention of ``forward``;
https://github.com/huggingface/transformers/blob/main/src/transformers/models/falcon/modeling_falcon.py): one
``query_key_value`` projection of width ``hidden_size + 2 * head_dim`` viewed ``(B, T, num_heads + 2,
head_dim)``: H query heads, then one key head, then one value head, cut by ``[..., :-2, :]``, ``[..., [-2],
:]`` and ``[..., [-1], :]``; each folded ``transpose(1, 2).reshape(batch_size * num_kv_heads, T, head_dim)``,
then ``reshape(batch_size, num_kv_heads, -1, head_dim)``; the one key head broadcast over the query heads by
the product; the heads merged by ``_merge_heads``-style ``permute(0, 2, 1, 3).reshape(B, T, H * d)``.

Bugs (argument): ``q-no-transpose``: the queries folded ``reshape(B * H, T, d)`` without the transpose
(the layout bug of FuxiCTR issue #30, here on the fused split: each "head" row holds tokens of several
heads); ``merge-no-permute``: the heads merged ``reshape(B, T, H * d)`` straight from ``(B, H, T, d)``
(transformer-from-scratch PR #6's question: the merge without the permute); ``kv-same-slot``: the values
picked ``fused_qkv[..., [-2], :]``, the key head's slot (a copy-paste slip of the line's two picks): every
shape and name agrees, the values are the keys, and the value head is never read."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("q-no-transpose", "merge-no-permute", "kv-same-slot")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)


class FalconAttention(nn.Module):
    def __init__(self, hidden_size=64, num_heads=4, bug=""):
        super().__init__()
        self.num_heads, self.head_dim, self.bug = num_heads, hidden_size // num_heads, bug
        self.num_kv_heads = 1   # multi_query
        self.query_key_value = nn.Linear(hidden_size, hidden_size + 2 * self.head_dim, bias=False)
        self.dense = nn.Linear(hidden_size, hidden_size, bias=False)

    def _split_heads(self, fused_qkv):
        batch_size, seq_length, _ = fused_qkv.shape
        fused_qkv = fused_qkv.view(batch_size, seq_length, self.num_heads + 2, self.head_dim)  # (B, T, H+2, d)
        if self.bug == "kv-same-slot":
            return fused_qkv[..., :-2, :], fused_qkv[..., [-2], :], fused_qkv[..., [-2], :]   # bug: v = k
        return fused_qkv[..., :-2, :], fused_qkv[..., [-2], :], fused_qkv[..., [-1], :]   # (B, T, H, d), (B, T, 1, d)

    def forward(self, hidden_states):
        query_layer, key_layer, value_layer = self._split_heads(self.query_key_value(hidden_states))
        batch_size, query_length, _, _ = query_layer.shape
        if self.bug == "q-no-transpose":
            query_layer = query_layer.reshape(batch_size * self.num_heads, query_length, self.head_dim)  # bug
        else:
            query_layer = query_layer.transpose(1, 2).reshape(
                batch_size * self.num_heads, query_length, self.head_dim)                     # (B*H, T, d)
        key_layer = key_layer.transpose(1, 2).reshape(
            batch_size * self.num_kv_heads, query_length, self.head_dim)                      # (B, T, d)
        value_layer = value_layer.transpose(1, 2).reshape(
            batch_size * self.num_kv_heads, query_length, self.head_dim)                      # (B, T, d)
        query_layer_ = query_layer.reshape(batch_size, self.num_heads, -1, self.head_dim)     # (B, H, T, d)
        key_layer_ = key_layer.reshape(batch_size, self.num_kv_heads, -1, self.head_dim)      # (B, 1, T, d)
        value_layer_ = value_layer.reshape(batch_size, self.num_kv_heads, -1, self.head_dim)  # (B, 1, T, d)
        causal = torch.triu(torch.full((query_length, query_length), float("-inf")), diagonal=1)  # (T, T)
        scores = query_layer_ @ key_layer_.transpose(-1, -2) / math.sqrt(self.head_dim)      # (B, H, T, T)
        attention_probs = F.softmax(scores + causal, dim=-1)                                  # (B, H, T, T)
        attn_output = attention_probs @ value_layer_                                          # (B, H, T, d)
        if self.bug == "merge-no-permute":
            attn_output = attn_output.reshape(batch_size, query_length, self.num_heads * self.head_dim)  # bug
        else:
            attn_output = attn_output.permute(0, 2, 1, 3).reshape(
                batch_size, query_length, self.num_heads * self.head_dim)                     # (B, T, D)
        return self.dense(attn_output)


def build(bug="", B=2, T=6, D=64, H=4):
    """--dims 'B=2 T=6 D=64 H=4' (H_kv may be given too: 1)."""
    torch.manual_seed(0)
    return FalconAttention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
