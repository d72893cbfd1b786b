"""facebookresearch/sam2, sam2/modeling/backbones/hieradet.py (``do_pool``, ``MultiScaleAttention``,
``MultiScaleBlock``) and sam2/modeling/backbones/utils.py (``window_partition``, ``window_unpartition``): the
first block of a Hiera stage in SAM 2's image encoder, where the width doubles (``dim_out = 2 * dim``) and the
queries are max-pooled 2 x 2 (``q_stride``). Channels-last ``(B, H, W, C)``; the shortcut ``do_pool(self.proj(x),
self.pool)``; windows of 6 x 6 cut with ``view(B, Hp // ws, ws, Wp // ws, ws, C).permute(0, 1, 3, 2, 4, 5)``;
``qkv(x).reshape(B, H * W, 3, nHead, -1)``, ``torch.unbind(qkv, 2)`` (``(B, H * W, nheads, C)`` each); the queries
pooled with their heads still on the last axes (``do_pool(q.reshape(B, H, W, -1), self.q_pool)``: ``permute(0, 3,
1, 2)``, ``MaxPool2d``, ``permute(0, 2, 3, 1)``) and ``reshape(B, H * W, self.num_heads, -1)``; SDPA on
``transpose(1, 2)``ed q, k, v (3 x 3 pooled queries against 6 x 6 keys per window); ``x.transpose(1, 2)
.reshape(B, H, W, -1)``, ``proj``; the windows put back at the pooled window size ``self.window_size //
self.q_stride[0]``.

Bugs: ``q-pool-after-head-transpose``: q, k and v transposed to ``(B, nheads, H * W, C)`` right after ``unbind``
(the SDPA layout made early, as many ports do) while the pooling still reads ``q.reshape(B, H, W, -1)`` (the heads
folded into the pixel grid: each pooled "pixel" takes its max over pieces of different heads and positions);
``merge-no-transpose``: ``x.reshape(B, H, W, -1)`` straight from SDPA's ``(B, nheads, H * W, C)`` (heads and
pixels mixed into the channels).
Twin: ``transpose-early-pool-back``: q, k, v transposed early and the queries pooled from ``q.transpose(1, 2)
.reshape(B, H, W, -1)``, then ``reshape(B, H * W, nheads, -1).transpose(1, 2)`` (the same numbers)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


def window_partition(x, window_size):
    B, H, W, C = x.shape
    pad_h = (window_size - H % window_size) % window_size
    pad_w = (window_size - W % window_size) % window_size
    if pad_h > 0 or pad_w > 0:
        x = F.pad(x, (0, 0, 0, pad_w, 0, pad_h))
    Hp, Wp = H + pad_h, W + pad_w
    x = x.view(B, Hp // window_size, window_size, Wp // window_size, window_size, C)  # (B, nh, ws, nw, ws, C)
    windows = x.permute(0, 1, 3, 2, 4, 5).reshape(-1, window_size, window_size, C)   # (B·nW, ws, ws, C)
    return windows, (Hp, Wp)


def window_unpartition(windows, window_size, pad_hw, hw):
    Hp, Wp = pad_hw
    H, W = hw
    B = windows.shape[0] // (Hp * Wp // window_size // window_size)
    x = windows.reshape(B, Hp // window_size, Wp // window_size, window_size, window_size, -1)  # (B, nh, nw, ws, ws, C)
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(B, Hp, Wp, -1)                            # (B, Hp, Wp, C)
    if Hp > H or Wp > W:
        x = x[:, :H, :W, :]
    return x


def do_pool(x, pool):
    x = x.permute(0, 3, 1, 2)                                                        # (B, C, H, W)
    x = pool(x)
    return x.permute(0, 2, 3, 1)                                                     # (B, H', W', C)


class MultiScaleAttention(nn.Module):
    def __init__(self, dim, dim_out, num_heads, q_pool=None, bug=""):
        super().__init__()
        self.num_heads, self.q_pool, self.bug = num_heads, q_pool, bug
        self.qkv = nn.Linear(dim, dim_out * 3)
        self.proj = nn.Linear(dim_out, dim_out)

    def forward(self, x):
        B, H, W, _ = x.shape
        qkv = self.qkv(x).reshape(B, H * W, 3, self.num_heads, -1)                    # (B, H*W, 3, nHead, C)
        q, k, v = torch.unbind(qkv, 2)                                               # (B, H*W, nheads, C)
        if self.bug in ("q-pool-after-head-transpose", "transpose-early-pool-back"):
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)        # (B, nheads, H*W, C)
            if self.bug == "q-pool-after-head-transpose":
                q = do_pool(q.reshape(B, H, W, -1), self.q_pool)                     # bug: heads in the grid
                H, W = q.shape[1:3]
                q = q.reshape(B, self.num_heads, H * W, -1)                          # (B, nheads, H'*W', C)
            else:
                q = do_pool(q.transpose(1, 2).reshape(B, H, W, -1), self.q_pool)     # (B, H', W', nheads·C)
                H, W = q.shape[1:3]
                q = q.reshape(B, H * W, self.num_heads, -1).transpose(1, 2)          # (B, nheads, H'*W', C)
        else:
            q = do_pool(q.reshape(B, H, W, -1), self.q_pool)                         # (B, H', W', nheads·C)
            H, W = q.shape[1:3]
            q = q.reshape(B, H * W, self.num_heads, -1)                              # (B, H'*W', nheads, C)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)        # SDPA's (B, nheads, N, C)
        x = F.scaled_dot_product_attention(q, k, v)                                  # (B, nheads, H'*W', C)
        if self.bug == "merge-no-transpose":
            x = x.reshape(B, H, W, -1)                                               # bug: no transpose(1, 2)
        else:
            x = x.transpose(1, 2).reshape(B, H, W, -1)                               # (B, H', W', nheads·C)
        return self.proj(x)


class MultiScaleBlock(nn.Module):
    def __init__(self, dim, dim_out, num_heads, q_stride=(2, 2), window_size=6, bug=""):
        super().__init__()
        self.dim, self.dim_out, self.window_size, self.q_stride = dim, dim_out, window_size, q_stride
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.pool = nn.MaxPool2d(kernel_size=q_stride, stride=q_stride, ceil_mode=False)
        self.attn = MultiScaleAttention(dim, dim_out, num_heads, q_pool=self.pool, bug=bug)
        self.proj = nn.Linear(dim, dim_out)

    def forward(self, x):
        x = self.norm1(x)                                                            # B, H, W, C
        shortcut = do_pool(self.proj(x), self.pool)                                  # (B, H/2, W/2, C_out)
        x, pad_hw = window_partition(x, self.window_size)                            # (B·nW, ws, ws, C)
        x = self.attn(x)                                                             # (B·nW, ws/2, ws/2, C_out)
        window_size = self.window_size // self.q_stride[0]
        H, W = shortcut.shape[1:3]
        pad_h = (window_size - H % window_size) % window_size
        pad_w = (window_size - W % window_size) % window_size
        x = window_unpartition(x, window_size, (H + pad_h, W + pad_w), (H, W))       # (B, H/2, W/2, C_out)
        return shortcut + x


BUGS = ("q-pool-after-head-transpose", "merge-no-transpose")
TWINS = ("transpose-early-pool-back",)
DIMS = ("B=5 D=16 H=4 Hp=12 Wp=18",)
EQUAL = {DIMS[0]: "B=4 D=16 H=4 Hp=12 Wp=12"}


def build(bug="", B=5, D=16, H=4, Hp=12, Wp=18):  # noqa: N803
    torch.manual_seed(0)
    return MultiScaleBlock(D, 2 * D, H, bug=bug).eval(), (torch.randn(B, Hp, Wp, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
