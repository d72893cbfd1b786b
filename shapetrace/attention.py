"""The reference multi-head self-attention that ``shapetrace run`` traces.

Written the textbook way, one reshaping step per line, each with its shape in a
comment (B = batch, T = tokens, D = d_model, H = heads, d_k = D / H).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .config import AttentionConfig


class MultiHeadAttention(nn.Module):
    """Self-attention with separate q, k, v and output projections (4*D^2 + 4*D parameters)."""

    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.heads = heads
        self.d_k = d_model // heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape                                   # (B, T, D)
        x = x.view(B, T, self.heads, self.d_k)              # (B, T, H, d_k)
        return x.transpose(1, 2)                            # (B, H, T, d_k)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        B, H, T, d_k = x.shape                              # (B, H, T, d_k)
        x = x.transpose(1, 2)                               # (B, T, H, d_k)
        x = x.contiguous()                                  # (B, T, H, d_k), copied
        return x.view(B, T, H * d_k)                        # (B, T, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = self.split_heads(self.w_q(x))                   # (B, H, T, d_k)
        k = self.split_heads(self.w_k(x))                   # (B, H, T, d_k)
        v = self.split_heads(self.w_v(x))                   # (B, H, T, d_k)
        k_t = k.transpose(-2, -1)                           # (B, H, d_k, T)
        scores = q @ k_t / math.sqrt(self.d_k)              # (B, H, T, T)
        weights = torch.softmax(scores, dim=-1)             # (B, H, T, T)
        y = weights @ v                                     # (B, H, T, d_k)
        y = self.merge_heads(y)                             # (B, T, D)
        return self.w_o(y)                                  # (B, T, D)


def build(config: AttentionConfig, device: str = "cpu") -> tuple[MultiHeadAttention, torch.Tensor]:
    """The reference model and an input ``x`` of shape (B, T, D), seeded for repeatability."""
    torch.manual_seed(config.seed)
    model = MultiHeadAttention(config.d_model, config.heads).to(device)
    x = torch.randn(config.batch, config.seq_len, config.d_model, device=device)  # (B, T, D)
    return model.eval(), x
