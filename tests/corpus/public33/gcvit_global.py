"""NVlabs/GCViT, models/gc_vit.py (main, 2023, ``window_partition``, ``window_reverse``, ``WindowAttentionGlobal``,
``GlobalQueryGen``, ``GCViTBlock``): Global Context ViT's global-query window attention. Channels-last features
``(B, Hh, Ww, C)``; ``window_partition``: ``view(B, Hh/ws, ws, Ww/ws, ws, C).permute(0, 1, 3, 2, 4, 5)
.contiguous().view(-1, ws ws, C)``; the global query generated once per image (here the features pooled to ``ws
x ws``, ``adaptive_avg_pool2d``, in place of the fused-MBConv downsampler), ``reshape(B, 1, N, H, d).permute(0, 1,
3, 2, 4)``; in ``WindowAttentionGlobal``: ``kv = qkv(x).reshape(B_, N, 2, H, d).permute(2, 0, 3, 1, 4)``, the
global query ``repeat(1, B_ // B, 1, 1, 1)`` over the windows and ``reshape(B_, H, N, d)``, ``q * scale @
k.transpose(-2, -1)`` plus the relative position bias (a ``((2 ws - 1)^2, H)`` table read by an index buffer,
``view(N, N, -1).permute(2, 0, 1)``), ``softmax(dim=-1)``, ``(attn @ v).transpose(1, 2).reshape(B_, N, C)``,
``proj``; ``window_reverse`` back to ``(B, Hh, Ww, C)``.

Bugs: ``global-query-windows-outer``: the global query tiled ``repeat(B_ // B, 1, 1, 1, 1)`` (over the leading
axis: window-major, while the windows are batch-major, so image 0's windows meet image 1's query: the slip that
``repeat`` on the wrong axis makes when ``B_ = B nW``); ``partition-without-permute``: ``window_partition`` as a
bare ``view(-1, ws ws, C)`` of the ``(B, Hh/ws, ws, Ww/ws, ws, C)`` view (the classic Swin-port slip: each
"window" is a strip of rows)."""

import sys

import torch
from torch import nn


def window_partition(x, window_size, bug=""):
    B, H, W, C = x.shape
    x = x.view(B, H // window_size, window_size, W // window_size, window_size, C)
    if bug == "partition-without-permute":
        return x.contiguous().view(-1, window_size * window_size, C)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size * window_size, C)


def window_reverse(windows, window_size, H, W, B):
    x = windows.view(B, H // window_size, W // window_size, window_size, window_size, -1)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1)


class WindowAttentionGlobal(nn.Module):
    def __init__(self, dim, num_heads, window_size, bug=""):
        super().__init__()
        self.num_heads, self.head_dim, self.bug = num_heads, dim // num_heads, bug
        self.scale = self.head_dim**-0.5
        self.relative_position_bias_table = nn.Parameter(torch.randn((2 * window_size - 1) ** 2, num_heads) * 0.02)
        coords = torch.stack(torch.meshgrid([torch.arange(window_size), torch.arange(window_size)], indexing="ij"))
        coords_flatten = torch.flatten(coords, 1)
        relative_coords = (coords_flatten[:, :, None] - coords_flatten[:, None, :]).permute(1, 2, 0).contiguous()
        relative_coords[:, :, 0] += window_size - 1
        relative_coords[:, :, 1] += window_size - 1
        relative_coords[:, :, 0] *= 2 * window_size - 1
        self.register_buffer("relative_position_index", relative_coords.sum(-1))
        self.qkv = nn.Linear(dim, dim * 2)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, q_global):
        B_, N, C = x.shape
        B = q_global.shape[0]
        kv = self.qkv(x).reshape(B_, N, 2, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        k, v = kv[0], kv[1]
        if self.bug == "global-query-windows-outer":
            q_global = q_global.repeat(B_ // B, 1, 1, 1, 1)
        else:
            q_global = q_global.repeat(1, B_ // B, 1, 1, 1)
        q = q_global.reshape(B_, self.num_heads, N, C // self.num_heads)
        q = q * self.scale
        attn = q @ k.transpose(-2, -1)
        relative_position_bias = self.relative_position_bias_table[self.relative_position_index.view(-1)].view(
            N, N, -1)
        attn = attn + relative_position_bias.permute(2, 0, 1).contiguous().unsqueeze(0)
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B_, N, C)
        return self.proj(x)


class GCViTBlock(nn.Module):
    def __init__(self, dim, num_heads, window_size=4, bug=""):
        super().__init__()
        self.window_size, self.num_heads, self.bug = window_size, num_heads, bug
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = WindowAttentionGlobal(dim, num_heads, window_size, bug)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def global_query(self, x):
        B, H, W, C = x.shape
        pooled = nn.functional.adaptive_avg_pool2d(x.permute(0, 3, 1, 2), self.window_size).permute(0, 2, 3, 1)
        N = self.window_size * self.window_size
        return pooled.reshape(B, 1, N, self.num_heads, C // self.num_heads).permute(0, 1, 3, 2, 4)

    def forward(self, x):
        B, H, W, C = x.shape
        shortcut = x
        x = self.norm1(x)
        q_global = self.global_query(x)
        x_windows = window_partition(x, self.window_size, self.bug)
        attn_windows = self.attn(x_windows, q_global)
        x = shortcut + window_reverse(attn_windows, self.window_size, H, W, B)
        return x + self.mlp(self.norm2(x))


class GCViTStage(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, kernel_size=4, stride=4)
        self.block = GCViTBlock(dim, heads, bug=bug)
        self.norm = nn.LayerNorm(dim)

    def forward(self, images):
        x = self.patch_embed(images).permute(0, 2, 3, 1)                   # (B, Hh, Ww, C)
        return self.norm(self.block(x)).mean(dim=(1, 2))


BUGS = ("global-query-windows-outer", "partition-without-permute")
TWINS = ()
DIMS = ("B=2 D=32 H=4",)


def build(bug="", B=2, D=32, H=4):
    torch.manual_seed(0)
    return GCViTStage(D, H, bug).eval(), (torch.randn(B, 3, 32, 32),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
