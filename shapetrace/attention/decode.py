"""Decoding with a key/value cache: what ``shapetrace run --decode N`` traces.

A prefill runs the reference over the T prompt tokens (causal: no token sees a later one) and keeps
each layer's keys and values. Each decode step then projects one new token, appends its key and
value to the cache along the token axis, and lets the one query attend over every key so far.
Extra names: T[-1:] = the one new token of a step, T+1, T+2, ... = the cache after 1, 2, ... steps.
The last position's output is fed back as the next step's input (there is no vocabulary here).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from shapetrace.attention.reference import ConfigurableAttention

Cache = tuple[torch.Tensor, torch.Tensor]


class CachedAttention(ConfigurableAttention):
    """The reference with a key/value cache; ``forward(x, cache)`` returns the output and the cache."""

    def append(self, cache: Cache, k: torch.Tensor, v: torch.Tensor) -> Cache:
        k = torch.cat([cache[0], k], dim=2)                 # (B, H_kv, T+1, d_k): new key last
        v = torch.cat([cache[1], v], dim=2)                 # (B, H_kv, T+1, d_k)
        return k, v

    def forward(self, x: torch.Tensor, cache: Cache | None = None):
        q = self.split_heads(self.w_q(x))                   # (B, H, T, d_k); T[-1:] at a step
        k = self.split_kv_heads(self.w_k(x))                # (B, H_kv, T, d_k)
        v = self.split_kv_heads(self.w_v(x))                # (B, H_kv, T, d_k)
        if cache is not None:
            k, v = self.append(cache, k, v)                 # (B, H_kv, T+1, d_k) each
        prefill = cache is None
        masks = self.hidden_masks(q.shape[-2], k.shape[-2], None, x.device) if prefill else []
        y = self.attend(q, self.repeat_kv(k), self.repeat_kv(v), masks)  # (B, H, T, d_k)
        y = self.merge_heads(y)                             # (B, T, D)
        return self.w_o(y), (k, v)                          # (B, T, D), the cache

    def last_token(self, y: torch.Tensor) -> torch.Tensor:
        """The next step's input: the output at the last position (there is no vocabulary here), in
        its own memory like a new token's embedding."""
        x = y[:, -1:]                                       # (B, T[-1:], D), a view into y
        return x.contiguous()                               # (B, T[-1:], D), copied


class SdpaCachedAttention(CachedAttention):
    """The cached attention with the fused kernel: causal over the prompt, no mask at a step."""

    def attend(self, q, k, v, masks) -> torch.Tensor:
        prefill = q.shape[-2] == k.shape[-2]                # T and T; at a step 1 and T+1
        return F.scaled_dot_product_attention(q, k, v, is_causal=prefill)  # (B, H, T, d_k)


DECODE_CLASSES = {"manual": CachedAttention, "sdpa": SdpaCachedAttention}
