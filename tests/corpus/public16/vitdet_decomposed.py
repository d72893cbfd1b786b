"""facebookresearch/detectron2, detectron2/modeling/backbone/vit.py (``Attention``, ``Block``) and
detectron2/modeling/backbone/utils.py (``window_partition``, ``window_unpartition``, ``get_rel_pos``,
``add_decomposed_rel_pos``), v0.6: the input is channels-last ``(B, H, W, C)``; a windowed block pads to a multiple
of the window and partitions (``x.view(B, Hp // ws, ws, Wp // ws, ws, C).permute(0, 1, 3, 2, 4, 5).contiguous()
.view(-1, ws, ws, C)``), a global block attends over the whole map; ``qkv(x).reshape(B, H * W, 3, num_heads,
-1).permute(2, 0, 3, 1, 4)``, ``q, k, v = qkv.reshape(3, B * num_heads, H * W, -1).unbind(0)``; ``attn = (q *
scale) @ k.transpose(-2, -1)``; ``add_decomposed_rel_pos``: ``Rh = get_rel_pos(q_h, k_h, rel_pos_h)`` (``rel_pos[
(q_coords - k_coords) + (k_size - 1)]``), ``rel_h = torch.einsum("bhwc,hkc->bhwk", r_q, Rh)``, ``rel_w =
torch.einsum("bhwc,wkc->bhwk", r_q, Rw)``, ``attn.view(B, q_h, q_w, k_h, k_w) + rel_h[:, :, :, :, None] + rel_w[:,
:, :, None, :]``; softmax; ``(attn @ v).view(B, num_heads, H, W, -1).permute(0, 2, 3, 1, 4).reshape(B, H, W,
-1)``, ``proj``; ``window_unpartition`` views and permutes back and crops the padding. Here block 0 is windowed
(``window_size=2``) and block 1 global, over a ``Hp x Wp`` map.

Bugs (argument): ``rel-h-w-broadcast-swapped``: ``rel_h[:, :, :, None, :] + rel_w[:, :, :, :, None]`` (the two
``None`` slots exchanged: the height term added along the keys' width and the width term along their height; it
raises where the map is not square, and on a square map no shape shows it); ``unpartition-without-permute``:
``window_unpartition`` as ``windows.view(B, Hp, Wp, -1)`` (the windows laid back row-major without the
``view(B, Hp // ws, Wp // ws, ws, ws, -1).permute(0, 1, 3, 2, 4, 5)``)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


def window_partition(x, window_size):                                            # (B, H, W, C)
    B, H, W, C = x.shape
    pad_h, pad_w = (window_size - H % window_size) % window_size, (window_size - W % window_size) % window_size
    if pad_h > 0 or pad_w > 0:
        x = F.pad(x, (0, 0, 0, pad_w, 0, pad_h))
    Hp, Wp = H + pad_h, W + pad_w
    x = x.view(B, Hp // window_size, window_size, Wp // window_size, window_size, C)
    windows = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size, window_size, C)
    return windows, (Hp, Wp)


def window_unpartition(windows, window_size, pad_hw, hw, bug=""):                # (B*nW, ws, ws, C)
    Hp, Wp = pad_hw
    H, W = hw
    B = windows.shape[0] // (Hp * Wp // window_size // window_size)
    if bug == "unpartition-without-permute":
        x = windows.reshape(B, Hp, Wp, -1)
    else:
        x = windows.view(B, Hp // window_size, Wp // window_size, window_size, window_size, -1)
        x = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, Hp, Wp, -1)
    if Hp > H or Wp > W:
        x = x[:, :H, :W, :].contiguous()
    return x


def get_rel_pos(q_size, k_size, rel_pos):                                         # (2k-1, d)
    q_coords = torch.arange(q_size)[:, None] * max(k_size / q_size, 1.0)
    k_coords = torch.arange(k_size)[None, :] * max(q_size / k_size, 1.0)
    relative_coords = (q_coords - k_coords) + (k_size - 1) * max(q_size / k_size, 1.0)
    return rel_pos[relative_coords.long()]                                         # (q, k, d)


def add_decomposed_rel_pos(attn, q, rel_pos_h, rel_pos_w, q_size, k_size, bug=""):
    q_h, q_w = q_size
    k_h, k_w = k_size
    Rh = get_rel_pos(q_h, k_h, rel_pos_h)
    Rw = get_rel_pos(q_w, k_w, rel_pos_w)
    B, _, dim = q.shape
    r_q = q.reshape(B, q_h, q_w, dim)
    rel_h = torch.einsum("bhwc,hkc->bhwk", r_q, Rh)                                # (B*nH, q_h, q_w, k_h)
    rel_w = torch.einsum("bhwc,wkc->bhwk", r_q, Rw)                                # (B*nH, q_h, q_w, k_w)
    if bug == "rel-h-w-broadcast-swapped":
        attn = attn.view(B, q_h, q_w, k_h, k_w) + rel_h[:, :, :, None, :] + rel_w[:, :, :, :, None]
    else:
        attn = attn.view(B, q_h, q_w, k_h, k_w) + rel_h[:, :, :, :, None] + rel_w[:, :, :, None, :]
    return attn.view(B, q_h * q_w, k_h * k_w)


class Attention(nn.Module):
    def __init__(self, dim, num_heads, input_size, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        head_dim = dim // num_heads
        self.scale = head_dim**-0.5
        self.qkv, self.proj = nn.Linear(dim, dim * 3), nn.Linear(dim, dim)
        self.rel_pos_h = nn.Parameter(torch.randn(2 * input_size[0] - 1, head_dim) * 0.02)
        self.rel_pos_w = nn.Parameter(torch.randn(2 * input_size[1] - 1, head_dim) * 0.02)

    def forward(self, x):                                                          # (B, H, W, C)
        B, H, W, _ = x.shape
        qkv = self.qkv(x).reshape(B, H * W, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.reshape(3, B * self.num_heads, H * W, -1).unbind(0)          # (B*nH, HW, d)
        attn = (q * self.scale) @ k.transpose(-2, -1)                              # (B*nH, HW, HW)
        attn = add_decomposed_rel_pos(attn, q, self.rel_pos_h, self.rel_pos_w, (H, W), (H, W), self.bug)
        attn = attn.softmax(dim=-1)
        x = (attn @ v).view(B, self.num_heads, H, W, -1).permute(0, 2, 3, 1, 4).reshape(B, H, W, -1)
        return self.proj(x)


class Block(nn.Module):
    def __init__(self, dim, num_heads, window_size, input_size, bug=""):
        super().__init__()
        self.window_size, self.bug = window_size, bug
        self.norm1 = nn.LayerNorm(dim)
        size = input_size if window_size == 0 else (window_size, window_size)
        self.attn = Attention(dim, num_heads, size, bug)

    def forward(self, x):                                                          # (B, H, W, C)
        shortcut = x
        x = self.norm1(x)
        if self.window_size > 0:
            H, W = x.shape[1], x.shape[2]
            x, pad_hw = window_partition(x, self.window_size)
        x = self.attn(x)
        if self.window_size > 0:
            x = window_unpartition(x, self.window_size, pad_hw, (H, W), self.bug)
        return shortcut + x


class ViT(nn.Module):
    def __init__(self, dim, heads, grid, bug=""):
        super().__init__()
        self.blocks = nn.ModuleList([Block(dim, heads, 2, grid, bug), Block(dim, heads, 0, grid, bug)])

    def forward(self, x):                                                          # (B, Hp, Wp, C)
        for blk in self.blocks:
            x = blk(x)
        return x


BUGS = ("rel-h-w-broadcast-swapped", "unpartition-without-permute")
TWINS = ()
DIMS = ("B=3 D=32 H=4 Hp=4 Wp=6",)
EQUAL = {"B=3 D=32 H=4 Hp=4 Wp=6": "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=3, D=32, H=4, Hp=4, Wp=6):
    torch.manual_seed(0)
    return ViT(D, H, (Hp, Wp), bug).eval(), (torch.randn(B, Hp, Wp, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
