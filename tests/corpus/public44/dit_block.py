"""facebookresearch/DiT, models.py (``TimestepEmbedder``, ``DiTBlock``, ``modulate``), main, with timm's
``Attention`` (timm/models/vision_transformer.py, the version DiT imports): the timestep ``t`` (one float per
image) turned into ``timestep_embedding(t, 256)`` (``freqs = exp(-log(max_period) * arange(0, half) / half)``,
``args = t[:, None].float() * freqs[None]``, ``cat([cos(args), sin(args)], dim=-1)``) and an MLP, the condition
``c`` ([B, D]); ``adaLN_modulation(c).chunk(6, dim=1)``, ``modulate(x, shift, scale) = x * (1 +
scale.unsqueeze(1)) + shift.unsqueeze(1)``, gates ``gate.unsqueeze(1) * attn(...)``; timm's attention
``qkv(x).reshape(B, N, 3, H, d).permute(2, 0, 3, 1, 4)``, ``q @ k.transpose(-2, -1) * scale``, softmax,
``(attn @ v).transpose(1, 2).reshape(B, N, C)``, ``proj``. Here the patch tokens enter already embedded.

Bug (a natural slip): ``qkv-permute-heads-last``: ``permute(2, 0, 1, 3, 4)`` for ``permute(2, 0, 3, 1, 4)`` (q, k
and v as ``[B, N, H, d]``: the scores are taken between the heads of each token)."""

import math
import sys

import torch
from torch import nn


def modulate(x, shift, scale):
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)        # (B, N, D)


class TimestepEmbedder(nn.Module):
    def __init__(self, hidden_size, frequency_embedding_size=256):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(frequency_embedding_size, hidden_size, bias=True), nn.SiLU(),
                                 nn.Linear(hidden_size, hidden_size, bias=True))
        self.frequency_embedding_size = frequency_embedding_size

    @staticmethod
    def timestep_embedding(t, dim, max_period=10000):
        half = dim // 2
        freqs = torch.exp(-math.log(max_period) * torch.arange(start=0, end=half, dtype=torch.float32) / half)
        args = t[:, None].float() * freqs[None]                       # (B, half)
        embedding = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)   # (B, dim)
        return embedding

    def forward(self, t):
        t_freq = self.timestep_embedding(t, self.frequency_embedding_size)
        return self.mlp(t_freq)                                        # (B, D)


class Attention(nn.Module):
    def __init__(self, dim, num_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim)   # (B, N, 3, H, d)
        if self.bug == "qkv-permute-heads-last":
            qkv = qkv.permute(2, 0, 1, 3, 4)                               # (3, B, N, H, d)
        else:
            qkv = qkv.permute(2, 0, 3, 1, 4)                               # (3, B, H, N, d)
        q, k, v = qkv.unbind(0)
        attn = (q @ k.transpose(-2, -1)) * self.scale                      # (B, H, N, N)
        attn = attn.softmax(dim=-1)
        x = attn @ v                                                       # (B, H, N, d)
        x = x.transpose(1, 2).reshape(B, N, C)                             # (B, N, D)
        return self.proj(x)


class DiTBlock(nn.Module):
    def __init__(self, hidden_size, num_heads, mlp_ratio=4.0, bug=""):
        super().__init__()
        self.norm1 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(hidden_size, num_heads, bug=bug)
        self.norm2 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        mlp_hidden_dim = int(hidden_size * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(hidden_size, mlp_hidden_dim), nn.GELU(approximate="tanh"),
                                 nn.Linear(mlp_hidden_dim, hidden_size))
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(hidden_size, 6 * hidden_size, bias=True))

    def forward(self, x, c):
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.adaLN_modulation(c).chunk(6, dim=1)
        x = x + gate_msa.unsqueeze(1) * self.attn(modulate(self.norm1(x), shift_msa, scale_msa))   # (B, N, D)
        x = x + gate_mlp.unsqueeze(1) * self.mlp(modulate(self.norm2(x), shift_mlp, scale_mlp))    # (B, N, D)
        return x


class DiT(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.t_embedder = TimestepEmbedder(hidden_size)
        self.block = DiTBlock(hidden_size, num_heads, bug=bug)

    def forward(self, x, t):
        c = self.t_embedder(t)                                             # (B, D)
        return self.block(x, c)


BUGS = ("qkv-permute-heads-last",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    model = DiT(D, H, bug=bug).eval()
    return model, (torch.randn(B, T, D), torch.rand(B) * 1000)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
