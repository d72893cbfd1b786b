"""microsoft/CSWin-Transformer, models/cswin.py (``LePEAttention``, ``img2windows``, ``windows2img``,
``CSWinBlock``): the fused ``qkv`` linear, ``chunk(3, dim=-1)``; the heads split in two branches, one
attending within horizontal stripes (``H_sp = split_size``, ``W_sp = W``), the other within vertical stripes
(``H_sp = H``, ``W_sp = split_size``), each on half the channels; ``img2windows``: ``view(B, C, H // H_sp, H_sp,
W // W_sp, W_sp).permute(0, 2, 4, 3, 5, 1).reshape(-1, H_sp * W_sp, C)``; ``im2cswin`` splits the heads
``reshape(-1, H_sp * W_sp, heads, C // heads).permute(0, 2, 1, 3)``; ``get_lepe``: v as an image per stripe, a
3x3 depthwise conv (``get_v``) added to the output; ``windows2img``: ``view(B, H // H_sp, W // W_sp, H_sp, W_sp,
-1).permute(0, 1, 3, 2, 4, 5).view(B, H, W, -1)``; the two branches concatenated on channels and projected.

Bugs (argument): ``windows2img-swapped``: ``windows2img`` called with ``H_sp`` and ``W_sp`` swapped (the
vertical branch's stripes put back as horizontal ones; a natural slip, as the two sizes travel as a pair and
the view still runs on this 4 x 6 map); ``lepe-heads-first``: the LePE conv output ``(B', C, H_sp, W_sp)``
split as if it were token-major, ``reshape(-1, H_sp * W_sp, heads, C // heads).permute(0, 2, 1, 3)`` (the
layout of ``im2cswin``'s input written onto a channel-major map: each token's positional term made of other
channels and pixels)."""

import sys

import torch
from torch import nn


def img2windows(img, H_sp, W_sp):                                                # (B, C, H, W)
    B, C, H, W = img.shape
    img = img.view(B, C, H // H_sp, H_sp, W // W_sp, W_sp)
    return img.permute(0, 2, 4, 3, 5, 1).contiguous().reshape(-1, H_sp * W_sp, C)


def windows2img(img_splits, H_sp, W_sp, H, W):                                   # (B*nW, H_sp*W_sp, C)
    B = int(img_splits.shape[0] / (H * W / H_sp / W_sp))
    img = img_splits.view(B, H // H_sp, W // W_sp, H_sp, W_sp, -1)
    return img.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1)


class LePEAttention(nn.Module):
    def __init__(self, dim, resolution, idx, split_size, num_heads, bug=""):
        super().__init__()
        self.dim, self.resolution, self.num_heads, self.bug = dim, resolution, num_heads, bug
        self.scale = (dim // num_heads) ** -0.5
        H, W = resolution
        self.H_sp, self.W_sp = (split_size, W) if idx == 0 else (H, split_size)
        self.get_v = nn.Conv2d(dim, dim, kernel_size=3, stride=1, padding=1, groups=dim)

    def im2cswin(self, x):                                                       # (B, L, C)
        B, N, C = x.shape
        H, W = self.resolution
        x = x.transpose(-2, -1).contiguous().view(B, C, H, W)
        x = img2windows(x, self.H_sp, self.W_sp)
        return x.reshape(-1, self.H_sp * self.W_sp, self.num_heads, C // self.num_heads).permute(0, 2, 1, 3)

    def get_lepe(self, x):                                                       # (B, L, C)
        B, N, C = x.shape
        H, W = self.resolution
        H_sp, W_sp = self.H_sp, self.W_sp
        x = x.transpose(-2, -1).contiguous().view(B, C, H, W)
        x = x.view(B, C, H // H_sp, H_sp, W // W_sp, W_sp)
        x = x.permute(0, 2, 4, 1, 3, 5).contiguous().reshape(-1, C, H_sp, W_sp)
        lepe = self.get_v(x)
        if self.bug == "lepe-heads-first":
            lepe = lepe.reshape(-1, H_sp * W_sp, self.num_heads, C // self.num_heads).permute(0, 2, 1, 3)
        else:
            lepe = lepe.reshape(-1, self.num_heads, C // self.num_heads, H_sp * W_sp).permute(0, 1, 3, 2)
        x = x.reshape(-1, self.num_heads, C // self.num_heads, H_sp * W_sp).permute(0, 1, 3, 2).contiguous()
        return x, lepe.contiguous()

    def forward(self, qkv):                                                      # (3, B, L, C)
        q, k, v = qkv[0], qkv[1], qkv[2]
        H, W = self.resolution
        B, L, C = q.shape
        q, k = self.im2cswin(q), self.im2cswin(k)
        v, lepe = self.get_lepe(v)
        attn = ((q * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1)
        x = (attn @ v) + lepe
        x = x.transpose(1, 2).reshape(-1, self.H_sp * self.W_sp, C)
        if self.bug == "windows2img-swapped":
            return windows2img(x, self.W_sp, self.H_sp, H, W).view(B, -1, C)
        return windows2img(x, self.H_sp, self.W_sp, H, W).view(B, -1, C)


class CSWinBlock(nn.Module):
    def __init__(self, dim, num_heads, resolution, split_size=2, bug=""):
        super().__init__()
        self.norm1, self.qkv, self.proj = nn.LayerNorm(dim), nn.Linear(dim, dim * 3), nn.Linear(dim, dim)
        self.attns = nn.ModuleList(
            LePEAttention(dim // 2, resolution, i, split_size, num_heads // 2, bug if i == 1 else "")
            for i in range(2))

    def forward(self, x):                                                        # (B, H*W, C)
        B, L, C = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(B, -1, 3, C).permute(2, 0, 1, 3)
        x1 = self.attns[0](qkv[:, :, :, : C // 2])
        x2 = self.attns[1](qkv[:, :, :, C // 2 :])
        return x + self.proj(torch.cat([x1, x2], dim=2))


BUGS = ("windows2img-swapped", "lepe-heads-first")
TWINS = ()
DIMS = ("B=2 T=24 D=32 H=4",)
EQUAL = {"B=2 T=24 D=32 H=4": "B=4 T=24 D=32 H=4"}


def build(bug="", B=2, T=24, D=32, H=4):
    torch.manual_seed(0)
    return CSWinBlock(D, H, (4, T // 4), bug=bug).eval(), (torch.randn(B, T, D),)   # a 4 x 6 map when T = 24


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
