"""yitu-opensource/T2T-ViT, models/token_transformer.py (``Attention``, ``Token_transformer``) and models/t2t_vit.py
(``T2T_module``, the "transformer" tokens-to-token path), main: the soft split ``nn.Unfold(kernel_size=(7, 7),
stride=(4, 4), padding=(2, 2))`` read as tokens by ``.transpose(1, 2)``; a one-head ``Attention`` whose ``qkv``
maps ``dim`` to ``in_dim * 3``, ``reshape(B, N, 3, num_heads, in_dim).permute(2, 0, 3, 1, 4)``, ``(q * scale) @
k.transpose(-2, -1)``, ``softmax(dim=-1)``, ``(attn @ v).transpose(1, 2).reshape(B, N, in_dim)``, ``proj``, and
the skip taken from ``v.squeeze(1)`` (the input's width differs); the tokens folded back to an image by
``x.transpose(1, 2).reshape(B, C, int(np.sqrt(new_HW)), int(np.sqrt(new_HW)))``, soft split again
(``Unfold(3, stride=2, padding=1)``), a second ``Token_transformer`` and the ``project`` ``Linear``.

``scale`` here is ``in_dim ** -0.5`` (the width the scores are summed over); the public file computes
``head_dim = dim // num_heads`` from the unfolded input width (3·7·7) instead.

Bugs: ``scale-by-input-width``: that public line (``head_dim = dim // num_heads``, the width of the unfolded
patches, not of q and k); ``fold-without-transpose``: the tokens folded back to an image by ``x.reshape(B, C,
h, w)`` without the ``transpose(1, 2)`` (the slip of readers of the re-structurization step: tokens and channels
mixed)."""

import math
import sys

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, num_heads=1, in_dim=None, bug=""):
        super().__init__()
        self.num_heads = num_heads
        self.in_dim = in_dim
        head_dim = dim // num_heads if bug == "scale-by-input-width" else in_dim // num_heads
        self.scale = head_dim ** -0.5
        self.qkv = nn.Linear(dim, in_dim * 3, bias=False)
        self.proj = nn.Linear(in_dim, in_dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.in_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q * self.scale) @ k.transpose(-2, -1)
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, self.in_dim)
        x = self.proj(x)
        return v.squeeze(1) + x


class Token_transformer(nn.Module):
    def __init__(self, dim, in_dim, num_heads=1, bug=""):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, num_heads=num_heads, in_dim=in_dim, bug=bug)
        self.norm2 = nn.LayerNorm(in_dim)
        self.mlp = nn.Sequential(nn.Linear(in_dim, in_dim), nn.GELU(), nn.Linear(in_dim, in_dim))

    def forward(self, x):
        x = self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class T2T_module(nn.Module):
    def __init__(self, in_chans=3, embed_dim=32, token_dim=16, bug=""):
        super().__init__()
        self.bug = bug
        self.soft_split0 = nn.Unfold(kernel_size=(7, 7), stride=(4, 4), padding=(2, 2))
        self.soft_split1 = nn.Unfold(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))
        self.attention1 = Token_transformer(dim=in_chans * 7 * 7, in_dim=token_dim, num_heads=1, bug=bug)
        self.attention2 = Token_transformer(dim=token_dim * 3 * 3, in_dim=token_dim, num_heads=1, bug=bug)
        self.project = nn.Linear(token_dim * 3 * 3, embed_dim)

    def fold(self, x):
        B, new_HW, C = x.shape
        side = int(math.sqrt(new_HW))
        if self.bug == "fold-without-transpose":
            return x.reshape(B, C, side, side)
        return x.transpose(1, 2).reshape(B, C, side, side)

    def forward(self, x):
        x = self.soft_split0(x).transpose(1, 2)
        x = self.attention1(x)
        x = self.soft_split1(self.fold(x)).transpose(1, 2)
        x = self.attention2(x)
        x = self.soft_split1(self.fold(x)).transpose(1, 2)
        return self.project(x)


BUGS = ("scale-by-input-width", "fold-without-transpose")
TWINS = ()
DIMS = ("B=2 D=16 Hp=4 Wp=4",)
EQUAL = {"B=2 D=16 Hp=4 Wp=4": "B=4 D=16 Hp=4 Wp=4"}


def build(bug="", B=2, D=16, Hp=4):
    torch.manual_seed(0)
    model = T2T_module(embed_dim=32, token_dim=D, bug=bug).eval()
    return model, (torch.randn(B, 3, 4 * Hp, 4 * Hp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
