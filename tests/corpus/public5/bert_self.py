"""huggingface/transformers, models/bert/modeling_bert.py (BertSelfAttention before the SDPA rewrite) and
modeling_utils.py's ``get_extended_attention_mask``: a padding mask ``[B, T]`` of ones and zeros made
``[B, 1, 1, T]`` and turned into ``(1.0 - mask) * finfo.min``; ``transpose_for_scores`` (``x.size()[:-1]
+ (H, d)``, ``view``, ``permute(0, 2, 1, 3)``); scores divided by ``sqrt(d)`` plus the mask; the context
``permute(0, 2, 1, 3).contiguous()`` and ``view`` back to ``[B, T, D]``.

Bugs (argument): ``mask-on-queries``: the mask made ``[B, 1, T, 1]`` (``mask[:, None, :, None]``): it
masks the padded *queries*' rows, and every query still reads the padding keys (the broadcasting slip
asked about in https://github.com/huggingface/transformers/issues/542); ``mask-not-inverted``:
``mask * finfo.min`` without ``1.0 -``: the real tokens are masked and the padding kept (the inverted mask
of https://github.com/huggingface/transformers/issues/27050)."""

import math
import sys

import torch
from torch import nn


class BertSelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.num_attention_heads, self.attention_head_size = heads, hidden // heads
        self.all_head_size = heads * self.attention_head_size
        self.query, self.key = nn.Linear(hidden, self.all_head_size), nn.Linear(hidden, self.all_head_size)
        self.value = nn.Linear(hidden, self.all_head_size)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        x = x.view(new_x_shape)  # (B, T, H, d)
        return x.permute(0, 2, 1, 3)  # (B, H, T, d)

    def forward(self, hidden_states, attention_mask):
        query_layer = self.transpose_for_scores(self.query(hidden_states))  # (B, H, T, d)
        key_layer = self.transpose_for_scores(self.key(hidden_states))  # (B, H, T, d)
        value_layer = self.transpose_for_scores(self.value(hidden_states))  # (B, H, T, d)
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))  # (B, H, T, T)
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_scores = attention_scores + attention_mask  # (B, H, T, T)
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        context_layer = torch.matmul(attention_probs, value_layer)  # (B, H, T, d)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()  # (B, T, H, d)
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        return context_layer.view(new_context_layer_shape)  # (B, T, D)


class BertLayer(nn.Module):
    def __init__(self, hidden=32, heads=4, bug=""):
        super().__init__()
        self.bug = bug
        self.attention = BertSelfAttention(hidden, heads)
        self.output = nn.Linear(hidden, hidden)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)

    def get_extended_attention_mask(self, attention_mask, dtype):
        if self.bug == "mask-on-queries":
            extended = attention_mask[:, None, :, None]  # bug: (B, 1, T, 1)
        else:
            extended = attention_mask[:, None, None, :]  # (B, 1, 1, T)
        extended = extended.to(dtype=dtype)
        if self.bug == "mask-not-inverted":
            return extended * torch.finfo(dtype).min  # bug: the real tokens get the large negative
        return (1.0 - extended) * torch.finfo(dtype).min  # (B, 1, 1, T)

    def forward(self, hidden_states, attention_mask):
        extended = self.get_extended_attention_mask(attention_mask, hidden_states.dtype)
        attn = self.attention(hidden_states, extended)
        return self.norm(self.output(attn) + hidden_states)


def build(bug="", B=2, T=6, D=32, H=4):
    """--dims B=2,T=6,D=32,H=4: the second sequence ends in two padding tokens."""
    torch.manual_seed(0)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[-1, -2:] = 0
    return BertLayer(D, H, bug).eval(), (torch.randn(B, T, D), mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
