"""hpcaitech/Open-Sora, opensora/models/stdit/stdit.py (v1.0.0, ``STDiTBlock``, ``t2i_modulate``) and
opensora/models/layers/blocks.py (``Attention``, ``MultiHeadCrossAttention``): Open-Sora's spatial-temporal DiT
block: video latents as tokens ``(B, F*S, C)`` (``F`` frames of ``S`` patches, frame-major), adaLN from the
``scale_shift_table + t.reshape(B, 6, -1)`` ``chunk(6, dim=1)``; spatial attention over each frame's patches
(``rearrange(x, "B (T S) C -> (B T) S C")``), cross-attention to caption tokens, temporal attention over each
patch's frames (``rearrange(x, "B (T S) C -> (B S) T C")``), both folded back; timm-style ``Attention``
(``qkv(x).reshape(B, N, 3, H, d).permute(2, 0, 3, 1, 4)``, ``scaled_dot_product_attention``).

Bugs: ``temporal-fold-patch-major``: the temporal fold written ``"B (S T) C -> (B S) T C"`` (the tokens read
patch-major though they are laid out frame-major: each "frame sequence" takes consecutive patches of one frame;
the slip of writing the fold's order from the output's order); ``spatial-unfold-patch-major``: the spatial
attention's output folded back with ``"(B T) S C -> B (S T) C"`` (frames and patches interleaved in the wrong
order)."""

import sys

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn


def t2i_modulate(x, shift, scale):
    return x * (1 + scale) + shift


class Attention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        x = F.scaled_dot_product_attention(q, k, v)
        x = x.transpose(1, 2).reshape(B, N, C)
        return self.proj(x)


class MultiHeadCrossAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.q_linear = nn.Linear(d_model, d_model)
        self.kv_linear = nn.Linear(d_model, d_model * 2)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x, cond):
        B, N, C = x.shape
        q = self.q_linear(x).view(B, N, self.num_heads, self.head_dim).transpose(1, 2)
        kv = self.kv_linear(cond).view(B, -1, 2, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        k, v = kv.unbind(0)
        x = F.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(B, N, C))


class STDiTBlock(nn.Module):
    def __init__(self, hidden_size, num_heads, d_s, d_t, bug=""):
        super().__init__()
        self.d_s, self.d_t, self.bug = d_s, d_t, bug
        self.norm1 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.norm2 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(hidden_size, num_heads)
        self.cross_attn = MultiHeadCrossAttention(hidden_size, num_heads)
        self.attn_temp = Attention(hidden_size, num_heads)
        self.mlp = nn.Sequential(nn.Linear(hidden_size, 4 * hidden_size), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * hidden_size, hidden_size))
        self.scale_shift_table = nn.Parameter(torch.randn(6, hidden_size) / hidden_size ** 0.5)

    def forward(self, x, y, t):
        B, N, C = x.shape
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = (
            self.scale_shift_table[None] + t.reshape(B, 6, -1)).chunk(6, dim=1)
        x_m = t2i_modulate(self.norm1(x), shift_msa, scale_msa)
        # spatial branch
        x_s = rearrange(x_m, "B (T S) C -> (B T) S C", T=self.d_t, S=self.d_s)
        x_s = self.attn(x_s)
        if self.bug == "spatial-unfold-patch-major":
            x_s = rearrange(x_s, "(B T) S C -> B (S T) C", T=self.d_t, S=self.d_s)
        else:
            x_s = rearrange(x_s, "(B T) S C -> B (T S) C", T=self.d_t, S=self.d_s)
        x = x + gate_msa * x_s
        # cross attn
        x = x + self.cross_attn(x, y)
        # temporal branch
        if self.bug == "temporal-fold-patch-major":
            x_t = rearrange(x, "B (S T) C -> (B S) T C", T=self.d_t, S=self.d_s)
        else:
            x_t = rearrange(x, "B (T S) C -> (B S) T C", T=self.d_t, S=self.d_s)
        x_t = self.attn_temp(x_t)
        x_t = rearrange(x_t, "(B S) T C -> B (T S) C", T=self.d_t, S=self.d_s)
        x = x + gate_msa * x_t
        return x + gate_mlp * self.mlp(t2i_modulate(self.norm2(x), shift_mlp, scale_mlp))


class STDiT(nn.Module):
    """Two blocks over patch tokens: the video ``(B, C_in, F, Hp, Wp)`` patched by a ``Conv3d`` with a (1, 2, 2)
    kernel, ``flatten(2).transpose(1, 2)`` to frame-major tokens; the timestep already embedded ``(B, D)``
    (``t_block``: SiLU, Linear to 6D)."""

    def __init__(self, hidden_size, num_heads, frames, side, depth=2, bug=""):
        super().__init__()
        self.x_embedder = nn.Conv3d(4, hidden_size, kernel_size=(1, 2, 2), stride=(1, 2, 2))
        self.t_block = nn.Sequential(nn.SiLU(), nn.Linear(hidden_size, 6 * hidden_size))
        self.blocks = nn.ModuleList(
            STDiTBlock(hidden_size, num_heads, (side // 2) ** 2, frames, bug) for _ in range(depth))
        self.final = nn.Linear(hidden_size, 4 * 2 * 2)

    def forward(self, x, y, t):
        x = self.x_embedder(x).flatten(2).transpose(1, 2)
        t0 = self.t_block(t)
        for block in self.blocks:
            x = block(x, y, t0)
        return self.final(x)


BUGS = ("temporal-fold-patch-major", "spatial-unfold-patch-major")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)


def build(bug="", B=2, T=6, D=64, H=4):
    """``T`` caption tokens; 3 frames of 4x4 latents (4 patches each)."""
    torch.manual_seed(0)
    model = STDiT(D, H, frames=3, side=4, bug=bug).eval()
    return model, (torch.randn(B, 4, 3, 4, 4), torch.randn(B, T, D), torch.randn(B, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
