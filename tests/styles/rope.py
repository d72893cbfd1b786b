"""Rotary position embeddings (GPT-NeoX / LLaMA style rotate_half): cat of the negated half, cos and sin."""

import math

import torch
from torch import nn

SIZES = [
    {"B": 2, "T": 6, "D": 32, "H": 4},
    {"B": 2, "T": 8, "D": 32, "H": 4},   # T == d_k
    {"B": 2, "T": 4, "D": 16, "H": 4},   # T == H == d_k
]


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)                                                  # 2 x (B, H, T, d_k/2)
    return torch.cat((-x2, x1), dim=-1)                                          # (B, H, T, d_k) [rotated]


def apply_rotary_pos_emb(q, k, cos, sin):
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


class RotaryEmbedding(nn.Module):
    def __init__(self, dim: int, base: float = 10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, seq_len: int):
        t = torch.arange(seq_len, dtype=self.inv_freq.dtype)
        freqs = torch.outer(t, self.inv_freq)                                    # (T, d_k/2)
        emb = torch.cat((freqs, freqs), dim=-1)                                  # (T, d_k)
        return emb.cos()[None, None, :, :], emb.sin()[None, None, :, :]          # 2 x (1, 1, T, d_k)


class RotaryAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.h, self.d = n_heads, d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.o = nn.Linear(d_model, d_model, bias=False)
        self.rotary = RotaryEmbedding(self.d)

    def forward(self, x):
        B, T, D = x.shape                                                        # (B, T, D)
        q, k, v = self.qkv(x).chunk(3, dim=-1)                                   # 3 x (B, T, D)
        q = q.view(B, T, self.h, self.d).transpose(1, 2)                         # (B, H, T, d_k) [q]
        k = k.view(B, T, self.h, self.d).transpose(1, 2)                         # (B, H, T, d_k) [k]
        v = v.view(B, T, self.h, self.d).transpose(1, 2)                         # (B, H, T, d_k) [v]
        cos, sin = self.rotary(T)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.d)          # (B, H, T, T) [scores]
        causal = torch.ones(T, T, dtype=torch.bool).triu(1)                      # (T, T)
        scores = scores.masked_fill(causal, float("-inf"))                       # (B, H, T, T) [masked]
        y = torch.matmul(scores.softmax(dim=-1), v)                              # (B, H, T, d_k) [y]
        y = y.transpose(1, 2).reshape(B, T, D)                                   # (B, T, D) [merged]
        return self.o(y)                                                         # (B, T, D)


def build(dims):
    torch.manual_seed(0)
    return RotaryAttention(dims["D"], dims["H"]).eval(), (torch.randn(dims["B"], dims["T"], dims["D"]),)
