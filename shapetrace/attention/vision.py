"""Images as tokens: what ``shapetrace run --image SIZE --patch P`` traces.

A convolution with a P x P kernel and stride P cuts the image into patches and projects each one to
D features; flattening the patch grid and moving the features last makes N tokens; a learned class
token joins in front; then the reference attention runs over the 1+N tokens. Extra names: C =
channels, Hp x Wp = the patch grid (SIZE / P each way), N = Hp·Wp patches.
"""

from __future__ import annotations

import torch
from torch import nn

from shapetrace.attention.reference import ConfigurableAttention
from shapetrace.attention.variants import SdpaAttention


class PatchEmbedding(nn.Module):
    """Conv2d(C, D, P, stride=P): one D-vector per P x P patch, then a class token in front."""

    def __init__(self, channels: int, d_model: int, patch: int):
        super().__init__()
        self.proj = nn.Conv2d(channels, d_model, kernel_size=patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, d_model))             # (1, 1, D)

    def patches(self, pixels: torch.Tensor) -> torch.Tensor:
        x = self.proj(pixels)                               # (B, D, Hp, Wp)
        x = x.flatten(2)                                    # (B, D, N)
        return x.transpose(1, 2)                            # (B, N, D)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        x = self.patches(pixels)                            # (B, N, D)
        cls = self.cls.expand(x.shape[0], -1, -1)           # (B, 1, D), stride 0 on B
        return torch.cat([cls, x], dim=1)                   # (B, 1+N, D)


class ImageAttention(nn.Module):
    """Attention over the patches of an image plus a class token."""

    def __init__(self, embed: PatchEmbedding, attn: nn.Module):
        super().__init__()
        self.embed = embed
        self.attn = attn

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        x = self.embed(pixels)                              # (B, 1+N, D)
        return self.attn(x)                                 # (B, 1+N, D)


ATTENTION_CLASSES = {"manual": ConfigurableAttention, "sdpa": SdpaAttention}
