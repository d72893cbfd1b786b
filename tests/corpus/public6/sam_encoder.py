"""facebookresearch/segment-anything, segment_anything/modeling/image_encoder.py (``Block``,
``Attention``, ``window_partition``, ``window_unpartition``, ``get_rel_pos``,
``add_decomposed_rel_pos``; https://github.com/facebookresearch/segment-anything): a channels-last grid
``(B, Hp, Wp, C)`` padded to whole windows and cut ``view(B, Hp/ws, ws, Wp/ws, ws, C).permute(0, 1, 3, 2, 4,
5)``; ``qkv(x).reshape(B, h·w, 3, heads, -1).permute(2, 0, 3, 1, 4)`` then ``reshape(3, B·heads, h·w, -1)
.unbind(0)``; decomposed relative positions: a table picked by ``q_coords - k_coords + (k - 1)`` and
``einsum("bhwc,hkc->bhwk")`` / ``einsum("bhwc,wkc->bhwk")`` added to the scores viewed ``(B, h, w, h, w)``
as ``rel_h[:, :, :, :, None] + rel_w[:, :, :, None, :]``; the merge ``view(B, heads, h, w, -1).permute(0,
2, 3, 1, 4).reshape(B, h, w, -1)``.

Bugs (argument): ``rel-swapped``: ``rel_h[:, :, :, None, :] + rel_w[:, :, :, :, None]``: the row bias laid
along the key columns and the column bias along the key rows (square windows hide it: the shapes
agree); ``unpartition-no-permute``: ``window_unpartition`` viewing the windows straight back to
``(B, Hp, Wp, C)`` without the ``permute(0, 1, 3, 2, 4, 5)`` (the window-reverse mistake Swin's
``window_reverse`` guards against)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("rel-swapped", "unpartition-no-permute")
DIMS = ("B=3 Hp=10 Wp=14 D=32 H=4",)
WINDOW = 2


def window_partition(x, window_size):
    B, H, W, C = x.shape
    pad_h = (window_size - H % window_size) % window_size
    pad_w = (window_size - W % window_size) % window_size
    if pad_h > 0 or pad_w > 0:
        x = F.pad(x, (0, 0, 0, pad_w, 0, pad_h))
    Hp, Wp = H + pad_h, W + pad_w
    x = x.view(B, Hp // window_size, window_size, Wp // window_size, window_size, C)
    windows = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size, window_size, C)  # (B·nW, ws, ws, C)
    return windows, (Hp, Wp)


def window_unpartition(windows, window_size, pad_hw, hw, bug=""):
    Hp, Wp = pad_hw
    H, W = hw
    B = windows.shape[0] // (Hp * Wp // window_size // window_size)
    x = windows.view(B, Hp // window_size, Wp // window_size, window_size, window_size, -1)
    if bug == "unpartition-no-permute":
        x = x.contiguous().view(B, Hp, Wp, -1)  # bug: no permute(0, 1, 3, 2, 4, 5)
    else:
        x = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, Hp, Wp, -1)  # (B, Hp, Wp, C)
    if Hp > H or Wp > W:
        x = x[:, :H, :W, :].contiguous()
    return x


def get_rel_pos(q_size, k_size, rel_pos):
    q_coords = torch.arange(q_size)[:, None] * max(k_size / q_size, 1.0)
    k_coords = torch.arange(k_size)[None, :] * max(q_size / k_size, 1.0)
    relative_coords = (q_coords - k_coords) + (k_size - 1) * max(q_size / k_size, 1.0)
    return rel_pos[relative_coords.long()]  # (q, k, d_k)


def add_decomposed_rel_pos(attn, q, rel_pos_h, rel_pos_w, q_size, k_size, bug=""):
    q_h, q_w = q_size
    k_h, k_w = k_size
    Rh = get_rel_pos(q_h, k_h, rel_pos_h)  # (h, h, d_k)
    Rw = get_rel_pos(q_w, k_w, rel_pos_w)  # (w, w, d_k)
    B, _, dim = q.shape
    r_q = q.reshape(B, q_h, q_w, dim)  # (B·heads, h, w, d_k)
    rel_h = torch.einsum("bhwc,hkc->bhwk", r_q, Rh)  # (B·heads, h, w, k_h)
    rel_w = torch.einsum("bhwc,wkc->bhwk", r_q, Rw)  # (B·heads, h, w, k_w)
    if bug == "rel-swapped":
        bias = rel_h[:, :, :, None, :] + rel_w[:, :, :, :, None]  # bug: rows along the key columns
    else:
        bias = rel_h[:, :, :, :, None] + rel_w[:, :, :, None, :]  # (B·heads, h, w, k_h, k_w)
    return (attn.view(B, q_h, q_w, k_h, k_w) + bias).view(B, q_h * q_w, k_h * k_w)


class Attention(nn.Module):
    def __init__(self, dim=32, num_heads=4, input_size=(WINDOW, WINDOW), bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        head_dim = dim // num_heads
        self.scale = head_dim**-0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.rel_pos_h = nn.Parameter(torch.randn(2 * input_size[0] - 1, head_dim) * 0.02)
        self.rel_pos_w = nn.Parameter(torch.randn(2 * input_size[1] - 1, head_dim) * 0.02)

    def forward(self, x):
        B, H, W, _ = x.shape
        qkv = self.qkv(x).reshape(B, H * W, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)  # (3, B, heads, N, d_k)
        q, k, v = qkv.reshape(3, B * self.num_heads, H * W, -1).unbind(0)  # (B·heads, N, d_k) each
        attn = (q * self.scale) @ k.transpose(-2, -1)  # (B·heads, N, N)
        attn = add_decomposed_rel_pos(attn, q, self.rel_pos_h, self.rel_pos_w, (H, W), (H, W), self.bug)
        attn = attn.softmax(dim=-1)
        x = (attn @ v).view(B, self.num_heads, H, W, -1).permute(0, 2, 3, 1, 4).reshape(B, H, W, -1)  # (B, h, w, C)
        return self.proj(x)


class Block(nn.Module):
    def __init__(self, dim=32, num_heads=4, window_size=WINDOW, bug=""):
        super().__init__()
        self.window_size, self.bug = window_size, bug
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, num_heads, (window_size, window_size), bug)

    def forward(self, x):
        shortcut = x
        x = self.norm1(x)
        H, W = x.shape[1], x.shape[2]
        x, pad_hw = window_partition(x, self.window_size)  # (B·nW, ws, ws, C)
        x = self.attn(x)
        x = window_unpartition(x, self.window_size, pad_hw, (H, W), self.bug)  # (B, Hp, Wp, C)
        return shortcut + x


def build(bug="", B=2, Hp=6, Wp=4, D=32, H=4):  # noqa: N803
    """--dims 'B=2 Hp=6 Wp=4 D=32 H=4': a channels-last grid in windows of 2 × 2."""
    torch.manual_seed(0)
    return Block(D, H, bug=bug).eval(), (torch.randn(B, Hp, Wp, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
