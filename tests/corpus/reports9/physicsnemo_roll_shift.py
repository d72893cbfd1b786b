"""NVIDIA/physicsnemo issue #1399 ("Incorrect shift parameter in torch.roll inside forward()", labelled bug):
the shifted-window transformer block on a latitude-longitude grid rolled its input with
``torch.roll(x, shifts=(-shift_lat, -shift_lat), dims=(1, 2))``: the longitude axis shifted by the latitude's
shift. The windows are not square (here 2 x 4, shifts 1 and 2), so the longitude axis is rolled by the wrong
amount; the window mask (built for shifts ``(shift_lat, shift_lon)``) no longer separates the wrapped-around
columns, and the roll back, ``shifts=(shift_lat, shift_lon)``, leaves every row moved one column.

The idiom (Swin / Pangu-Weather): the tokens ``(B, Lat·Lon, C)`` viewed ``(B, Lat, Lon, C)``, rolled,
partitioned into windows with ``view`` and ``permute(0, 1, 3, 2, 4, 5)``, window attention ``(B·nW, H, N, d)``
with the shifted windows' additive ``-100`` mask, windows merged back, rolled back and added to the tokens.
The grid is 4 x 8 (T = 32).

Bug (argument): ``lat-shift-twice``: ``shifts=(-shift_lat, -shift_lat)``."""

import sys

import torch
from torch import nn

BUGS = ("lat-shift-twice",)
TWINS = ()
DIMS = ("B=2 T=32 D=24 H=4",)
EQUAL = {"B=2 T=32 D=24 H=4": "B=4 T=32 D=24 H=4"}   # (the grid fixes T: B = H = 4 only)
LAT, LON, WIN = 4, 8, (2, 4)


def window_partition(x, win):
    b, lat, lon, c = x.shape
    x = x.view(b, lat // win[0], win[0], lon // win[1], win[1], c)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, win[0] * win[1], c)                 # (B·nW, N, C)


def window_reverse(windows, win, lat, lon):
    b = windows.shape[0] // ((lat // win[0]) * (lon // win[1]))
    x = windows.view(b, lat // win[0], lon // win[1], win[0], win[1], -1)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(b, lat, lon, -1)                         # (B, Lat, Lon, C)


def shifted_window_mask(lat, lon, win, shift):
    img = torch.zeros(1, lat, lon, 1)
    cnt = 0
    for hs in (slice(0, -win[0]), slice(-win[0], -shift[0]), slice(-shift[0], None)):
        for ws in (slice(0, -win[1]), slice(-win[1], -shift[1]), slice(-shift[1], None)):
            img[:, hs, ws, :] = cnt
            cnt += 1
    ids = window_partition(img, win).squeeze(-1)                                        # (nW, N)
    mask = ids.unsqueeze(1) - ids.unsqueeze(2)                                          # (nW, N, N)
    return mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)


class WindowAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.scale = heads, (dim // heads) ** -0.5
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x, mask):
        bw, n, c = x.shape
        qkv = self.qkv(x).reshape(bw, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]                                                # (B·nW, H, N, d)
        attn = (q * self.scale) @ k.transpose(-2, -1)                                   # (B·nW, H, N, N)
        nw = mask.shape[0]
        attn = attn.view(bw // nw, nw, self.heads, n, n) + mask.unsqueeze(1).unsqueeze(0)
        attn = attn.view(-1, self.heads, n, n).softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(bw, n, c))                 # (B·nW, N, C)


class ShiftedBlock(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.bug = bug
        self.norm = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, heads)
        self.shift = (WIN[0] // 2, WIN[1] // 2)
        self.register_buffer("mask", shifted_window_mask(LAT, LON, WIN, self.shift))

    def forward(self, x):                                                               # (B, T, C)
        b, _, c = x.shape
        shift_lat, shift_lon = self.shift
        h = self.norm(x).view(b, LAT, LON, c)                                           # (B, Lat, Lon, C)
        if self.bug == "lat-shift-twice":
            h = torch.roll(h, shifts=(-shift_lat, -shift_lat), dims=(1, 2))
        else:
            h = torch.roll(h, shifts=(-shift_lat, -shift_lon), dims=(1, 2))
        windows = self.attn(window_partition(h, WIN), self.mask)
        h = window_reverse(windows, WIN, LAT, LON)
        h = torch.roll(h, shifts=(shift_lat, shift_lon), dims=(1, 2))
        return x + h.reshape(b, LAT * LON, c)                                           # (B, T, C)


def build(bug="", B=2, D=24, H=4):
    torch.manual_seed(0)
    return ShiftedBlock(D, H, bug).eval(), (torch.randn(B, LAT * LON, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
