"""PixArt-alpha/PixArt-alpha, diffusion/model/nets/PixArt.py and PixArt_blocks.py (``PixArtBlock``,
``MultiHeadCrossAttention``, ``t2i_modulate``, ``T2IFinalLayer``, ``TimestepEmbedder``; timm's ``Attention`` for
the self-attention): PixArt-α's DiT block with adaLN-single: one ``t_block`` ``Linear(D, 6·D)`` for the whole
network, each block adds its own ``scale_shift_table`` ``(6, D)`` and ``chunk(6, dim=1)``s shift, scale and gate
for attention and MLP; self-attention over the latent patches (``qkv.reshape(B, N, 3, H, d).permute(2, 0, 3, 1,
4)``), cross-attention from the patches to the caption tokens (``q_linear``, ``kv_linear(cond).view(B, -1, 2, H,
d)``, ``unbind(2)``; the torch path, no xformers), ``scaled_dot_product_attention``; the final layer's
``t2i_modulate`` and the unpatchify ``einsum("nhwpqc->nchpwq")``.

Bugs: ``qkv-permute-tokens-as-heads``: the self-attention's ``qkv.reshape(B, N, 3, H, d)`` permuted ``(2, 0, 1,
3, 4)`` (patches where heads belong: attention runs across heads, inside each patch; the slip of a wrong permute
order); ``cross-out-reshape-without-transpose``: the cross-attention's output ``(B, H, N, d)`` ``reshape(B, -1,
C)``ed without ``transpose(1, 2)`` (the natural slip)."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn


def t2i_modulate(x, shift, scale):
    return x * (1 + scale) + shift


class TimestepEmbedder(nn.Module):
    def __init__(self, hidden_size, frequency_embedding_size=32):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(frequency_embedding_size, hidden_size), nn.SiLU(),
                                 nn.Linear(hidden_size, hidden_size))
        self.frequency_embedding_size = frequency_embedding_size

    @staticmethod
    def timestep_embedding(t, dim, max_period=10000):
        half = dim // 2
        freqs = torch.exp(-math.log(max_period) * torch.arange(start=0, end=half, dtype=torch.float32) / half)
        args = t[:, None].float() * freqs[None]
        return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)

    def forward(self, t):
        return self.mlp(self.timestep_embedding(t, self.frequency_embedding_size))


class Attention(nn.Module):
    def __init__(self, dim, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.head_dim, self.bug = num_heads, dim // num_heads, bug
        self.qkv, self.proj = nn.Linear(dim, dim * 3), nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim)
        if self.bug == "qkv-permute-tokens-as-heads":
            qkv = qkv.permute(2, 0, 1, 3, 4)
        else:
            qkv = qkv.permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        x = F.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(B, N, C))


class MultiHeadCrossAttention(nn.Module):
    def __init__(self, d_model, num_heads, bug=""):
        super().__init__()
        self.d_model, self.num_heads, self.head_dim, self.bug = d_model, num_heads, d_model // num_heads, bug
        self.q_linear, self.kv_linear = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model * 2)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x, cond):
        B, N, C = x.shape
        q = self.q_linear(x).view(B, -1, self.num_heads, self.head_dim)
        kv = self.kv_linear(cond).view(B, -1, 2, self.num_heads, self.head_dim)
        k, v = kv.unbind(2)
        x = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        if self.bug == "cross-out-reshape-without-transpose":
            x = x.reshape(B, -1, C)
        else:
            x = x.transpose(1, 2).reshape(B, -1, C)
        return self.proj(x)


class PixArtBlock(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.norm1 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(hidden_size, num_heads, bug=bug)
        self.cross_attn = MultiHeadCrossAttention(hidden_size, num_heads, bug=bug)
        self.norm2 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.fc1, self.fc2 = nn.Linear(hidden_size, 4 * hidden_size), nn.Linear(4 * hidden_size, hidden_size)
        self.scale_shift_table = nn.Parameter(torch.randn(6, hidden_size) / hidden_size ** 0.5)

    def forward(self, x, y, t):
        B, N, C = x.shape
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = (
            self.scale_shift_table[None] + t.reshape(B, 6, -1)).chunk(6, dim=1)
        x = x + gate_msa * self.attn(t2i_modulate(self.norm1(x), shift_msa, scale_msa)).reshape(B, N, C)
        x = x + self.cross_attn(x, y)
        h = t2i_modulate(self.norm2(x), shift_mlp, scale_mlp)
        return x + gate_mlp * self.fc2(F.gelu(self.fc1(h), approximate="tanh"))


class PixArt(nn.Module):
    def __init__(self, D, H, patch_size=2, in_channels=4, caption_channels=48, depth=2, bug=""):
        super().__init__()
        self.patch_size, self.out_channels = patch_size, in_channels
        self.x_embedder = nn.Conv2d(in_channels, D, kernel_size=patch_size, stride=patch_size)
        self.t_embedder = TimestepEmbedder(D)
        self.t_block = nn.Sequential(nn.SiLU(), nn.Linear(D, 6 * D))
        self.y_embedder = nn.Sequential(nn.Linear(caption_channels, D), nn.GELU(approximate="tanh"), nn.Linear(D, D))
        self.blocks = nn.ModuleList(PixArtBlock(D, H, bug=bug) for _ in range(depth))
        self.norm_final = nn.LayerNorm(D, elementwise_affine=False, eps=1e-6)
        self.linear = nn.Linear(D, patch_size * patch_size * in_channels)
        self.final_table = nn.Parameter(torch.randn(2, D) / D ** 0.5)

    def forward(self, x, timestep, y):
        h, w = x.shape[-2] // self.patch_size, x.shape[-1] // self.patch_size
        x = self.x_embedder(x).flatten(2).transpose(1, 2)  # (N, T, D)
        t = self.t_embedder(timestep)
        t0 = self.t_block(t)
        y = self.y_embedder(y)
        for block in self.blocks:
            x = block(x, y, t0)
        shift, scale = (self.final_table[None] + t[:, None]).chunk(2, dim=1)
        x = self.linear(t2i_modulate(self.norm_final(x), shift, scale))
        c, p = self.out_channels, self.patch_size
        x = x.reshape(x.shape[0], h, w, p, p, c)
        x = torch.einsum("nhwpqc->nchpwq", x)
        return x.reshape(x.shape[0], c, h * p, w * p)


BUGS = ("qkv-permute-tokens-as-heads", "cross-out-reshape-without-transpose")
TWINS = ()
DIMS = ("B=2 S=5 D=32 H=4 Hp=3 Wp=4",)
EQUAL = {"B=2 S=5 D=32 H=4 Hp=3 Wp=4": "B=4 S=4 D=32 H=4 Hp=2 Wp=2"}


def build(bug="", B=2, S=5, D=32, H=4, Hp=3, Wp=4):
    torch.manual_seed(0)
    inputs = (torch.randn(B, 4, 2 * Hp, 2 * Wp), torch.tensor([10.0, 500.0] * (B // 2) + [10.0] * (B % 2)),
              torch.randn(B, S, 48))
    return PixArt(D, H, bug=bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
