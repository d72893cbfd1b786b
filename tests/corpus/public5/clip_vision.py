"""openai/CLIP, clip/model.py (``VisionTransformer`` and ``ResidualAttentionBlock``): a strided conv
stem, ``reshape(B, width, grid ** 2).permute(0, 2, 1)``, the class embedding joined by ``torch.cat([cls +
zeros(B, 1, width), x], dim=1)``, ``+ positional_embedding``, ``ln_pre``, then ``x.permute(1, 0, 2)  #
NLD -> LND`` for ``nn.MultiheadAttention`` (sequence first), back with ``permute(1, 0, 2)``, ``ln_post``
on the class token and ``@ self.proj``.

Bug (argument): ``no-permute``: the transformer fed ``[B, L, D]`` without the NLD -> LND permute:
``nn.MultiheadAttention`` (``batch_first=False``) reads the batch as the sequence and attends across
images (the sequence-first/batch-first mix-up that ``batch_first`` was added to PyTorch for,
https://github.com/pytorch/pytorch/issues/25100)."""

import sys

import torch
from torch import nn


class ResidualAttentionBlock(nn.Module):
    def __init__(self, d_model, n_head):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_head)
        self.ln_1, self.ln_2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_model * 4), nn.GELU(), nn.Linear(d_model * 4, d_model))

    def forward(self, x):
        y = self.ln_1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class VisionTransformer(nn.Module):
    def __init__(self, patch=2, width=32, heads=4, output_dim=16, bug=""):
        super().__init__()
        self.bug = bug
        self.conv1 = nn.Conv2d(3, width, kernel_size=patch, stride=patch, bias=False)
        scale = width ** -0.5
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(scale * torch.randn(9 + 1, width))
        self.ln_pre, self.ln_post = nn.LayerNorm(width), nn.LayerNorm(width)
        self.transformer = ResidualAttentionBlock(width, heads)
        self.proj = nn.Parameter(scale * torch.randn(width, output_dim))

    def forward(self, x):
        x = self.conv1(x)  # (B, D, grid, grid)
        x = x.reshape(x.shape[0], x.shape[1], -1)  # (B, D, N)
        x = x.permute(0, 2, 1)  # (B, N, D)
        cls = self.class_embedding.to(x.dtype) + torch.zeros(x.shape[0], 1, x.shape[-1], dtype=x.dtype)
        x = torch.cat([cls, x], dim=1)  # (B, 1+N, D)
        x = x + self.positional_embedding.to(x.dtype)
        x = self.ln_pre(x)
        if self.bug == "no-permute":
            x = self.transformer(x)  # bug: (B, L, D) read as (L, B, D)
        else:
            x = x.permute(1, 0, 2)  # NLD -> LND
            x = self.transformer(x)
            x = x.permute(1, 0, 2)  # LND -> NLD
        x = self.ln_post(x[:, 0, :])  # (B, D)
        return x @ self.proj  # (B, output_dim)


def build(bug="", B=2, D=32, H=4):
    """--dims B=2,D=32,H=4: 6 × 6 images, patches of 2 (N = 9, L = 10 with the class token)."""
    torch.manual_seed(0)
    return VisionTransformer(width=D, heads=H, bug=bug).eval(), (torch.randn(B, 3, 6, 6),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
