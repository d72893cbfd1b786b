"""microsoft/Swin-Transformer, models/swin_transformer.py (https://github.com/microsoft/Swin-Transformer/
blob/main/models/swin_transformer.py): ``window_partition``, ``window_reverse``, ``WindowAttention`` (the
relative position bias table indexed by the ``relative_position_index`` buffer) and
``SwinTransformerBlock`` (the shifted-window ``attn_mask`` built in ``__init__`` and registered as a
buffer, ``torch.roll`` before the partition and back after the reverse). A non-square image, 4 × 6
patches, windows of 2 × 2.

Bugs (argument): ``swap-hw``: ``window_reverse`` views the windows as ``(B, W/ws, H/ws, ...)``, the
swapped-H/W slip of non-square inputs (microsoft/Swin-Transformer issues on rectangular images);
``no-unroll``: the reverse ``torch.roll`` left out; ``index-transposed``: the bias read as
``permute(2, 1, 0)``, key-by-query instead of query-by-key."""

import sys

import torch
from torch import nn


def window_partition(x, window_size):
    B, H, W, C = x.shape
    x = x.view(B, H // window_size, window_size, W // window_size, window_size, C)  # (B, H/ws, ws, W/ws, ws, C)
    windows = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size, window_size, C)  # (B*nW, ws, ws, C)
    return windows


