"""Model code for the catalogue's bugs of the two other shapes of the forward pass: decoding with a
key/value cache (:mod:`shapetrace.attention.decode`) and attention over image patches
(:mod:`shapetrace.attention.vision`). Each class is the working one with one method written the wrong
way; the shape comments say what the author believed.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from shapetrace.attention.decode import Cache, CachedAttention, SdpaCachedAttention
from shapetrace.attention.vision import PatchEmbedding


class CacheWrongAxis(CachedAttention):
    def append(self, cache: Cache, k: torch.Tensor, v: torch.Tensor) -> Cache:
        k = torch.cat([cache[0], k], dim=1)                 # (B, H, T+1, d_k)? dim 1 is H
        v = torch.cat([cache[1], v], dim=1)                 # (B, H, T+1, d_k)?
        return k, v


class CausalAtDecode(SdpaCachedAttention):
    def attend(self, q, k, v, masks) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)  # a step: sees key 0 only


class PatchesWithoutPermute(PatchEmbedding):
    def patches(self, pixels: torch.Tensor) -> torch.Tensor:
        x = self.proj(pixels)                               # (B, D, Hp, Wp)
        B, D = x.shape[:2]
        return x.view(B, -1, D)                             # (B, N, D)? memory is still (B, D, N)


class ClsTokenWrongAxis(PatchEmbedding):
    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        x = self.patches(pixels)                            # (B, N, D)
        cls = self.cls.expand(x.shape[0], -1, -1)           # (B, 1, D)
        return torch.cat([cls, x])                          # (B, 1+N, D)? no dim: joins along B


#: The breaks of a decode run (their classes replace the cached attention).
DECODE_BROKEN = {"cache-wrong-axis": CacheWrongAxis, "causal-at-decode": CausalAtDecode}
#: The breaks of an image run (their classes replace the patch embedding).
IMAGE_BROKEN = {"patches-without-permute": PatchesWithoutPermute, "cls-token-wrong-axis": ClsTokenWrongAxis}
