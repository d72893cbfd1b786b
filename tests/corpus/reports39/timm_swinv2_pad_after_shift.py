"""huggingface/pytorch-image-models issue #2438 ("swin v2 adding padding to shifted window attention breaks the
algorithm"; open, the maintainer: "hmm, yeah, might be a concern"): ``SwinTransformerV2Block._attn`` rolls the
feature map by ``-shift_size`` first and pads it to a multiple of the window afterwards, while the shifted-window
mask is built for the padded grid (its regions cut at ``-window_size`` and ``-shift_size`` of ``Hp``/``Wp``).
When the side is not a multiple of the window, the tokens the roll wrapped around sit ``pad`` rows before the
mask's last region, so they attend to their unrelated new neighbours and the mask separates the wrong ones: the
output keeps its shape. Swin v1 (and the fix the report implies) pads first and rolls the padded map.

The idiom (timm's Swin v2 block, ported to torch): ``[B, H, W, C]`` input, ``torch.roll`` by ``-shift``,
``F.pad`` to ``Hp``/``Wp``, ``window_partition`` (``view`` / ``permute(0, 1, 3, 2, 4, 5)`` / ``view``), the
``img_mask`` regions and ``mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)`` filled with ``-100``, window
attention ``[B * nW, H, N, N]`` with the mask added per window, ``window_reverse``, the crop to ``H``/``W`` and the
reverse roll; post-norm residuals (Swin v2). A 5 x 6 grid, window 4, shift 2 (padded to 8 x 8).

Bug (argument): ``pad-after-shift``: the map rolled before it is padded."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("pad-after-shift",)
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=5 Wp=6",)


def window_partition(x, window_size):
    b, h, w, c = x.shape
    x = x.view(b, h // window_size, window_size, w // window_size, window_size, c)
    windows = x.permute(0, 1, 3, 2, 4, 5).contiguous()                                  # (B, h, w, ws, ws, C)
    return windows.view(-1, window_size, window_size, c)                                 # (B*nW, ws, ws, C)


def window_reverse(windows, window_size, h, w):
    c = windows.shape[-1]
    x = windows.view(-1, h // window_size, w // window_size, window_size, window_size, c)
    x = x.permute(0, 1, 3, 2, 4, 5).contiguous()                                         # (B, h, ws, w, ws, C)
    return x.view(-1, h, w, c)                                                           # (B, Hp, Wp, C)


class WindowAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.scale = heads, (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, mask):
        b_, n, c = x.shape
        qkv = self.qkv(x).reshape(b_, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)   # (3, B*nW, H, N, d)
        q, k, v = qkv.unbind(0)
        attn = (q * self.scale) @ k.transpose(-2, -1)                                    # (B*nW, H, N, N)
        nw = mask.shape[0]
        attn = attn.view(-1, nw, self.heads, n, n) + mask.unsqueeze(1).unsqueeze(0)
        attn = attn.view(-1, self.heads, n, n).softmax(dim=-1)
        out = (attn @ v).transpose(1, 2).reshape(b_, n, c)                               # (B*nW, N, C)
        return self.proj(out)


class SwinV2Block(nn.Module):
    def __init__(self, dim, heads, window_size=4, shift_size=2, bug=""):
        super().__init__()
        self.window_size, self.shift_size, self.bug = window_size, shift_size, bug
        self.attn = WindowAttention(dim, heads)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def get_attn_mask(self, hp, wp):
        ws, ss = self.window_size, self.shift_size
        img_mask = torch.zeros((1, hp, wp, 1))                                           # (1, Hp, Wp, 1)
        cnt = 0
        for h in ((0, -ws), (-ws, -ss), (-ss, None)):
            for w in ((0, -ws), (-ws, -ss), (-ss, None)):
                img_mask[:, h[0]:h[1], w[0]:w[1], :] = cnt
                cnt += 1
        mask_windows = window_partition(img_mask, ws).view(-1, ws * ws)                  # (nW, N)
        attn_mask = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)                # (nW, N, N)
        return attn_mask.masked_fill(attn_mask != 0, (-100.0)).masked_fill(attn_mask == 0, 0.0)

    def _attn(self, x):
        b, h, w, c = x.shape
        ws, ss = self.window_size, self.shift_size
        pad_h, pad_w = (ws - h % ws) % ws, (ws - w % ws) % ws
        if self.bug == "pad-after-shift":
            shifted_x = torch.roll(x, shifts=(-ss, -ss), dims=(1, 2))
            shifted_x = F.pad(shifted_x, (0, 0, 0, pad_w, 0, pad_h))                     # (B, Hp, Wp, C)
        else:
            shifted_x = F.pad(x, (0, 0, 0, pad_w, 0, pad_h))                             # (B, Hp, Wp, C)
            shifted_x = torch.roll(shifted_x, shifts=(-ss, -ss), dims=(1, 2))
        _, hp, wp, _ = shifted_x.shape
        x_windows = window_partition(shifted_x, ws).view(-1, ws * ws, c)                 # (B*nW, N, C)
        attn_windows = self.attn(x_windows, self.get_attn_mask(hp, wp))                  # (B*nW, N, C)
        shifted_x = window_reverse(attn_windows.view(-1, ws, ws, c), ws, hp, wp)         # (B, Hp, Wp, C)
        if self.bug == "pad-after-shift":
            shifted_x = shifted_x[:, :h, :w, :].contiguous()
            return torch.roll(shifted_x, shifts=(ss, ss), dims=(1, 2))                   # (B, H, W, C)
        shifted_x = torch.roll(shifted_x, shifts=(ss, ss), dims=(1, 2))
        return shifted_x[:, :h, :w, :].contiguous()                                      # (B, H, W, C)

    def forward(self, x):
        x = x + self.norm1(self._attn(x))
        return x + self.norm2(self.mlp(x))


def build(bug="", B=2, D=32, H=4, Hp=5, Wp=6):
    torch.manual_seed(0)
    return SwinV2Block(D, H, bug=bug).eval(), (torch.randn(B, Hp, Wp, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
