"""The reference multi-head self-attention that ``shapetrace run`` traces.

Written the textbook way, one reshaping step per line, each with its shape in a
comment (B = batch, T = tokens, D = d_model, H = heads, d_k = D / H).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from shapetrace.attention.config import AttentionConfig
from shapetrace.engine.tracer import name_axes


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
    """The reference model and an input ``x`` of shape (B, T, D), seeded; on meta nothing is allocated."""
    torch.manual_seed(config.seed)
    make = torch.empty if device == "meta" else torch.randn  # meta randn would load sympy (no values anyway)
    with torch.device(device):
        model = MultiHeadAttention(config.d_model, config.heads)
        x = make(config.batch, config.seq_len, config.d_model)                      # (B, T, D)
    return model.eval(), x


# ---------------------------------------------------------------------------
# The reference with options: masks, cross-attention, grouped-query heads, dropout.
# Extra names: T_q / T_k = query / key tokens (both T in self-attention),
# H_kv = key/value heads, n_rep = H / H_kv, D_kv = H_kv * d_k.
# ---------------------------------------------------------------------------


def causal_mask(T_q: int, T_k: int, device=None) -> torch.Tensor:
    """True above the diagonal: query i may not look at keys after i."""
    mask = torch.ones(T_q, T_k, dtype=torch.bool, device=device).triu(1)   # (T, T)
    return name_axes(mask, "T T")


def padding_mask(pad: Sequence[int], T_k: int, side: str = "right", device=None,
                 key_name: str = "T") -> torch.Tensor:
    """True on each sequence's padding tokens (``pad[b]`` of them, at the end or the start)."""
    rows = [[(j >= T_k - p) if side == "right" else (j < p) for j in range(T_k)] for p in pad]
    mask = torch.tensor(rows, dtype=torch.bool, device=device)              # (B, T_k)
    return name_axes(mask, ["B", key_name])


class ConfigurableAttention(MultiHeadAttention):
    """The reference, plus causal/padding masks, cross-attention, grouped-query heads and dropout.

    With no option set it computes exactly what :class:`MultiHeadAttention` computes.
    """

    def __init__(self, d_model: int, heads: int, kv_heads: int | None = None, causal: bool = False,
                 dropout: float = 0.0, safe_softmax: bool = False, pad_side: str = "right"):
        super().__init__(d_model, heads)
        self.kv_heads = kv_heads or heads
        self.n_rep = heads // self.kv_heads
        if self.n_rep > 1:  # narrower key/value projections (same weights as the plain model otherwise)
            d_kv = self.kv_heads * self.d_k
            self.w_k = nn.Linear(d_model, d_kv)             # D -> D_kv
            self.w_v = nn.Linear(d_model, d_kv)             # D -> D_kv
        self.causal, self.p_drop, self.safe = causal, dropout, safe_softmax
        self.pad_side = pad_side

    def split_kv_heads(self, x: torch.Tensor) -> torch.Tensor:
        if self.n_rep == 1:
            return self.split_heads(x)                      # (B, H, T_k, d_k)
        B, T, D_kv = x.shape                                # (B, T_k, D_kv)
        x = x.view(B, T, self.kv_heads, self.d_k)           # (B, T_k, H_kv, d_k)
        return x.transpose(1, 2)                            # (B, H_kv, T_k, d_k)

    def repeat_kv(self, x: torch.Tensor) -> torch.Tensor:
        """Grouped-query attention: each key/value head serves n_rep query heads."""
        if self.n_rep == 1:
            return x
        B, H_kv, T, d_k = x.shape                           # (B, H_kv, T_k, d_k)
        x = x[:, :, None]                                   # (B, H_kv, 1, T_k, d_k)
        x = x.expand(B, H_kv, self.n_rep, T, d_k)           # (B, H_kv, n_rep, T_k, d_k), stride 0
        return x.reshape(B, H_kv * self.n_rep, T, d_k)      # (B, H, T_k, d_k), copied

    def key_mask_view(self, keys: torch.Tensor) -> torch.Tensor:
        return keys[:, None, None, :]                       # (B, 1, 1, T_k): same keys for every head and query

    def hidden_masks(self, T_q: int, T_k: int, pad, device, key_name: str = "T") -> list[torch.Tensor]:
        """Boolean masks (True = hidden) that broadcast against the scores (B, H, T_q, T_k)."""
        masks = []
        if self.causal:
            masks.append(causal_mask(T_q, T_k, device))     # (T, T)
        if pad is not None:
            keys = padding_mask(pad, T_k, self.pad_side, device, key_name)  # (B, T_k)
            masks.append(self.key_mask_view(keys))          # (B, 1, 1, T_k)
        return masks

    def softmax(self, scores: torch.Tensor) -> torch.Tensor:
        weights = torch.softmax(scores, dim=-1)             # (B, H, T_q, T_k)
        if self.safe:
            dead = torch.isneginf(scores).all(dim=-1, keepdim=True)  # (B, H, T_q, 1): no key left
            weights = weights.masked_fill(dead, 0.0)        # (B, H, T_q, T_k): zeros, not NaN
        return weights

    def attend(self, q, k, v, masks) -> torch.Tensor:
        k_t = k.transpose(-2, -1)                           # (B, H, d_k, T_k)
        scores = q @ k_t / math.sqrt(self.d_k)              # (B, H, T_q, T_k)
        for mask in masks:
            scores = scores.masked_fill(mask, float("-inf"))  # (B, H, T_q, T_k)
        weights = self.softmax(scores)                      # (B, H, T_q, T_k)
        if self.p_drop:
            weights = F.dropout(weights, self.p_drop, self.training)  # (B, H, T_q, T_k)
        return weights @ v                                  # (B, H, T_q, d_k)

    def project(self, x, memory):
        q = self.split_heads(self.w_q(x))                   # (B, H, T_q, d_k)
        k = self.split_kv_heads(self.w_k(memory))           # (B, H_kv, T_k, d_k)
        v = self.split_kv_heads(self.w_v(memory))           # (B, H_kv, T_k, d_k)
        return q, self.repeat_kv(k), self.repeat_kv(v)      # (B, H, T_k, d_k) for k and v

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None, pad=None) -> torch.Tensor:
        key_name = "T" if memory is None else "T_k"
        memory = x if memory is None else memory            # (B, T_k, D): keys and values from here
        q, k, v = self.project(x, memory)                   # (B, H, T_q, d_k), (B, H, T_k, d_k) x 2
        masks = self.hidden_masks(q.shape[-2], k.shape[-2], pad, x.device, key_name)
        y = self.attend(q, k, v, masks)                     # (B, H, T_q, d_k)
        y = self.merge_heads(y)                             # (B, T_q, D)
        return self.w_o(y)                                  # (B, T_q, D)
