"""core42/jais-13b on the Hugging Face hub, ``modeling_jais.py`` (``JAISAttention``, ``AlibiPositionEmbeddingLayer``,
2023): GPT-2's fused ``c_attn`` (``Conv1D``-style, ``split(embed_dim, dim=2)``), ``_split_heads`` (``view`` then
``permute(0, 2, 1, 3)``); muP's ``scale_qk_dot_by_d``: scores scaled by ``1 / head_dim`` (not its root); ALiBi
added per head: ``slopes[:, None, None] * (memory_position - context_position)`` (``(H, T, S)``, zero on the
diagonal, negative to the past); the causal ``torch.where(causal_mask, w, finfo.min)``; ``softmax(dim=-1)``;
``_merge_heads`` (``permute(0, 2, 1, 3).contiguous().view``); ``c_proj``.

Bugs (argument): ``alibi-sign-reversed``: the relative distance taken ``context - memory`` (q - k where k - q is
meant: the bias rewards the far past instead of penalising it, the natural slip of the sign in a hand-written
ALiBi); ``merge-without-permute``: ``_merge_heads`` as ``view(B, T, D)`` straight
from ``(B, H, T, d)`` (the ``permute`` forgotten: heads and tokens interleave)."""

import math
import sys

import torch
from torch import nn


def get_alibi_slopes(n):
    start = 2 ** (-(2 ** -(math.log2(n) - 3)))
    return torch.tensor([start * start**i for i in range(n)])


class JAISAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.bug = embed_dim, num_heads, bug
        self.head_dim = embed_dim // num_heads
        self.c_attn = nn.Linear(embed_dim, 3 * embed_dim)
        self.c_proj = nn.Linear(embed_dim, embed_dim)
        self.register_buffer("slopes", get_alibi_slopes(num_heads), persistent=False)

    def _split_heads(self, tensor):
        new_shape = tensor.size()[:-1] + (self.num_heads, self.head_dim)
        return tensor.view(new_shape).permute(0, 2, 1, 3)

    def _merge_heads(self, tensor):
        if self.bug == "merge-without-permute":
            return tensor.contiguous().view(tensor.size(0), tensor.size(2), self.embed_dim)
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        return tensor.view(tensor.size()[:-2] + (self.embed_dim,))

    def alibi(self, query_length, key_length):
        context_position = torch.arange(query_length)[:, None]
        memory_position = torch.arange(key_length)[None, :]
        if self.bug == "alibi-sign-reversed":
            relative_position = context_position - memory_position
        else:
            relative_position = memory_position - context_position
        relative_position = relative_position.unsqueeze(0).expand(self.num_heads, -1, -1)
        return self.slopes[:, None, None] * relative_position                  # (H, T, S)

    def forward(self, hidden_states):
        query, key, value = self.c_attn(hidden_states).split(self.embed_dim, dim=2)
        query, key, value = self._split_heads(query), self._split_heads(key), self._split_heads(value)
        attn_weights = torch.matmul(query, key.transpose(-1, -2)) / self.head_dim   # muP: 1 / d
        T = query.size(-2)
        attn_weights = attn_weights + self.alibi(T, T).unsqueeze(0)
        causal_mask = torch.tril(torch.ones(T, T, dtype=torch.bool)).view(1, 1, T, T)
        mask_value = torch.finfo(attn_weights.dtype).min
        attn_weights = torch.where(causal_mask, attn_weights, torch.tensor(mask_value))
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.matmul(attn_weights, value)                         # (B, H, T, d)
        return self.c_proj(self._merge_heads(attn_output))


BUGS = ("alibi-sign-reversed", "merge-without-permute")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return JAISAttention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
