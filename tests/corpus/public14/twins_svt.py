"""huggingface/pytorch-image-models, timm/models/twins.py (v1.0, ``LocallyGroupedAttn``, ``GlobalSubSampleAttn``):
tokens ``[B, N, C]`` of an ``H x W`` grid; the local attention views them ``(B, H, W, C)``, cuts ``ws x ws``
windows with ``reshape(B, _h, ws, _w, ws, C).transpose(2, 3)``, ``qkv(x).reshape(B, _h * _w, ws * ws, 3, heads,
d).permute(3, 0, 1, 4, 2, 5)``, attends inside each window and puts the windows back; the global attention takes
queries from every token and keys/values from a strided conv over the grid (``x.permute(0, 2, 1).reshape(B, C,
H, W)``, ``self.sr``, ``reshape(B, C, -1).permute(0, 2, 1)``, a LayerNorm).

Bugs (argument): ``sr-without-permute``: the tokens made an image with ``x.reshape(B, C, H, W)`` (the permute
dropped, the classic PVT/Twins port slip: the conv mixes tokens as channels);
``windows-not-transposed``: the local windows cut with ``reshape(B, _h, ws, _w, ws, C)`` and no ``transpose(2,
3)`` (a window's rows then come from one row band across the windows of that band)."""

import sys

import torch
from torch import nn


class LocallyGroupedAttn(nn.Module):
    def __init__(self, dim, heads, ws=2, bug=""):
        super().__init__()
        self.heads, self.head_dim, self.ws, self.bug = heads, dim // heads, ws, bug
        self.scale = self.head_dim**-0.5
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x, size):                                                  # (B, N, C)
        B, N, C = x.shape
        H, W = size
        ws = self.ws
        x = x.view(B, H, W, C)
        _h, _w = H // ws, W // ws
        x = x.reshape(B, _h, ws, _w, ws, C)
        if self.bug != "windows-not-transposed":
            x = x.transpose(2, 3)                                                # (B, _h, _w, ws, ws, C)
        qkv = self.qkv(x).reshape(B, _h * _w, ws * ws, 3, self.heads, self.head_dim).permute(3, 0, 1, 4, 2, 5)
        q, k, v = qkv.unbind(0)                                                  # (B, nW, h, ws*ws, d)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        attn = (attn @ v).transpose(2, 3).reshape(B, _h, _w, ws, ws, C)
        x = attn.transpose(2, 3).reshape(B, H, W, C)
        return self.proj(x.reshape(B, N, C))


class GlobalSubSampleAttn(nn.Module):
    def __init__(self, dim, heads, sr_ratio=2, bug=""):
        super().__init__()
        self.heads, self.head_dim, self.bug = heads, dim // heads, bug
        self.scale = self.head_dim**-0.5
        self.q, self.kv, self.proj = nn.Linear(dim, dim), nn.Linear(dim, 2 * dim), nn.Linear(dim, dim)
        self.sr, self.norm = nn.Conv2d(dim, dim, sr_ratio, stride=sr_ratio), nn.LayerNorm(dim)

    def forward(self, x, size):                                                  # (B, N, C)
        B, N, C = x.shape
        q = self.q(x).reshape(B, N, self.heads, self.head_dim).permute(0, 2, 1, 3)
        if self.bug == "sr-without-permute":
            x = x.reshape(B, C, *size)
        else:
            x = x.permute(0, 2, 1).reshape(B, C, *size)
        x = self.norm(self.sr(x).reshape(B, C, -1).permute(0, 2, 1))            # (B, N/4, C)
        kv = self.kv(x).reshape(B, -1, 2, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        k, v = kv.unbind(0)
        attn = ((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj(x)


class TwinsBlock(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.local_attn = LocallyGroupedAttn(dim, heads, bug=bug)
        self.global_attn = GlobalSubSampleAttn(dim, heads, bug=bug)

    def forward(self, x, size=(4, 6)):                                           # (B, N, C)
        x = x + self.local_attn(self.norm1(x), size)
        return x + self.global_attn(self.norm2(x), size)


BUGS = ("sr-without-permute", "windows-not-transposed")
TWINS = ()
DIMS = ("B=2 N=24 D=32 H=4",)
EQUAL = {"B=2 N=24 D=32 H=4": "B=4 N=24 D=32 H=4"}


def build(bug="", B=2, N=24, D=32, H=4):
    torch.manual_seed(0)
    return TwinsBlock(D, H, bug).eval(), (torch.randn(B, N, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
