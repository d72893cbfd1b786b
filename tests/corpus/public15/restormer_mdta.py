"""swz30/Restormer, basicsr/models/archs/restormer_arch.py (``Attention``, the multi-Dconv head transposed
attention, MDTA): ``qkv = qkv_dwconv(qkv(x))`` (a 1x1 conv to ``3 * C`` channels, then a 3x3 depthwise conv),
``q, k, v = qkv.chunk(3, dim=1)``, each ``rearrange(q, 'b (head c) h w -> b head c (h w)')``; q and k
L2-normalised along the pixels (``F.normalize(q, dim=-1)``), ``attn = (q @ k.transpose(-2, -1)) *
self.temperature`` (a learned ``[heads, 1, 1]``), softmax over the last axis: attention over channels, each
channel a query; ``out = attn @ v``, ``rearrange(out, 'b head c (h w) -> b (head c) h w', h=h, w=w)``,
``project_out`` a 1x1 conv.

Bug (argument): ``back-w-h``: the pixels unflattened ``(w h)`` where they were flattened ``(h w)``
(``rearrange(out, 'b head c (w h) -> b (head c) h w')``, a transposed image on a non-square map).

Twin (correct): ``heads-back-swapped``: the output folded back with ``'b head c (h w) -> b (c head) h w'``
(channels interleaved across heads): each pixel keeps its own channels, only their order changes, and
``project_out`` is a learnt 1x1 conv, so a permutation of its input channels makes it the correct file."""

import sys

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        self.temperature = nn.Parameter(torch.ones(num_heads, 1, 1))
        self.qkv = nn.Conv2d(dim, dim * 3, kernel_size=1, bias=False)
        self.qkv_dwconv = nn.Conv2d(dim * 3, dim * 3, kernel_size=3, padding=1, groups=dim * 3, bias=False)
        self.project_out = nn.Conv2d(dim, dim, kernel_size=1, bias=False)

    def forward(self, x):                                                        # (B, C, H, W)
        b, c, h, w = x.shape
        qkv = self.qkv_dwconv(self.qkv(x))
        q, k, v = qkv.chunk(3, dim=1)
        q = rearrange(q, "b (head c) h w -> b head c (h w)", head=self.num_heads)
        k = rearrange(k, "b (head c) h w -> b head c (h w)", head=self.num_heads)
        v = rearrange(v, "b (head c) h w -> b head c (h w)", head=self.num_heads)
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        attn = (q @ k.transpose(-2, -1)) * self.temperature
        attn = attn.softmax(dim=-1)
        out = attn @ v                                                           # (B, heads, c, h*w)
        if self.bug == "heads-back-swapped":
            out = rearrange(out, "b head c (h w) -> b (c head) h w", head=self.num_heads, h=h, w=w)
        elif self.bug == "back-w-h":
            out = rearrange(out, "b head c (w h) -> b (head c) h w", head=self.num_heads, h=h, w=w)
        else:
            out = rearrange(out, "b head c (h w) -> b (head c) h w", head=self.num_heads, h=h, w=w)
        return self.project_out(out)


BUGS = ("back-w-h",)
TWINS = ("heads-back-swapped",)
DIMS = ("B=2 D=32 H=4", "B=2 D=32 H=4 Hp=3 Wp=5")   # (the grid not declared, declared)
EQUAL = {"B=2 D=32 H=4": "B=4 D=32 H=4", "B=2 D=32 H=4 Hp=3 Wp=5": "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=3, Wp=5):
    torch.manual_seed(0)
    return Attention(D, H, bug).eval(), (torch.randn(B, D, Hp, Wp),)             # a 3 x 5 feature map


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
