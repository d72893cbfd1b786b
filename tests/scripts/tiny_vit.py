"""A tiny vision transformer traced from pixels (torch only): a conv patch stem, a class token, timm-style
fused q/k/v taken apart with unbind, three heads. Used by the README and tests/engine/test_structure.py."""

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, D = x.shape                                                       # (B, 1+N, D)
        qkv = self.qkv(x).reshape(B, N, 3, self.heads, D // self.heads)         # (B, 1+N, qkv, H, d_k)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)                          # (B, H, 1+N, d_k) each
        weights = (q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5).softmax(-1)  # (B, H, 1+N, 1+N)
        out = (weights @ v).transpose(1, 2).reshape(B, N, D)                    # (B, 1+N, D)
        return self.proj(out)


class TinyViT(nn.Module):
    def __init__(self, dim: int = 48, heads: int = 3, patch: int = 8, image: int = 32):
        super().__init__()
        self.stem = nn.Conv2d(3, dim, kernel_size=patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.zeros(1, 1 + (image // patch) ** 2, dim))
        self.norm = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)

    def forward(self, pixels):
        x = self.stem(pixels).flatten(2).transpose(1, 2)                        # (B, N, D)
        cls = self.cls.expand(x.shape[0], -1, -1)                                # (B, 1, D)
        x = torch.cat([cls, x], dim=1) + self.pos                                # (B, 1+N, D)
        return x + self.attn(self.norm(x))                                       # (B, 1+N, D)


torch.manual_seed(0)
model = TinyViT().eval()
with torch.no_grad():
    model(torch.randn(2, 3, 32, 32))                                             # (B, 3, 32, 32)
