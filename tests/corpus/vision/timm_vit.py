"""huggingface/pytorch-image-models, timm/models/vision_transformer.py (https://github.com/huggingface/
pytorch-image-models/blob/main/timm/models/vision_transformer.py): ``Attention.forward`` (``qkv.reshape(B,
N, 3, num_heads, head_dim).permute(2, 0, 3, 1, 4)``, ``unbind(0)``, ``q_norm``/``k_norm`` per head, the
explicit product), ``VisionTransformer._pos_embed`` (class token joined by ``torch.cat``, learned positions)
and ``forward_head`` with ``global_pool='token'`` (``x[:, 0]``) or ``'avg'`` (``x[:, 1:].mean(dim=1)``).

Bug (argument): ``pool-over-batch``: the average pool written ``x[:, 1:].mean(dim=0)``, over the batch."""

import sys

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, num_heads=3, qk_norm=True):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.q_norm = nn.LayerNorm(self.head_dim) if qk_norm else nn.Identity()
        self.k_norm = nn.LayerNorm(self.head_dim) if qk_norm else nn.Identity()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # (B, nH, N, hd)
        q, k = self.q_norm(q), self.k_norm(k)
        q = q * self.scale
        attn = q @ k.transpose(-2, -1)  # (B, nH, N, N)
        attn = attn.softmax(dim=-1)
        x = attn @ v  # (B, nH, N, hd)
        x = x.transpose(1, 2).reshape(B, N, C)  # (B, N, C)
        return self.proj(x)


class VisionTransformer(nn.Module):
    def __init__(self, img_size=16, patch_size=4, embed_dim=24, num_heads=3, num_classes=5, pool="avg", bug=""):
        super().__init__()
        self.pool, self.bug = pool, bug
        self.patch_embed = nn.Conv2d(3, embed_dim, kernel_size=patch_size, stride=patch_size)
        num_patches = (img_size // patch_size) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.randn(1, num_patches + 1, embed_dim) * .02)
        self.norm1 = nn.LayerNorm(embed_dim)
        self.attn = Attention(embed_dim, num_heads)
        self.norm = nn.LayerNorm(embed_dim)
        self.head = nn.Linear(embed_dim, num_classes)

    def _pos_embed(self, x):
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)  # (B, 1+N, C)
        return x + self.pos_embed

    def forward(self, pixels):
        x = self.patch_embed(pixels).flatten(2).transpose(1, 2)  # (B, N, C)
        x = self._pos_embed(x)
        x = x + self.attn(self.norm1(x))
        x = self.norm(x)
        if self.pool == "token":
            x = x[:, 0]  # (B, C)
        elif self.bug == "pool-over-batch":
            x = x[:, 1:].mean(dim=0)  # bug: over the batch
        else:
            x = x[:, 1:].mean(dim=1)  # (B, C)
        return self.head(x)


def build(bug="", pool="avg"):
    """--dims B=2,N=16,D=24,H=3 (16 × 16 pixels, 4 × 4 patches)."""
    torch.manual_seed(0)
    return VisionTransformer(pool=pool, bug=bug).eval(), (torch.randn(2, 3, 16, 16),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
