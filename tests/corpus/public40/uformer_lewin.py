"""ZhendongWang6/Uformer, model.py (main, ``InputProj``, ``LinearProjection``, ``WindowAttention``,
``window_partition``, ``window_reverse``, ``LeWinTransformerBlock``): Uformer's locally-enhanced window block.
``InputProj``: ``Conv2d(3, C, 3, padding=1)`` then ``flatten(2).transpose(1, 2)``; the block views the tokens
``(B, H, W, C)``, ``window_partition`` (``view(B, H // ws, ws, W // ws, ws, C).permute(0, 1, 3, 2, 4, 5)
.contiguous().view(-1, ws, ws, C)``), ``view(-1, ws * ws, C)``, adds the learned ``modulator`` (an
``nn.Embedding(ws * ws, C)`` whose ``weight`` is added to every window); ``LinearProjection``: ``to_q`` and
``to_kv``, ``reshape(B_, N, 1, heads, C // heads).permute(2, 0, 3, 1, 4)`` and ``reshape(B_, N, 2, heads, C //
heads).permute(2, 0, 3, 1, 4)``; ``q * scale @ k.transpose(-2, -1)`` plus the relative position bias (a ``((2ws -
1)^2, heads)`` table read by ``relative_position_index.view(-1)``, ``view(N, N, -1).permute(2, 0, 1)``, widened by
einops ``repeat(..., 'nH l c -> nH l (c d)', d=ratio)``), softmax, ``(attn @ v).transpose(1, 2).reshape(B_, N,
C)``, ``proj``; ``window_reverse`` and the residual.

Bugs: ``reverse-without-permute``: ``window_reverse`` written as ``windows.view(B, H, W, -1)`` (the permute back
forgotten: windows laid out as strips of the image, the classic Swin-port slip); ``modulator-over-channels``: the
modulator's table read transposed, ``self.modulator.weight.t()`` reshaped back, ``.reshape(ws * ws, C)`` (a
``[C, N]`` table flattened into ``[N, C]``: positions and channels mixed; the slip of a port that stores the
modulator channels-first, as a ``Conv`` weight would be)."""

import sys

import torch
from einops import repeat
from torch import nn


def window_partition(x, win_size):
    B, H, W, C = x.shape
    x = x.view(B, H // win_size, win_size, W // win_size, win_size, C)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, win_size, win_size, C)


def window_reverse(windows, win_size, H, W, bug=""):
    B = int(windows.shape[0] / (H * W / win_size / win_size))
    if bug == "reverse-without-permute":
        return windows.contiguous().view(B, H, W, -1)
    x = windows.view(B, H // win_size, W // win_size, win_size, win_size, -1)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1)


class LinearProjection(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.to_q = nn.Linear(dim, dim)
        self.to_kv = nn.Linear(dim, dim * 2)

    def forward(self, x):
        B_, N, C = x.shape
        q = self.to_q(x).reshape(B_, N, 1, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        kv = self.to_kv(x).reshape(B_, N, 2, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        return q[0], kv[0], kv[1]


class WindowAttention(nn.Module):
    def __init__(self, dim, win_size, num_heads):
        super().__init__()
        self.win_size, self.num_heads = win_size, num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.relative_position_bias_table = nn.Parameter(torch.randn((2 * win_size - 1) ** 2, num_heads) * 0.02)
        coords = torch.stack(torch.meshgrid(torch.arange(win_size), torch.arange(win_size), indexing="ij"))
        coords_flatten = torch.flatten(coords, 1)
        relative_coords = (coords_flatten[:, :, None] - coords_flatten[:, None, :]).permute(1, 2, 0).contiguous()
        relative_coords[:, :, 0] += win_size - 1
        relative_coords[:, :, 1] += win_size - 1
        relative_coords[:, :, 0] *= 2 * win_size - 1
        self.register_buffer("relative_position_index", relative_coords.sum(-1))
        self.qkv = LinearProjection(dim, num_heads)
        self.proj = nn.Linear(dim, dim)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x):
        B_, N, C = x.shape
        q, k, v = self.qkv(x)
        q = q * self.scale
        attn = q @ k.transpose(-2, -1)
        n = self.win_size * self.win_size
        bias = self.relative_position_bias_table[self.relative_position_index.view(-1)].view(n, n, -1)
        bias = bias.permute(2, 0, 1).contiguous()
        ratio = attn.size(-1) // bias.size(-1)
        bias = repeat(bias, "nH l c -> nH l (c d)", d=ratio)
        attn = self.softmax(attn + bias.unsqueeze(0))
        x = (attn @ v).transpose(1, 2).reshape(B_, N, C)
        return self.proj(x)


class LeWinTransformerBlock(nn.Module):
    def __init__(self, dim, num_heads, win_size, bug=""):
        super().__init__()
        self.win_size, self.bug = win_size, bug
        self.norm1 = nn.LayerNorm(dim)
        self.modulator = nn.Embedding(win_size * win_size, dim)
        self.attn = WindowAttention(dim, win_size, num_heads)

    def forward(self, x, H, W):
        B, L, C = x.shape
        shortcut = x
        x = self.norm1(x).view(B, H, W, C)
        x_windows = window_partition(x, self.win_size).view(-1, self.win_size * self.win_size, C)
        modulator = self.modulator.weight
        if self.bug == "modulator-over-channels":
            modulator = modulator.t().reshape(self.win_size * self.win_size, C)
        attn_windows = self.attn(x_windows + modulator)
        attn_windows = attn_windows.view(-1, self.win_size, self.win_size, C)
        x = window_reverse(attn_windows, self.win_size, H, W, self.bug).view(B, H * W, C)
        return shortcut + x


class Uformer(nn.Module):
    def __init__(self, dim, num_heads, win_size=2, bug=""):
        super().__init__()
        self.input_proj = nn.Conv2d(3, dim, kernel_size=3, padding=1)
        self.block = LeWinTransformerBlock(dim, num_heads, win_size, bug)

    def forward(self, img):
        H, W = img.shape[2:]
        y = self.input_proj(img).flatten(2).transpose(1, 2).contiguous()   # [B, H*W, C]
        return self.block(y, H, W)


BUGS = ("reverse-without-permute", "modulator-over-channels")
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=4 Wp=6",)
EQUAL = {"B=2 D=32 H=4 Hp=4 Wp=6": "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=4, Wp=6):
    torch.manual_seed(0)
    model = Uformer(D, H, bug=bug).eval()
    return model, (torch.randn(B, 3, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
