"""google-research/scenic, ``scenic/projects/vivit/model.py`` (``EncoderFactorizedSelfAttentionBlock``, 2021),
written in PyTorch with einops as ports of ViViT model 3 do: each block attends over space within each frame,
then over time at each patch: ``rearrange(x, 'b t n d -> (b t) n d')``, spatial attention, ``rearrange(...,
'(b t) n d -> (b n) t d')``, temporal attention, back to ``b t n d``; each attention a timm-style ``qkv``
``Linear`` with ``reshape(B, N, 3, H, d).permute(2, 0, 3, 1, 4)``, ``q @ k.transpose(-2, -1) * scale``,
``softmax(dim=-1)``, ``(attn @ v).transpose(1, 2).reshape(B, N, C)``, ``proj``.

Bugs: ``regroup-without-permute``: the space-to-time regroup written ``x.reshape(b * n, t, d)`` straight from
``(b t) n d`` (the einops line replaced by a reshape, as hand ports do: frames and patches interleave);
``temporal-softmax-over-queries``: the temporal attention's ``softmax(dim=-2)`` (the natural slip of softmax's dim:
weights normalised over the queries, not the keys)."""

import sys

import torch
from einops import rearrange
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, num_heads, softmax_dim=-1):
        super().__init__()
        self.num_heads, self.softmax_dim = num_heads, softmax_dim
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)                                               # (B, H, N, d)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=self.softmax_dim)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj(x)


class FactorizedSelfAttentionBlock(nn.Module):
    def __init__(self, dim, num_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.norm_s, self.norm_t = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn_spatial = Attention(dim, num_heads)
        softmax_dim = -2 if bug == "temporal-softmax-over-queries" else -1
        self.attn_temporal = Attention(dim, num_heads, softmax_dim)

    def forward(self, x):
        b, t, n, d = x.shape
        x = rearrange(x, "b t n d -> (b t) n d")
        x = x + self.attn_spatial(self.norm_s(x))                             # ((B T), N, D)
        if self.bug == "regroup-without-permute":
            x = x.reshape(b * n, t, d)
        else:
            x = rearrange(x, "(b t) n d -> (b n) t d", b=b, t=t)
        x = x + self.attn_temporal(self.norm_t(x))                            # ((B N), T, D)
        return rearrange(x, "(b n) t d -> b t n d", b=b, n=n)


class ViViTFactorised(nn.Module):
    def __init__(self, dim, num_heads, frames, patches, bug=""):
        super().__init__()
        self.pos_embedding = nn.Parameter(torch.randn(1, frames, patches, dim) * 0.02)
        self.block = FactorizedSelfAttentionBlock(dim, num_heads, bug)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        x = x + self.pos_embedding
        return self.norm(self.block(x)).mean(dim=(1, 2))


BUGS = ("regroup-without-permute", "temporal-softmax-over-queries")
TWINS = ()
#: T: frames, N: patches per frame
DIMS = ("B=2 T=3 N=5 D=32 H=4",)


def build(bug="", B=2, T=3, N=5, D=32, H=4):
    torch.manual_seed(0)
    return ViViTFactorised(D, H, T, N, bug).eval(), (torch.randn(B, T, N, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
