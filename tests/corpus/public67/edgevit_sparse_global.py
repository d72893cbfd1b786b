"""saic-fi/edgevit, src/edgevit.py (``GlobalSparseAttn``, ``SelfAttn``; ECCV 2022): EdgeViT's global sparse
attention, the "G" of its local-global-local block. A ``(B, C, H, W)`` map gets a depthwise-conv position
encoding (``x + self.pos_embed(x)``), ``flatten(2).transpose(1, 2)`` to tokens and ``norm1``; inside the attention
the map is cut back to a grid (``x.transpose(1, 2).reshape(B, C, H, W)``) and sampled every ``sr_ratio`` pixels by
``nn.AvgPool2d(1, sr_ratio)`` (one delegate token per ``sr x sr`` block), flattened again; plain multi-head
attention among the delegates (``qkv(x).reshape(B, -1, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1,
4)``, ``(q @ k.transpose(-2, -1)) * self.scale``, ``softmax(dim=-1)``, ``(attn @ v).transpose(1, 2).reshape(B, -1,
C)``); the delegates are spread back over the full grid by a depthwise ``ConvTranspose2d(dim, dim, sr, stride=sr,
groups=dim)`` (``LocalProp``: ``x.permute(0, 2, 1).reshape(B, C, int(H / self.sr), int(W / self.sr))``, then
``reshape(B, C, -1).permute(0, 2, 1)``), ``norm``, ``proj``, and ``SelfAttn`` adds the residual and turns the
tokens back into a map.

Bugs: ``sampler-reshape-no-transpose``: ``x.reshape(B, C, H, W)`` straight from the tokens ``(B, N, C)`` (the
``transpose(1, 2)`` dropped: the "grid" the sampler strides over is runs of memory, so each delegate is a slice of
some token's channels); ``merge-without-transpose``: ``(attn @ v).reshape(B, -1, C)`` from ``(B, nh, n, hd)``;
``upsample-grid-hw-swapped``: ``reshape(B, C, int(W / self.sr), int(H / self.sr))`` before ``LocalProp`` (the
delegates laid on the transposed grid: each is spread over another block of pixels)."""

import sys

import torch
from torch import nn


class GlobalSparseAttn(nn.Module):
    def __init__(self, dim, num_heads=8, sr_ratio=2, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        head_dim = dim // num_heads
        self.scale = head_dim ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=False)
        self.proj = nn.Linear(dim, dim)
        self.sr = sr_ratio
        self.sampler = nn.AvgPool2d(1, sr_ratio)
        self.LocalProp = nn.ConvTranspose2d(dim, dim, sr_ratio, stride=sr_ratio, groups=dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x, H: int, W: int):                                           # (B, N, C)
        B, N, C = x.shape
        if self.bug == "sampler-reshape-no-transpose":
            x = x.reshape(B, C, H, W)                                                # (B, C, H, W)
        else:
            x = x.transpose(1, 2).reshape(B, C, H, W)                                # (B, C, H, W)
        x = self.sampler(x)                                                          # (B, C, H/sr, W/sr)
        x = x.flatten(2).transpose(1, 2)                                             # (B, n, C)
        qkv = self.qkv(x).reshape(B, -1, 3, self.num_heads, C // self.num_heads)     # (B, n, 3, nh, hd)
        qkv = qkv.permute(2, 0, 3, 1, 4)                                             # (3, B, nh, n, hd)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q @ k.transpose(-2, -1)) * self.scale                                # (B, nh, n, n)
        attn = attn.softmax(dim=-1)
        if self.bug == "merge-without-transpose":
            x = (attn @ v).reshape(B, -1, C)                                         # (B, n, C)
        else:
            x = (attn @ v).transpose(1, 2).reshape(B, -1, C)                         # (B, n, C)
        if self.bug == "upsample-grid-hw-swapped":
            x = x.permute(0, 2, 1).reshape(B, C, int(W / self.sr), int(H / self.sr))   # (B, C, W/sr, H/sr)
        else:
            x = x.permute(0, 2, 1).reshape(B, C, int(H / self.sr), int(W / self.sr))   # (B, C, H/sr, W/sr)
        x = self.LocalProp(x)                                                        # (B, C, H, W)
        x = x.reshape(B, C, -1).permute(0, 2, 1)                                     # (B, N, C)
        x = self.norm(x)
        return self.proj(x)


class SelfAttn(nn.Module):
    def __init__(self, dim, num_heads, sr_ratio=2, bug=""):
        super().__init__()
        self.pos_embed = nn.Conv2d(dim, dim, 3, padding=1, groups=dim)
        self.norm1 = nn.LayerNorm(dim)
        self.attn = GlobalSparseAttn(dim, num_heads, sr_ratio, bug)

    def forward(self, x):                                                            # (B, C, H, W)
        x = x + self.pos_embed(x)
        B, N, H, W = x.shape
        x = x.flatten(2).transpose(1, 2)                                             # (B, H·W, C)
        x = x + self.attn(self.norm1(x), H, W)
        return x.transpose(1, 2).reshape(B, N, H, W)                                 # (B, C, H, W)


BUGS = ("sampler-reshape-no-transpose", "merge-without-transpose", "upsample-grid-hw-swapped")
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=4 Wp=6",)   # (sr_ratio 2: a 2 x 3 grid of delegates)
EQUAL = {DIMS[0]: "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=4, Wp=6):  # noqa: N803
    torch.manual_seed(0)
    model = SelfAttn(D, H, sr_ratio=2, bug=bug).eval()
    return model, (torch.randn(B, D, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
