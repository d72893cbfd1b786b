"""Qwen/Qwen-7B, modeling_qwen.py (the first Qwen release, ``QWenAttention``, ``_split_heads``, ``_merge_heads``,
``apply_rotary_pos_emb``, ``logn_list``): one ``c_attn`` Linear(D, 3D) and ``mixed_x_layer.split(D, dim=2)``;
``_split_heads``: ``view(B, T, H, d)`` (kept ``(B, T, H, d)`` for the rotary, ``cos``/``sin`` shaped
``(1, T, 1, d)``, ``rotate_half``); with ``use_logn_attn`` the queries scaled per position by
``logn_tensor[:, key_size - T:key_size, :, :]`` (``log(i) / log(seq_length)`` past the trained length, 1 before
it; here a trained length of 4, so the last positions are scaled), ``expand_as(query)``; then ``permute(0, 2, 1,
3)``; ``_attn``: ``matmul(q, k.transpose(-1, -2)) / d ** 0.5``, the causal ``tril`` bias ``torch.where`` with the
dtype's minimum, softmax, ``matmul`` with v; ``_merge_heads``: ``permute(0, 2, 1, 3).contiguous()`` and
``view(B, T, H * d)``; ``c_proj``.

Bugs (argument): ``merge-heads-without-permute``: ``_merge_heads`` without its ``permute`` (``contiguous().view(B,
T, H * d)`` on ``(B, H, T, d)``), the slip Qwen-1 ports to other head layouts made; ``causal-tril-inverted``: the
causal bias built with ``torch.triu`` where ``torch.tril`` is meant (each query sees itself and the later tokens)."""

import math
import sys

import torch
from torch import nn


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class QWenAttention(nn.Module):
    def __init__(self, dim, heads, seq_length=4, bug=""):
        super().__init__()
        self.num_heads, self.head_dim, self.bug = heads, dim // heads, bug
        self.split_size = dim
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.c_proj = nn.Linear(dim, dim, bias=False)
        logn_list = [math.log(i, seq_length) if i > seq_length else 1 for i in range(1, 64)]
        self.register_buffer("logn_tensor", torch.tensor(logn_list)[None, :, None, None], persistent=False)
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float()
                                                           / self.head_dim)), persistent=False)

    def _split_heads(self, tensor):
        return tensor.view(tensor.size()[:-1] + (self.num_heads, self.head_dim))    # (B, T, H, d)

    def _merge_heads(self, tensor):
        if self.bug != "merge-heads-without-permute":
            tensor = tensor.permute(0, 2, 1, 3)
        tensor = tensor.contiguous()
        return tensor.view(tensor.size()[0], -1, self.num_heads * self.head_dim)

    def _attn(self, query, key, value):
        attn_weights = torch.matmul(query, key.transpose(-1, -2)) / value.size(-1) ** 0.5
        q_len, k_len = query.size(-2), key.size(-2)
        make = torch.triu if self.bug == "causal-tril-inverted" else torch.tril
        causal_mask = make(torch.ones((k_len, k_len), dtype=torch.bool))[None, None, k_len - q_len:k_len, :k_len]
        mask_value = torch.finfo(attn_weights.dtype).min
        attn_weights = torch.where(causal_mask, attn_weights, torch.full([], mask_value))
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        return torch.matmul(attn_weights, value)

    def forward(self, hidden_states):                                              # (B, T, D)
        mixed_x_layer = self.c_attn(hidden_states)
        query, key, value = mixed_x_layer.split(self.split_size, dim=2)
        query, key, value = self._split_heads(query), self._split_heads(key), self._split_heads(value)
        seq_len = hidden_states.size(1)
        freqs = torch.outer(torch.arange(seq_len, dtype=torch.float32), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)[None, :, None, :]                    # (1, T, 1, d)
        cos, sin = emb.cos(), emb.sin()
        query = query * cos + rotate_half(query) * sin
        key = key * cos + rotate_half(key) * sin
        key_size = key.size(1)
        logn_tensor = self.logn_tensor[:, key_size - query.size(1):key_size, :, :]
        query = query * logn_tensor.expand_as(query)
        query, key, value = query.permute(0, 2, 1, 3), key.permute(0, 2, 1, 3), value.permute(0, 2, 1, 3)
        attn_output = self._merge_heads(self._attn(query, key, value))
        return self.c_proj(attn_output)


BUGS = ("merge-heads-without-permute", "causal-tril-inverted")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    return QWenAttention(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