def window_reverse(windows, window_size, H, W, swap=False):
    B = int(windows.shape[0] / (H * W / window_size / window_size))
    if swap:
        x = windows.view(B, W // window_size, H // window_size, window_size, window_size, -1)  # bug: W before H
    else:
        ws = window_size
        x = windows.view(B, H // ws, W // ws, ws, ws, -1)  # (B, H/ws, W/ws, ws, ws, C)
    x = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1)  # (B, H, W, C)
    return x


class WindowAttention(nn.Module):
    def __init__(self, dim, window_size, num_heads, index_transposed=False):
        super().__init__()
        self.dim, self.window_size, self.num_heads = dim, window_size, num_heads
        self.index_transposed = index_transposed
        head_dim = dim // num_heads
        self.scale = head_dim ** -0.5
        self.relative_position_bias_table = nn.Parameter(
            torch.randn((2 * window_size[0] - 1) * (2 * window_size[1] - 1), num_heads) * 0.02)  # (2Wh-1 * 2Ww-1, nH)
        coords_h = torch.arange(self.window_size[0])
        coords_w = torch.arange(self.window_size[1])
        coords = torch.stack(torch.meshgrid([coords_h, coords_w], indexing="ij"))  # (2, Wh, Ww)
        coords_flatten = torch.flatten(coords, 1)  # (2, Wh*Ww)
        relative_coords = coords_flatten[:, :, None] - coords_flatten[:, None, :]  # (2, Wh*Ww, Wh*Ww)
        relative_coords = relative_coords.permute(1, 2, 0).contiguous()  # (Wh*Ww, Wh*Ww, 2)
        relative_coords[:, :, 0] += self.window_size[0] - 1
        relative_coords[:, :, 1] += self.window_size[1] - 1
        relative_coords[:, :, 0] *= 2 * self.window_size[1] - 1
        relative_position_index = relative_coords.sum(-1)  # (Wh*Ww, Wh*Ww)
        self.register_buffer("relative_position_index", relative_position_index)
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x, mask=None):
        B_, N, C = x.shape
        qkv = self.qkv(x).reshape(B_, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]  # (B*nW, nH, N, d)
        q = q * self.scale
        attn = (q @ k.transpose(-2, -1))  # (B*nW, nH, N, N)
        relative_position_bias = self.relative_position_bias_table[self.relative_position_index.view(-1)].view(
            self.window_size[0] * self.window_size[1], self.window_size[0] * self.window_size[1], -1)  # (N, N, nH)
        if self.index_transposed:
            relative_position_bias = relative_position_bias.permute(2, 1, 0).contiguous()  # bug: (nH, key, query)
        else:
            relative_position_bias = relative_position_bias.permute(2, 0, 1).contiguous()  # (nH, N, N)
        attn = attn + relative_position_bias.unsqueeze(0)
        if mask is not None:
            nW = mask.shape[0]
            attn = attn.view(B_ // nW, nW, self.num_heads, N, N) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.num_heads, N, N)  # (B*nW, nH, N, N)
            attn = self.softmax(attn)
        else:
            attn = self.softmax(attn)
        x = (attn @ v).transpose(1, 2).reshape(B_, N, C)  # (B*nW, N, C)
        return self.proj(x)


class SwinTransformerBlock(nn.Module):
    def __init__(self, dim, input_resolution, num_heads, window_size=2, shift_size=1, bug=""):
        super().__init__()
        self.dim, self.input_resolution, self.num_heads = dim, input_resolution, num_heads
        self.window_size, self.shift_size, self.bug = window_size, shift_size, bug
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, (window_size, window_size), num_heads,
                                    index_transposed=bug == "index-transposed")
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        if self.shift_size > 0:
            H, W = self.input_resolution
            img_mask = torch.zeros((1, H, W, 1))  # (1, H, W, 1)
            h_slices = (slice(0, -self.window_size), slice(-self.window_size, -self.shift_size),
                        slice(-self.shift_size, None))
            w_slices = (slice(0, -self.window_size), slice(-self.window_size, -self.shift_size),
                        slice(-self.shift_size, None))
            cnt = 0
            for h in h_slices:
                for w in w_slices:
                    img_mask[:, h, w, :] = cnt
                    cnt += 1
            mask_windows = window_partition(img_mask, self.window_size)  # (nW, ws, ws, 1)
            mask_windows = mask_windows.view(-1, self.window_size * self.window_size)  # (nW, ws*ws)
            attn_mask = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)  # (nW, ws*ws, ws*ws)
            attn_mask = attn_mask.masked_fill(attn_mask != 0, float(-100.0)).masked_fill(attn_mask == 0, float(0.0))  # noqa: UP018
        else:
            attn_mask = None
        self.register_buffer("attn_mask", attn_mask)

    def forward(self, x):
        H, W = self.input_resolution
        B, L, C = x.shape
        shortcut = x
        x = self.norm1(x)
        x = x.view(B, H, W, C)  # (B, H, W, C)
        if self.shift_size > 0:
            shifted_x = torch.roll(x, shifts=(-self.shift_size, -self.shift_size), dims=(1, 2))
        else:
            shifted_x = x
        x_windows = window_partition(shifted_x, self.window_size)  # (B*nW, ws, ws, C)
        x_windows = x_windows.view(-1, self.window_size * self.window_size, C)  # (B*nW, ws*ws, C)
        attn_windows = self.attn(x_windows, mask=self.attn_mask)  # (B*nW, ws*ws, C)
        attn_windows = attn_windows.view(-1, self.window_size, self.window_size, C)  # (B*nW, ws, ws, C)
        shifted_x = window_reverse(attn_windows, self.window_size, H, W, swap=self.bug == "swap-hw")  # (B, H, W, C)
        if self.shift_size > 0 and self.bug != "no-unroll":
            x = torch.roll(shifted_x, shifts=(self.shift_size, self.shift_size), dims=(1, 2))
        else:
            x = shifted_x
        x = x.view(B, H * W, C)  # (B, L, C)
        x = shortcut + x
        x = x + self.mlp(self.norm2(x))
        return x


def build(bug="", B=2, H=4, W=6, dim=36, heads=3):  # noqa: N803
    """--dims B=2,T=24,D=36,H=3 (4 × 6 patches, windows of 2 × 2)."""
    torch.manual_seed(0)
    block = SwinTransformerBlock(dim, (H, W), heads, window_size=2, shift_size=1, bug=bug).eval()
    return block, (torch.randn(B, H * W, dim),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
