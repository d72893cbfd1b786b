"""timm, timm/models/volo.py (v0.9.16, ``OutlookAttention``, ``Outlooker``, ``PatchEmbed``): VOLO's outlook
attention on a channels-last ``(B, Hp, Wp, C)`` map. ``v = self.v(x).permute(0, 3, 1, 2)``, ``nn.Unfold(3,
padding=1)`` and ``reshape(B, H, C/H, 3·3, Hp·Wp).permute(0, 1, 4, 3, 2)`` to ``(B, H, N, 9, C/H)``; the
attention is no product of q and k: ``AvgPool2d`` (stride 1 here) then one ``Linear(C, H·9·9)`` per position,
``reshape(B, N, H, 9, 9).permute(0, 2, 1, 3, 4)``, ``* scale``, ``softmax(dim=-1)``; ``(attn @ v).permute(0, 1,
4, 3, 2).reshape(B, C·9, N)`` and ``F.fold`` back to ``(B, C, Hp, Wp)``, ``permute(0, 2, 3, 1)``, ``proj``.

Bugs: ``fold-without-permute``: ``(attn @ v).reshape(B, C·9, N)`` with the ``permute(0, 1, 4, 3, 2)`` dropped
(positions read as channels for ``fold``); ``attn-heads-inner``: the generated weights ``reshape(B, N, 9, 9,
H).permute(0, 4, 1, 2, 3)`` (the slip of putting the heads last, so each head's weights are strided pieces of
every head's block).
"""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn


class OutlookAttention(nn.Module):
    def __init__(self, dim, num_heads, kernel_size=3, padding=1, stride=1, bug=""):
        super().__init__()
        head_dim = dim // num_heads
        self.num_heads, self.kernel_size, self.padding, self.stride, self.bug = \
            num_heads, kernel_size, padding, stride, bug
        self.scale = head_dim ** -0.5
        self.v = nn.Linear(dim, dim, bias=False)
        self.attn = nn.Linear(dim, kernel_size ** 4 * num_heads)
        self.proj = nn.Linear(dim, dim)
        self.unfold = nn.Unfold(kernel_size=kernel_size, padding=padding, stride=stride)
        self.pool = nn.AvgPool2d(kernel_size=stride, stride=stride, ceil_mode=True)

    def forward(self, x):
        B, H, W, C = x.shape
        kk = self.kernel_size * self.kernel_size
        v = self.v(x).permute(0, 3, 1, 2)                                   # B, C, H, W
        h, w = math.ceil(H / self.stride), math.ceil(W / self.stride)
        v = self.unfold(v).reshape(B, self.num_heads, C // self.num_heads, kk, h * w)
        v = v.permute(0, 1, 4, 3, 2)                                        # B, heads, N, kxk, C/heads
        attn = self.pool(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
        if self.bug == "attn-heads-inner":
            attn = self.attn(attn).reshape(B, h * w, kk, kk, self.num_heads).permute(0, 4, 1, 2, 3)
        else:
            attn = self.attn(attn).reshape(B, h * w, self.num_heads, kk, kk).permute(0, 2, 1, 3, 4)
        attn = (attn * self.scale).softmax(dim=-1)                         # B, heads, N, kxk, kxk
        x = attn @ v
        if self.bug != "fold-without-permute":
            x = x.permute(0, 1, 4, 3, 2)
        x = x.reshape(B, C * kk, h * w)
        x = F.fold(x, output_size=(H, W), kernel_size=self.kernel_size, padding=self.padding, stride=self.stride)
        return self.proj(x.permute(0, 2, 3, 1))


class Outlooker(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = OutlookAttention(dim, heads, bug=bug)
        self.fc1, self.fc2 = nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class VOLOStage(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, kernel_size=4, stride=4)
        self.block = Outlooker(dim, heads, bug)
        self.norm = nn.LayerNorm(dim)

    def forward(self, pixel_values):
        x = self.patch_embed(pixel_values).permute(0, 2, 3, 1)              # B, Hp, Wp, C
        return self.norm(self.block(x))


BUGS = ("fold-without-permute", "attn-heads-inner")
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=3 Wp=5",)
EQUAL = {"B=2 D=32 H=4 Hp=3 Wp=5": "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=3, Wp=5):
    torch.manual_seed(0)
    return VOLOStage(D, H, bug).eval(), (torch.randn(B, 3, 4 * Hp, 4 * Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
