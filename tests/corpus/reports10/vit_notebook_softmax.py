"""nerminnuraydogan/vision-transformer issue #1 ("softmax along wrong dimension in the jupyter notebook"; the
author: "You are right — the softmax should be applied over the last dimension ``dim=-1``"): the notebook
walks one image through a ViT encoder block without a batch axis, the scores of all heads ``[H, N, N]``,
and normalised them with ``softmax(dim=1)``, over the queries: each key's column summed to one, and every
patch's output mixed the values with weights that do not sum to one.

The idiom: patches of one image ``[N, D]`` (a ``Linear`` patch embedding of flattened ``P x P x 3`` patches,
a learnt class token and position embedding), one fused ``qkv`` linear split ``reshape(N + 1, 3, H, d)
.permute(1, 2, 0, 3)``, ``q @ k.transpose(-2, -1) * d ** -0.5``, the heads merged with ``transpose(0, 1)
.reshape(N + 1, D)``. T is the number of patches (tokens T + 1 with the class token).

Bug (argument): ``softmax-over-queries``: ``softmax(dim=1)`` on ``[H, T + 1, T + 1]``."""

import sys

import torch
from torch import nn

BUGS = ("softmax-over-queries",)
TWINS = ()
DIMS = ("T=6 D=32 H=4",)


class Attention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.head_dim, self.bug = heads, dim // heads, bug
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):                                                              # (N + 1, D)
        n, dim = x.shape
        qkv = self.qkv(x).reshape(n, 3, self.heads, self.head_dim).permute(1, 2, 0, 3)  # (3, H, N + 1, d)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = q @ k.transpose(-2, -1) * self.head_dim ** -0.5                      # (H, N + 1, N + 1)
        attn = scores.softmax(dim=1 if self.bug == "softmax-over-queries" else -1)
        out = (attn @ v).transpose(0, 1).reshape(n, dim)                               # (N + 1, D)
        return self.proj(out)


class ViTBlock(nn.Module):
    def __init__(self, dim, heads, patches, patch_dim=12, bug=""):
        super().__init__()
        self.embed = nn.Linear(patch_dim, dim)
        self.cls_token = nn.Parameter(torch.randn(1, dim))
        self.pos_embed = nn.Parameter(torch.randn(patches + 1, dim))
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, bug)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, patches):                                                        # (N, P * P * 3)
        x = torch.cat([self.cls_token, self.embed(patches)], dim=0) + self.pos_embed   # (N + 1, D)
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


def build(bug="", T=6, D=32, H=4):
    torch.manual_seed(0)
    return ViTBlock(D, H, T, bug=bug).eval(), (torch.randn(T, 12),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
