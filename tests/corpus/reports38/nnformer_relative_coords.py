"""282857341/nnFormer pull request #88 ("fix the bug about position table"; YellowLight021: "there is a little
mistake in your code about the class WindowAttention_kv"): the 3-D relative position index multiplied the depth
offset by ``3 * window_size[1] - 1`` and the height offset by ``2 * window_size[1] - 1``, where the strides of a
``(2S - 1) x (2H - 1) x (2W - 1)`` table are ``(2 * window_size[1] - 1) * (2 * window_size[2] - 1)`` and ``2 *
window_size[2] - 1``: different offsets read the same row of the table (a 2 x 2 x 2 window reads 19 of its 27
rows), so pairs at different relative positions share one bias.

The idiom (nnFormer's ``WindowAttention_kv``, the decoder's cross-attention inside 3-D windows, ported as is):
``relative_position_bias_table`` (``(2S - 1)(2H - 1)(2W - 1) x heads``), ``torch.meshgrid`` of the window's
coordinates, ``flatten(1)``, pairwise differences, ``permute(1, 2, 0)``, the offsets shifted to start at 0,
multiplied by the strides and summed into ``relative_position_index`` (a buffer); ``kv = self.kv(skip)``
``reshape(B_, N, 2, heads, C // heads).permute(2, 0, 3, 1, 4)``, the queries (the up-sampled decoder tokens)
``reshape(B_, N, heads, C // heads).permute(0, 2, 1, 3)``, ``q * scale @ k.transpose(-2, -1)`` plus the bias read
``table[index.view(-1)].view(N, N, -1).permute(2, 0, 1)``, softmax, ``(attn @ v).transpose(1, 2).reshape(B_, N,
C)``, ``proj``. One 2 x 2 x 2 window per sample (the window fixes the tokens, T = 8).

Bug (argument): ``index-strides``: the index built with the strides ``3 * ws[1] - 1`` and ``2 * ws[1] - 1``."""

import sys

import torch
from torch import nn

BUGS = ("index-strides",)
TWINS = ()
DIMS = ("B=2 T=8 D=32 H=4",)
EQUAL = {"B=2 T=8 D=32 H=4": "B=4 T=8 D=32 H=4"}   # (the window fixes T: B = H = 4 only)


class WindowAttention_kv(nn.Module):
    def __init__(self, dim, window_size, num_heads, bug=""):
        super().__init__()
        self.dim, self.window_size, self.num_heads = dim, window_size, num_heads
        head_dim = dim // num_heads
        self.scale = head_dim ** -0.5
        self.relative_position_bias_table = nn.Parameter(
            torch.randn((2 * window_size[0] - 1) * (2 * window_size[1] - 1) * (2 * window_size[2] - 1),
                        num_heads) * 0.02)
        coords_s = torch.arange(self.window_size[0])
        coords_h = torch.arange(self.window_size[1])
        coords_w = torch.arange(self.window_size[2])
        coords = torch.stack(torch.meshgrid([coords_s, coords_h, coords_w], indexing="ij"))
        coords_flatten = torch.flatten(coords, 1)
        relative_coords = coords_flatten[:, :, None] - coords_flatten[:, None, :]
        relative_coords = relative_coords.permute(1, 2, 0).contiguous()
        relative_coords[:, :, 0] += self.window_size[0] - 1
        relative_coords[:, :, 1] += self.window_size[1] - 1
        relative_coords[:, :, 2] += self.window_size[2] - 1
        if bug == "index-strides":
            relative_coords[:, :, 0] *= 3 * self.window_size[1] - 1
            relative_coords[:, :, 1] *= 2 * self.window_size[1] - 1
        else:
            relative_coords[:, :, 0] *= (2 * self.window_size[1] - 1) * (2 * self.window_size[2] - 1)
            relative_coords[:, :, 1] *= 2 * self.window_size[2] - 1
        relative_position_index = relative_coords.sum(-1)
        self.register_buffer("relative_position_index", relative_position_index)
        self.kv = nn.Linear(dim, dim * 2)
        self.proj = nn.Linear(dim, dim)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, skip, x_up):
        B_, N, C = skip.shape
        kv = self.kv(skip)
        q = x_up
        kv = kv.reshape(B_, N, 2, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4).contiguous()
        q = q.reshape(B_, N, self.num_heads, C // self.num_heads).permute(0, 2, 1, 3).contiguous()  # (B, H, T, d)
        k, v = kv[0], kv[1]                                                              # (B, H, T, d)
        q = q * self.scale
        attn = q @ k.transpose(-2, -1).contiguous()                                      # (B, H, T, T)
        relative_position_bias = self.relative_position_bias_table[self.relative_position_index.view(-1)].view(
            self.window_size[0] * self.window_size[1] * self.window_size[2],
            self.window_size[0] * self.window_size[1] * self.window_size[2], -1)         # (T, T, H)
        relative_position_bias = relative_position_bias.permute(2, 0, 1).contiguous()   # (H, T, T)
        attn = attn + relative_position_bias.unsqueeze(0)
        attn = self.softmax(attn)
        x = (attn @ v).transpose(1, 2).reshape(B_, N, C)                                 # (B, T, D)
        return self.proj(x)


class DecoderBlock(nn.Module):
    def __init__(self, dim, num_heads, window_size=(2, 2, 2), bug=""):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = WindowAttention_kv(dim, window_size, num_heads, bug)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, skip):
        x = x + self.attn(self.norm1(skip), x)
        return x + self.mlp(self.norm2(x))


def build(bug="", B=2, T=8, D=32, H=4):
    torch.manual_seed(0)
    return DecoderBlock(D, H, bug=bug).eval(), (torch.randn(B, T, D), torch.randn(B, T, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
