"""NVIDIA/physicsnemo, physicsnemo/nn/module/attention_layers.py (``EarthAttention3D``), transformer_layers.py
(``Transformer3DBlock``, the shifted block, without the pad/crop and the MLP) and utils/shift_window_mask.py
(``window_partition``, ``window_reverse``, ``get_shift_window_mask``), utils/utils.py (``get_earth_position_index``),
commit 94b3551 (revised from lizhuoq/WeatherLearn, after Pangu-Weather's pseudocode): tokens ``(B, Pl·Lat·Lon, C)``
of a pressure-level × latitude × longitude grid, ``view(B, Pl, Lat, Lon, C)``, ``torch.roll`` by ``-shift``;
``window_partition``: ``view(B, Pl/wpl, wpl, Lat/wlat, wlat, Lon/wlon, wlon, C).permute(0, 5, 1, 3, 2, 4, 6, 7)``,
``view(-1, nPl·nLat, wpl, wlat, wlon, C)``: the longitude windows folded into the batch ``(B·nLon)``, the
pressure/latitude windows kept as an axis of their own (``nW_``), each a "type of window" with its own earth-specific
bias: ``earth_position_bias_table[earth_position_index.view(-1)].view(N, N, type_of_windows, -1)`` and
``permute(3, 2, 0, 1)`` ``(nH, nW_, N, N)``; ``qkv(x).reshape(B_, nW_, N, 3, nH, C // nH).permute(3, 0, 4, 1, 2,
5)``, ``q * scale``, ``q @ k.transpose(-2, -1)`` ``(B_, nH, nW_, N, N)``, the bias ``unsqueeze(0)``; the shifted
windows' mask ``(nLon, nW_, N, N)`` added by ``attn.view(B_ // nLon, nLon, nH, nW_, N, N) +
mask.unsqueeze(1).unsqueeze(0)``, ``softmax``; ``(attn @ v).permute(0, 2, 3, 1, 4).reshape(B_, nW_, N, C)``,
``proj``; ``window_reverse`` and the roll back.

Bugs: ``merge-without-permute``: ``(attn @ v).reshape(B_, nW_, N, C)`` (the heads merged where they stand: each
"window" row holds pieces of every head); ``mask-fold-lon-outer``: ``attn.view(nLon, B_ // nLon, nH, nW_, N, N) +
mask.unsqueeze(1).unsqueeze(1)``, the ``(B·nLon)`` fold read longitude-major: the mask of longitude window ``l``
lands on windows ``(b·nLon + l)`` read as longitude ``(b·nLon + l) // B``; ``earth-bias-transposed``:
``permute(3, 2, 1, 0)`` for ``(3, 2, 0, 1)`` (the bias of (j, i) on the score of (i, j); the index is not
symmetric)."""

import sys

import torch
from torch import nn


def get_earth_position_index(window_size):
    win_pl, win_lat, win_lon = window_size
    coords_zi, coords_zj = torch.arange(win_pl), -torch.arange(win_pl) * win_pl
    coords_hi, coords_hj = torch.arange(win_lat), -torch.arange(win_lat) * win_lat
    coords_w = torch.arange(win_lon)
    coords_1 = torch.stack(torch.meshgrid([coords_zi, coords_hi, coords_w], indexing="ij"))
    coords_2 = torch.stack(torch.meshgrid([coords_zj, coords_hj, coords_w], indexing="ij"))
    coords = torch.flatten(coords_1, 1)[:, :, None] - torch.flatten(coords_2, 1)[:, None, :]
    coords = coords.permute(1, 2, 0).contiguous()                                    # (N, N, 3)
    coords[:, :, 2] += win_lon - 1
    coords[:, :, 1] *= 2 * win_lon - 1
    coords[:, :, 0] *= (2 * win_lon - 1) * win_lat * win_lat
    return coords.sum(-1)                                                            # (N, N)


