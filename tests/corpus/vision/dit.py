"""facebookresearch/DiT, models.py (https://github.com/facebookresearch/DiT/blob/main/models.py):
``modulate`` (``x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)``), ``TimestepEmbedder.timestep_embedding``
(``freqs = exp(-log(max_period) * arange(0, half) / half)``, ``t[:, None] * freqs[None]``, ``cat([cos,
sin], -1)``), ``DiTBlock`` (``adaLN_modulation(c).chunk(6, dim=1)``, gated residuals) with timm's
``Attention``, and ``DiT.unpatchify`` (``einsum('nhwpqc->nchpwq')``).

Bug (argument): ``unpatchify-order``: ``einsum('nhwpqc->nchwpq')``, the patch rows and columns not
interleaved back with the grid's (each patch's pixels land in the wrong places)."""

import math
import sys

import torch
from torch import nn


def modulate(x, shift, scale):
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


def timestep_embedding(t, dim, max_period=10000):
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(start=0, end=half, dtype=torch.float32) / half)
    args = t[:, None].float() * freqs[None]  # (B, half)
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)  # (B, dim)


class Attention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # (B, nH, N, d)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        x = (attn.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, N, C)  # (B, N, C)
        return self.proj(x)


class DiT(nn.Module):
    def __init__(self, hidden=24, heads=3, patch=2, channels=4, bug=""):
        super().__init__()
        self.hidden, self.patch, self.channels, self.bug = hidden, patch, channels, bug
        self.x_embedder = nn.Conv2d(channels, hidden, kernel_size=patch, stride=patch)
        self.t_embedder = nn.Sequential(nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, hidden))
        self.norm1 = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(hidden, heads)
        self.norm2 = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(hidden, 2 * hidden), nn.GELU(approximate="tanh"),
                                 nn.Linear(2 * hidden, hidden))
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(hidden, 6 * hidden))
        self.final = nn.Linear(hidden, patch * patch * channels)

    def unpatchify(self, x):
        c, p = self.channels, self.patch
        h = w = int(x.shape[1] ** 0.5)
        x = x.reshape(shape=(x.shape[0], h, w, p, p, c))  # (N, h, w, p, p, c)
        if self.bug == "unpatchify-order":
            x = torch.einsum("nhwpqc->nchwpq", x)  # bug
        else:
            x = torch.einsum("nhwpqc->nchpwq", x)  # (N, c, h, p, w, p)
        return x.reshape(shape=(x.shape[0], c, h * p, h * p))  # (N, c, H, W)

    def forward(self, x, t):
        x = self.x_embedder(x).flatten(2).transpose(1, 2)  # (N, T, D)
        c = self.t_embedder(timestep_embedding(t, self.hidden))  # (N, D)
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.adaLN_modulation(c).chunk(6, dim=1)
        x = x + gate_msa.unsqueeze(1) * self.attn(modulate(self.norm1(x), shift_msa, scale_msa))
        x = x + gate_mlp.unsqueeze(1) * self.mlp(modulate(self.norm2(x), shift_mlp, scale_mlp))
        return self.unpatchify(self.final(x))


def build(bug=""):
    """--dims B=2,T=16,D=24,H=3 (8 × 8 latents of 4 channels, patches of 2: 16 tokens)."""
    torch.manual_seed(0)
    return DiT(bug=bug).eval(), (torch.randn(2, 4, 8, 8), torch.tensor([3.0, 500.0]))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
