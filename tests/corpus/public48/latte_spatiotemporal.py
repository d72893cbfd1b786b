"""Vchitect/Latte, models/latte.py (``Latte``, ``TransformerBlock``, timm-style ``Attention`` with
``attention_mode='math'``, ``extras=1``), main (3780cd4): video latents ``(N, F, C, H, W)`` folded ``'b f c h w ->
(b f) c h w'``, patched (``PatchEmbed``: a stride-p ``Conv2d``, ``flatten(2).transpose(1, 2)``) plus a spatial
``pos_embed``; the timestep embedded once and repeated per frame for the spatial blocks (``repeat(t, 'n d -> (n c)
d', c=num_frames)``) and per patch for the temporal blocks (``c=num_patches``); the blocks taken in pairs: a spatial
block over each frame's patches, ``rearrange(x, '(b f) t d -> (b t) f d', b=batches)``, ``temp_embed`` added
before the first temporal block, a temporal block over each patch's frames, ``rearrange(x, '(b t) f d -> (b f) t
d', b=batches)``; adaLN-Zero (``adaLN_modulation(c).chunk(6, dim=1)``, ``modulate``); the final layer and
``unpatchify`` (``einsum('nhwpqc->nchpwq')``), ``'(b f) c h w -> b f c h w'``.

Bugs: ``temporal-fold-reshape``: the temporal fold written ``x.reshape(batches * t, frames, d)`` (a view in place
of the rearrange: each "frame sequence" takes consecutive patches of one frame); ``unfold-rows-token-major``: the
temporal block's rows folded back with ``'(t b) f d -> (b f) t d'`` (the rows read token-major though they are
batch-major: clips and patches mixed). Twin: ``timestep-repeat-interleave``: the timestep repeated per frame by
``t.repeat_interleave(frames, dim=0)``, the same rows as einops' ``'n d -> (n c) d'``."""

import sys

import torch
from einops import rearrange, repeat
from torch import nn


def modulate(x, shift, scale):
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


class Attention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)  # (3,B,H,N,d_k)
        q, k, v = qkv.unbind(0)                                                        # (B, H, N, d_k)
        attn = (q @ k.transpose(-2, -1)) * self.scale                                  # (B, H, N, N)
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)                                # (B, N, D)
        return self.proj(x)


class TransformerBlock(nn.Module):
    def __init__(self, hidden_size, num_heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(hidden_size, num_heads)
        self.norm2 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(hidden_size, 4 * hidden_size), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * hidden_size, hidden_size))
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(hidden_size, 6 * hidden_size))

    def forward(self, x, c):
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.adaLN_modulation(c).chunk(6, dim=1)
        x = x + gate_msa.unsqueeze(1) * self.attn(modulate(self.norm1(x), shift_msa, scale_msa))
        return x + gate_mlp.unsqueeze(1) * self.mlp(modulate(self.norm2(x), shift_mlp, scale_mlp))


class Latte(nn.Module):
    def __init__(self, hidden_size, num_heads, num_frames, grid, patch_size=2, in_channels=4, depth=2, bug=""):
        super().__init__()
        self.bug = bug
        self.patch_size, self.in_channels, self.grid = patch_size, in_channels, grid
        self.x_embedder = nn.Conv2d(in_channels, hidden_size, kernel_size=patch_size, stride=patch_size)
        self.t_embedder = nn.Sequential(nn.Linear(hidden_size, hidden_size), nn.SiLU(),
                                        nn.Linear(hidden_size, hidden_size))
        self.pos_embed = nn.Parameter(torch.randn(1, grid[0] * grid[1], hidden_size) * 0.02)
        self.temp_embed = nn.Parameter(torch.randn(1, num_frames, hidden_size) * 0.02)
        self.blocks = nn.ModuleList(TransformerBlock(hidden_size, num_heads) for _ in range(depth))
        self.final_norm = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.final_modulation = nn.Sequential(nn.SiLU(), nn.Linear(hidden_size, 2 * hidden_size))
        self.final_linear = nn.Linear(hidden_size, patch_size * patch_size * in_channels)

    def unpatchify(self, x):
        c, p, (h, w) = self.in_channels, self.patch_size, self.grid
        x = x.reshape(x.shape[0], h, w, p, p, c)                                       # (B*F, Hp, Wp, p, p, C)
        x = torch.einsum("nhwpqc->nchpwq", x)                                          # (B*F, C, Hp, p, Wp, p)
        return x.reshape(x.shape[0], c, h * p, w * p)                                  # (B*F, C, Hp*p, Wp*p)

    def forward(self, x, t):
        batches, frames, channels, high, weight = x.shape
        x = rearrange(x, "b f c h w -> (b f) c h w")                                   # (B*F, C, h, w)
        x = self.x_embedder(x).flatten(2).transpose(1, 2) + self.pos_embed             # (B*F, Hp*Wp, D)
        t = self.t_embedder(t)                                                         # (B, D)
        if self.bug == "timestep-repeat-interleave":
            timestep_spatial = t.repeat_interleave(frames, dim=0)                      # (B*F, D)
        else:
            timestep_spatial = repeat(t, "n d -> (n c) d", c=frames)                  # (B*F, D)
        timestep_temp = repeat(t, "n d -> (n c) d", c=self.pos_embed.shape[1])         # (B*Hp*Wp, D)
        for i in range(0, len(self.blocks), 2):
            spatial_block, temp_block = self.blocks[i:i + 2]
            x = spatial_block(x, timestep_spatial)                                     # (B*F, Hp*Wp, D)
            if self.bug == "temporal-fold-reshape":
                x = x.reshape(batches * x.shape[1], frames, x.shape[2])                # (B*Hp*Wp, F, D)
            else:
                x = rearrange(x, "(b f) t d -> (b t) f d", b=batches)                  # (B*Hp*Wp, F, D)
            if i == 0:
                x = x + self.temp_embed
            x = temp_block(x, timestep_temp)                                           # (B*Hp*Wp, F, D)
            if self.bug == "unfold-rows-token-major":
                x = rearrange(x, "(t b) f d -> (b f) t d", b=batches)                  # (B*F, Hp*Wp, D)
            else:
                x = rearrange(x, "(b t) f d -> (b f) t d", b=batches)                  # (B*F, Hp*Wp, D)
        shift, scale = self.final_modulation(timestep_spatial).chunk(2, dim=1)
        x = self.final_linear(modulate(self.final_norm(x), shift, scale))              # (B*F, Hp*Wp, p*p*C)
        x = self.unpatchify(x)                                                         # (B*F, C, h, w)
        return rearrange(x, "(b f) c h w -> b f c h w", b=batches)                     # (B, F, C, h, w)


BUGS = ("temporal-fold-reshape", "unfold-rows-token-major")
TWINS = ("timestep-repeat-interleave",)
DIMS = ("B=2 F=3 D=32 H=4 Hp=2 Wp=5",)
EQUAL = {"B=2 F=3 D=32 H=4 Hp=2 Wp=5": "B=4 F=4 D=32 H=4 Hp=2 Wp=2"}


def build(bug="", B=2, F=3, D=32, H=4, Hp=2, Wp=5):
    """A clip of ``F`` frames of ``(2·Hp, 2·Wp)`` latents with 4 channels, patch 2; the timestep already
    embedded to width ``D`` (``TimestepEmbedder``'s sinusoid left out)."""
    torch.manual_seed(0)
    model = Latte(D, H, F, (Hp, Wp), bug=bug).eval()
    return model, (torch.randn(B, F, 4, 2 * Hp, 2 * Wp), torch.randn(B, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
