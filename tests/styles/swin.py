"""Swin Transformer window attention: window partition by view/permute, roll for shifted windows, a
relative position bias table, and the shifted-window mask (-100) added per window."""

import math

import torch
from torch import nn

SIZES = [
    {"B": 2, "T": 16, "D": 32, "H": 4},   # 4x4 tokens, 2x2 windows: N == H == 4, d_k == 8
    {"B": 2, "T": 16, "D": 16, "H": 4},   # T == D, N == H == d_k == 4
    {"B": 1, "T": 64, "D": 16, "H": 2},   # 8x8 tokens, 4x4 windows: N == T / 4
]


def window_partition(x, ws):
    B, Hh, Ww, C = x.shape                                                       # (B, Hh, Ww, D)
    x = x.view(B, Hh // ws, ws, Ww // ws, ws, C)                                 # (B, nH, ws, nW, ws, D)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, ws * ws, C)         # (B*nW, N, D)


def window_reverse(windows, ws, Hh, Ww):
    B = int(windows.shape[0] / (Hh * Ww / ws / ws))
    x = windows.view(B, Hh // ws, Ww // ws, ws, ws, -1)                          # (B, nH, nW, ws, ws, D)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, Hh, Ww, -1)          # (B, Hh, Ww, D)


class WindowAttention(nn.Module):
    def __init__(self, dim, window_size, num_heads):
        super().__init__()
        self.ws, self.num_heads = window_size, num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.relative_position_bias_table = nn.Parameter(0.02 * torch.randn((2 * window_size - 1) ** 2, num_heads))
        axis = torch.arange(window_size)
        coords = torch.stack(torch.meshgrid(axis, axis, indexing="ij"))          # (2, ws, ws)
        coords = coords.flatten(1)                                               # (2, N)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0).contiguous()  # (N, N, 2)
        rel[:, :, 0] += window_size - 1
        rel[:, :, 1] += window_size - 1
        rel[:, :, 0] *= 2 * window_size - 1
        self.register_buffer("relative_position_index", rel.sum(-1))             # (N, N)
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, mask=None):
        B_, N, C = x.shape                                                       # (B*nW, N, D)
        qkv = self.qkv(x).reshape(B_, N, 3, self.num_heads, C // self.num_heads)  # (B*nW, N, 3, H, d_k)
        qkv = qkv.permute(2, 0, 3, 1, 4)                                         # (3, B*nW, H, N, d_k)
        q, k, v = qkv[0], qkv[1], qkv[2]                                         # 3 x (B*?, H, ?, d_k) [v]
        q = q * self.scale
        attn = q @ k.transpose(-2, -1)                                           # (B*?, H, ?, ?) [scores]
        index = self.relative_position_index.view(-1)                            # (N*N)
        bias = self.relative_position_bias_table[index].view(N, N, -1)           # (N, N, H)
        attn = attn + bias.permute(2, 0, 1).contiguous().unsqueeze(0)            # (B*nW, H, N, N)
        if mask is not None:
            nW = mask.shape[0]
            attn = attn.view(B_ // nW, nW, self.num_heads, N, N)                 # (B, nW, H, N, N)
            attn = attn + mask.unsqueeze(1).unsqueeze(0)                         # (B, nW, H, N, N)
            attn = attn.view(-1, self.num_heads, N, N)                           # (B*nW, H, N, N)
        attn = attn.softmax(dim=-1)                                              # (B*nW, H, N, N)
        x = (attn @ v).transpose(1, 2).reshape(B_, N, C)                         # (B*nW, N, D)
        return self.proj(x)                                                      # (B*nW, N, D)


def shifted_window_mask(Hh, Ww, ws, shift):
    img = torch.zeros(1, Hh, Ww, 1)
    cnt = 0
    for hs in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
        for wsl in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
            img[:, hs, wsl, :] = cnt
            cnt += 1
    windows = window_partition(img, ws).view(-1, ws * ws)                        # (nW, N)
    mask = windows.unsqueeze(1) - windows.unsqueeze(2)                           # (nW, N, N)
    return mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)


class SwinBlock(nn.Module):
    def __init__(self, dim, resolution, num_heads, window_size, shift):
        super().__init__()
        self.resolution, self.ws, self.shift = resolution, window_size, shift
        self.norm = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, window_size, num_heads)
        mask = shifted_window_mask(*resolution, window_size, shift) if shift else None
        self.register_buffer("attn_mask", mask)

    def forward(self, x):
        Hh, Ww = self.resolution
        B, L, C = x.shape                                                        # (B, T, D)
        shortcut = x
        x = self.norm(x).view(B, Hh, Ww, C)                                      # (B, Hh, Ww, D)
        if self.shift:
            x = torch.roll(x, shifts=(-self.shift, -self.shift), dims=(1, 2))
        windows = window_partition(x, self.ws)                                   # (B*nW, N, D)
        out = self.attn(windows, mask=self.attn_mask)                            # (B*nW, N, D)
        out = out.view(-1, self.ws, self.ws, C)                                  # (B*nW, ws, ws, D)
        x = window_reverse(out, self.ws, Hh, Ww)                                 # (B, Hh, Ww, D)
        if self.shift:
            x = torch.roll(x, shifts=(self.shift, self.shift), dims=(1, 2))
        return shortcut + x.view(B, Hh * Ww, C)                                  # (B, T, D) [merged]


def build(dims):
    torch.manual_seed(0)
    side = math.isqrt(dims["T"])
    ws = side // 2
    model = SwinBlock(dims["D"], (side, side), dims["H"], window_size=ws, shift=ws // 2)
    return model.eval(), (torch.randn(dims["B"], dims["T"], dims["D"]),)