def window_partition(x, window_size):
    B, Pl, Lat, Lon, C = x.shape
    win_pl, win_lat, win_lon = window_size
    x = x.view(B, Pl // win_pl, win_pl, Lat // win_lat, win_lat, Lon // win_lon, win_lon, C)
    return x.permute(0, 5, 1, 3, 2, 4, 6, 7).contiguous().view(
        -1, (Pl // win_pl) * (Lat // win_lat), win_pl, win_lat, win_lon, C)          # (B·nLon, nW_, wpl, wlat, wlon, C)


def window_reverse(windows, window_size, Pl, Lat, Lon):  # noqa: N803
    win_pl, win_lat, win_lon = window_size
    B = int(windows.shape[0] / (Lon / win_lon))
    x = windows.view(B, Lon // win_lon, Pl // win_pl, Lat // win_lat, win_pl, win_lat, win_lon, -1)
    return x.permute(0, 2, 4, 3, 5, 1, 6, 7).contiguous().view(B, Pl, Lat, Lon, -1)   # (B, Pl, Lat, Lon, C)


def get_shift_window_mask(input_resolution, window_size, shift_size):
    Pl, Lat, Lon = input_resolution
    (win_pl, win_lat, win_lon), (shift_pl, shift_lat, shift_lon) = window_size, shift_size
    img_mask = torch.zeros((1, Pl, Lat, Lon + shift_lon, 1))
    cnt = 0
    for pl in (slice(0, -win_pl), slice(-win_pl, -shift_pl), slice(-shift_pl, None)):
        for lat in (slice(0, -win_lat), slice(-win_lat, -shift_lat), slice(-shift_lat, None)):
            for lon in (slice(0, -win_lon), slice(-win_lon, -shift_lon), slice(-shift_lon, None)):
                img_mask[:, pl, lat, lon, :] = cnt
                cnt += 1
    mask_windows = window_partition(img_mask[:, :, :, :Lon, :], window_size)
    mask_windows = mask_windows.view(mask_windows.shape[0], mask_windows.shape[1], win_pl * win_lat * win_lon)
    attn_mask = mask_windows.unsqueeze(2) - mask_windows.unsqueeze(3)                # (nLon, nW_, N, N)
    return attn_mask.masked_fill(attn_mask != 0, -100.0).masked_fill(attn_mask == 0, 0.0)


class EarthAttention3D(nn.Module):
    def __init__(self, dim, input_resolution, window_size, num_heads, bug=""):
        super().__init__()
        self.window_size, self.num_heads, self.bug = window_size, num_heads, bug
        self.scale = (dim // num_heads) ** -0.5
        self.type_of_windows = (input_resolution[0] // window_size[0]) * (input_resolution[1] // window_size[1])
        self.earth_position_bias_table = nn.Parameter(0.02 * torch.randn(
            window_size[0] ** 2 * window_size[1] ** 2 * (window_size[2] * 2 - 1), self.type_of_windows, num_heads))
        self.register_buffer("earth_position_index", get_earth_position_index(window_size))
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x, mask):
        B_, nW_, N, C = x.shape
        qkv = self.qkv(x).reshape(B_, nW_, N, 3, self.num_heads, C // self.num_heads).permute(3, 0, 4, 1, 2, 5)
        q, k, v = qkv[0], qkv[1], qkv[2]                                              # (B·nLon, nH, nW_, N, d)
        attn = (q * self.scale) @ k.transpose(-2, -1)                                 # (B·nLon, nH, nW_, N, N)
        earth_position_bias = self.earth_position_bias_table[self.earth_position_index.view(-1)].view(
            N, N, self.type_of_windows, -1)                                          # (N, N, nW_, nH)
        order = (3, 2, 1, 0) if self.bug == "earth-bias-transposed" else (3, 2, 0, 1)
        attn = attn + earth_position_bias.permute(*order).contiguous().unsqueeze(0)   # (1, nH, nW_, N, N)
        nLon = mask.shape[0]
        if self.bug == "mask-fold-lon-outer":
            attn = attn.view(nLon, B_ // nLon, self.num_heads, nW_, N, N) + mask.unsqueeze(1).unsqueeze(1)
        else:
            attn = attn.view(B_ // nLon, nLon, self.num_heads, nW_, N, N) + mask.unsqueeze(1).unsqueeze(0)
        attn = self.softmax(attn.view(-1, self.num_heads, nW_, N, N))
        if self.bug == "merge-without-permute":
            x = (attn @ v).reshape(B_, nW_, N, C)                                    # read as (B·nLon, nW_, N, C)
        else:
            x = (attn @ v).permute(0, 2, 3, 1, 4).reshape(B_, nW_, N, C)             # (B·nLon, nW_, N, C)
        return self.proj(x)


class Transformer3DBlock(nn.Module):
    def __init__(self, dim, input_resolution, num_heads, window_size, shift_size, bug=""):
        super().__init__()
        self.input_resolution, self.window_size, self.shift_size = input_resolution, window_size, shift_size
        self.norm1 = nn.LayerNorm(dim)
        self.attn = EarthAttention3D(dim, input_resolution, window_size, num_heads, bug)
        self.register_buffer("attn_mask", get_shift_window_mask(input_resolution, window_size, shift_size))

    def forward(self, x):
        Pl, Lat, Lon = self.input_resolution
        B, L, C = x.shape
        shortcut = x
        x = self.norm1(x).view(B, Pl, Lat, Lon, C)
        shift_pl, shift_lat, shift_lon = self.shift_size
        shifted_x = torch.roll(x, shifts=(-shift_pl, -shift_lat, -shift_lon), dims=(1, 2, 3))
        x_windows = window_partition(shifted_x, self.window_size)
        win_pl, win_lat, win_lon = self.window_size
        x_windows = x_windows.view(x_windows.shape[0], x_windows.shape[1], win_pl * win_lat * win_lon, C)
        attn_windows = self.attn(x_windows, mask=self.attn_mask)                     # (B·nLon, nW_, N, C)
        attn_windows = attn_windows.view(attn_windows.shape[0], attn_windows.shape[1], win_pl, win_lat, win_lon, C)
        shifted_x = window_reverse(attn_windows, self.window_size, Pl=Pl, Lat=Lat, Lon=Lon)
        x = torch.roll(shifted_x, shifts=(shift_pl, shift_lat, shift_lon), dims=(1, 2, 3))
        return shortcut + x.reshape(B, Pl * Lat * Lon, C)                            # (B, Pl·Lat·Lon, C)


BUGS = ("merge-without-permute", "mask-fold-lon-outer", "earth-bias-transposed")
TWINS = ()
DIMS = ("B=2 Fp=2 Hp=6 Wp=20 D=32 H=4",)   # (Fp pressure levels, Hp latitudes, Wp longitudes)
EQUAL = {DIMS[0]: "B=4 Fp=2 Hp=4 Wp=16 D=32 H=4"}
WINDOW, SHIFT = (2, 2, 4), (1, 1, 2)


def build(bug="", B=2, Fp=2, Hp=6, Wp=20, D=32, H=4):  # noqa: N803
    """``B`` states on a grid of ``Fp`` pressure levels × ``Hp`` latitudes × ``Wp`` longitudes, as tokens ``(B,
    Fp·Hp·Wp, D)``; windows of 2 × 2 × 4 shifted by 1 × 1 × 2 (so ``Wp / 4`` longitude windows)."""
    torch.manual_seed(0)
    model = Transformer3DBlock(D, (Fp, Hp, Wp), H, WINDOW, SHIFT, bug).eval()
    return model, (torch.randn(B, Fp * Hp * Wp, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
