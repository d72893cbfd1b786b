"""SwinTransformer/Video-Swin-Transformer, mmaction/models/backbones/swin_transformer.py (``window_partition``,
``window_reverse``, ``WindowAttention3D``, ``SwinTransformerBlock3D``): a clip ``[B, D, H, W, C]`` (frames,
rows, columns) cyclically shifted by ``torch.roll(x, shifts=(-s_d, -s_h, -s_w), dims=(1, 2, 3))``, partitioned
``x.view(B, D // wd, wd, H // wh, wh, W // ww, ww, C).permute(0, 1, 3, 5, 2, 4, 6, 7).contiguous()
.view(-1, wd * wh * ww, C)``; ``WindowAttention3D``: ``qkv.reshape(B_, N, 3, heads, C // heads).permute(2, 0, 3, 1,
4)``, a 3-D relative position bias (``relative_position_index`` from ``coords_flatten[:, :, None] -
coords_flatten[:, None, :]``, the three offsets shifted and mixed with strides ``(2wh-1)(2ww-1)``, ``2ww-1``,
``1``); windows reversed and the shift rolled back by ``+s``. (The shifted-window attention mask is left out: one
block with the shift, whose bias alone is checked here.)

Bugs (argument): ``reverse-without-permute``: ``window_reverse`` as ``windows.view(B, D, H, W, -1)`` (the
permute back forgotten: the voxels of each window written as if they were a row of the clip);
``roll-back-same-sign``: the shift undone with ``torch.roll(x, shifts=(-s_d, -s_h, -s_w))`` again (the sign of
the reverse shift not flipped, the clip left shifted by 2s)."""

import sys

import torch
from torch import nn


def window_partition(x, ws):                                                     # (B, D, H, W, C)
    B, D, H, W, C = x.shape
    x = x.view(B, D // ws[0], ws[0], H // ws[1], ws[1], W // ws[2], ws[2], C)
    return x.permute(0, 1, 3, 5, 2, 4, 6, 7).contiguous().view(-1, ws[0] * ws[1] * ws[2], C)


def window_reverse(windows, ws, B, D, H, W, bug=""):                             # (B*nW, wd*wh*ww, C)
    if bug == "reverse-without-permute":
        return windows.view(B, D, H, W, -1)
    x = windows.view(B, D // ws[0], H // ws[1], W // ws[2], ws[0], ws[1], ws[2], -1)
    return x.permute(0, 1, 4, 2, 5, 3, 6, 7).contiguous().view(B, D, H, W, -1)


class WindowAttention3D(nn.Module):
    def __init__(self, dim, window_size, num_heads):
        super().__init__()
        self.window_size, self.num_heads = window_size, num_heads
        self.scale = (dim // num_heads) ** -0.5
        wd, wh, ww = window_size
        self.relative_position_bias_table = nn.Parameter(
            torch.randn((2 * wd - 1) * (2 * wh - 1) * (2 * ww - 1), num_heads) * 0.02)
        coords = torch.stack(torch.meshgrid(torch.arange(wd), torch.arange(wh), torch.arange(ww), indexing="ij"))
        coords_flatten = torch.flatten(coords, 1)
        relative_coords = (coords_flatten[:, :, None] - coords_flatten[:, None, :]).permute(1, 2, 0).contiguous()
        relative_coords[:, :, 0] += wd - 1
        relative_coords[:, :, 1] += wh - 1
        relative_coords[:, :, 2] += ww - 1
        relative_coords[:, :, 0] *= (2 * wh - 1) * (2 * ww - 1)
        relative_coords[:, :, 1] *= 2 * ww - 1
        self.register_buffer("relative_position_index", relative_coords.sum(-1))
        self.qkv, self.proj = nn.Linear(dim, dim * 3), nn.Linear(dim, dim)

    def forward(self, x):                                                        # (B*nW, N, C)
        B_, N, C = x.shape
        qkv = self.qkv(x).reshape(B_, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q * self.scale) @ k.transpose(-2, -1)
        bias = self.relative_position_bias_table[self.relative_position_index[:N, :N].reshape(-1)].reshape(N, N, -1)
        attn = attn + bias.permute(2, 0, 1).contiguous().unsqueeze(0)
        attn = attn.softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(B_, N, C))


class SwinTransformerBlock3D(nn.Module):
    def __init__(self, dim, num_heads, window_size=(2, 2, 2), shift_size=(1, 1, 1), bug=""):
        super().__init__()
        self.window_size, self.shift_size, self.bug = window_size, shift_size, bug
        self.norm1, self.attn = nn.LayerNorm(dim), WindowAttention3D(dim, window_size, num_heads)

    def forward(self, x):                                                        # (B, D, H, W, C)
        B, D, H, W, C = x.shape
        s = self.shift_size
        shortcut, x = x, self.norm1(x)
        shifted = torch.roll(x, shifts=(-s[0], -s[1], -s[2]), dims=(1, 2, 3))
        windows = window_partition(shifted, self.window_size)
        attn_windows = self.attn(windows)
        shifted = window_reverse(attn_windows, self.window_size, B, D, H, W, self.bug)
        back = (-s[0], -s[1], -s[2]) if self.bug == "roll-back-same-sign" else s
        return shortcut + torch.roll(shifted, shifts=back, dims=(1, 2, 3))


BUGS = ("reverse-without-permute", "roll-back-same-sign")
TWINS = ()
DIMS = ("B=3 D=32 H=4 Fp=2 Hp=6 Wp=10",)                                          # (the clip's grid declared)
EQUAL = {"B=3 D=32 H=4 Fp=2 Hp=6 Wp=10": "B=4 D=32 H=4 Fp=4 Hp=4 Wp=4"}


def build(bug="", B=3, D=32, H=4, Fp=2, Hp=6, Wp=10):
    torch.manual_seed(0)
    return SwinTransformerBlock3D(D, H, bug=bug).eval(), (torch.randn(B, Fp, Hp, Wp, D),)   # (B, Fp, Hp, Wp, C)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
