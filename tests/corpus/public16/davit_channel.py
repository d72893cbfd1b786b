"""dingmyu/davit, timm/models/davit.py (timm 0.9, ``ChannelAttention``, ``ChannelBlock``, ``WindowAttention``):
DaViT alternates spatial window attention with channel group attention. ``ChannelAttention``: ``qkv =
self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)`` (``(3, B, G, N,
C/G)``), ``k = k * self.scale`` with ``scale = N ** -0.5`` (the tokens are the contracted axis here), ``attn =
k.transpose(-1, -2) @ v`` (``(B, G, C/G, C/G)``), ``attn.softmax(dim=-1)``, ``x = (attn @ q.transpose(-1,
-2)).transpose(-1, -2)`` (back to ``(B, G, N, C/G)``), ``x.transpose(1, 2).reshape(B, N, C)``, ``proj``. The
block here is a channel block after a plain (unwindowed) spatial block, as a 1-window stage.

Bugs (argument): ``out-not-transposed-back``: ``x = attn @ q.transpose(-1, -2)`` without the last
``.transpose(-1, -2)`` (``(B, G, C/G, N)`` then ``transpose(1, 2).reshape(B, N, C)``: tokens and channels
scrambled); ``channel-softmax-over-queries``: ``attn.softmax(dim=-2)``."""

import sys

import torch
from torch import nn


class SpatialAttention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads, self.scale = num_heads, (dim // num_heads) ** -0.5
        self.qkv, self.proj = nn.Linear(dim, dim * 3), nn.Linear(dim, dim)

    def forward(self, x):                                                          # (B, N, C)
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)                                                    # (B, H, N, d)
        attn = ((q * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1)            # (B, H, N, N)
        return self.proj((attn @ v).transpose(1, 2).reshape(B, N, C))


class ChannelAttention(nn.Module):
    def __init__(self, dim, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        self.qkv, self.proj = nn.Linear(dim, dim * 3), nn.Linear(dim, dim)

    def forward(self, x):                                                          # (B, N, C)
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)                                                    # (B, G, N, C/G)
        k = k * N**-0.5
        attn = k.transpose(-1, -2) @ v                                             # (B, G, C/G, C/G)
        attn = attn.softmax(dim=-2 if self.bug == "channel-softmax-over-queries" else -1)
        x = attn @ q.transpose(-1, -2)                                             # (B, G, C/G, N)
        if self.bug != "out-not-transposed-back":
            x = x.transpose(-1, -2)                                                # (B, G, N, C/G)
        x = x.transpose(1, 2).reshape(B, N, C)                                     # (B, N, C)
        return self.proj(x)


class DaVitStage(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.spatial = SpatialAttention(dim, heads)
        self.channel = ChannelAttention(dim, heads, bug)

    def forward(self, x):                                                          # (B, N, C)
        x = x + self.spatial(self.norm1(x))
        return x + self.channel(self.norm2(x))


BUGS = ("out-not-transposed-back", "channel-softmax-over-queries")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return DaVitStage(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
