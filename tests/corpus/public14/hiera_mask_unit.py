"""facebookresearch/hiera, hiera/hiera.py (v0.1.2, ``MaskUnitAttention``): one ``qkv`` Linear, the tokens laid
out with the mask units unrolled (the unit index fastest), ``reshape(B, -1, num_windows, 3, heads, head_dim)
.permute(3, 0, 4, 2, 1, 5)``, queries max-pooled over ``q_stride`` with ``view(B, heads, num_windows, q_stride,
-1, head_dim).max(dim=3)``, attention inside each mask unit, then ``x.transpose(1, 3).reshape(B, -1, dim_out)``.

Bugs (argument): ``out-transpose-1-2``: the output put back with ``transpose(1, 2)`` (heads and mask units
swapped, the slip of reading ``(B, heads, T, d) -> (B, T, heads, d)`` from 4-D code onto the 5-D layout: each
output token gathers one head of several units)."""

import sys

import torch
from torch import nn


class MaskUnitAttention(nn.Module):
    def __init__(self, dim, heads, q_stride, window_size, bug=""):
        super().__init__()
        self.heads, self.head_dim, self.bug = heads, dim // heads, bug
        self.q_stride, self.window_size = q_stride, window_size
        self.scale = self.head_dim**-0.5
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):                                                        # (B, N, D)
        B, N, _ = x.shape
        num_windows = N // (self.q_stride * self.window_size)
        qkv = self.qkv(x).reshape(B, -1, num_windows, 3, self.heads, self.head_dim).permute(3, 0, 4, 2, 1, 5)
        q, k, v = qkv[0], qkv[1], qkv[2]                                         # (B, h, nW, N/nW, d)
        q = q.view(B, self.heads, num_windows, self.q_stride, -1, self.head_dim).max(dim=3).values
        attn = (q * self.scale) @ k.transpose(-1, -2)                            # (B, h, nW, N/(s nW), N/nW)
        attn = attn.softmax(dim=-1)
        x = attn @ v                                                             # (B, h, nW, N/(s nW), d)
        x = x.transpose(1, 2) if self.bug == "out-transpose-1-2" else x.transpose(1, 3)
        return self.proj(x.reshape(B, -1, self.heads * self.head_dim))


class HieraStage(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.attn = MaskUnitAttention(dim, heads, q_stride=2, window_size=2, bug=bug)

    def forward(self, x):
        return self.attn(self.norm(x))


BUGS = ("out-transpose-1-2",)
TWINS = ()
DIMS = ("B=2 T=8 D=32 H=4",)
EQUAL = {"B=2 T=8 D=32 H=4": "B=4 T=4 D=32 H=4"}


def build(bug="", B=2, T=8, D=32, H=4):
    torch.manual_seed(0)
    return HieraStage(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
