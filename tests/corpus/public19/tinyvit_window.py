"""wkcn/TinyViT (microsoft/Cream), models/tiny_vit.py (``Attention``, ``TinyViTBlock``, commit of 2022): tokens
``(B, L, C)`` of an ``H x W`` map cut into ``ws x ws`` windows, ``x.view(B, nH, ws, nW, ws, C).transpose(2, 3)
.reshape(B * nH * nW, ws * ws, C)``; ``Attention``: ``qkv(norm(x)).view(B_, N, heads, -1).split([key_dim,
key_dim, d], dim=3)``, each ``permute(0, 2, 1, 3)``; learnt biases ``attention_biases`` ``(heads,
len(attention_offsets))`` indexed by ``attention_bias_idxs`` ``(N, N)`` (one index per ``(abs(dy), abs(dx))``
offset of two window positions): ``attn = q @ k.transpose(-2, -1) * scale + attention_biases[:,
attention_bias_idxs]``; ``softmax(dim=-1)``; ``(attn @ v).transpose(1, 2).reshape(B_, N, dh)``; ``proj``; the
windows put back ``view(B, nH, nW, ws, ws, C).transpose(2, 3).reshape(B, L, C)``.

Bugs (argument): ``window-reverse-without-transpose``: the windows put back ``view(B, nH, nW, ws, ws,
C).reshape(B, L, C)`` without the ``transpose(2, 3)`` (each window's rows laid out as a row of the map: the
slip of writing the reverse as a plain reshape); ``split-before-heads``: ``qkv.split([nh_kd, nh_kd, dh],
dim=-1)`` on ``(B_, N, C')`` then ``view(B_, N, heads, -1)`` (q, k, v split before the per-head view, where
TinyViT's ``qkv`` lays each head's q, k and v out together)."""

import itertools
import sys

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, key_dim, num_heads, resolution, bug=""):
        super().__init__()
        self.num_heads, self.key_dim, self.bug = num_heads, key_dim, bug
        self.scale = key_dim**-0.5
        self.d = key_dim
        self.dh = self.d * num_heads
        self.nh_kd = key_dim * num_heads
        h = self.dh + self.nh_kd * 2
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, h)
        self.proj = nn.Linear(self.dh, dim)
        points = list(itertools.product(range(resolution[0]), range(resolution[1])))
        attention_offsets, idxs = {}, []
        for p1 in points:
            for p2 in points:
                offset = (abs(p1[0] - p2[0]), abs(p1[1] - p2[1]))
                if offset not in attention_offsets:
                    attention_offsets[offset] = len(attention_offsets)
                idxs.append(attention_offsets[offset])
        self.attention_biases = nn.Parameter(torch.randn(num_heads, len(attention_offsets)))
        self.register_buffer("attention_bias_idxs", torch.LongTensor(idxs).view(len(points), len(points)),
                             persistent=False)

    def forward(self, x):                                                          # (B_, N, C)
        B, N, _ = x.shape
        x = self.norm(x)
        qkv = self.qkv(x)
        if self.bug == "split-before-heads":
            q, k, v = qkv.split([self.nh_kd, self.nh_kd, self.dh], dim=-1)
            q, k, v = (t.view(B, N, self.num_heads, -1) for t in (q, k, v))
        else:
            q, k, v = qkv.view(B, N, self.num_heads, -1).split([self.key_dim, self.key_dim, self.d], dim=3)
        q, k, v = q.permute(0, 2, 1, 3), k.permute(0, 2, 1, 3), v.permute(0, 2, 1, 3)
        attn = (q @ k.transpose(-2, -1)) * self.scale + self.attention_biases[:, self.attention_bias_idxs]
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, self.dh)
        return self.proj(x)


class TinyViTBlock(nn.Module):
    def __init__(self, dim, input_resolution, num_heads, window_size, bug=""):
        super().__init__()
        self.input_resolution, self.window_size, self.bug = input_resolution, window_size, bug
        head_dim = dim // num_heads
        self.attn = Attention(dim, head_dim, num_heads, (window_size, window_size), bug)

    def forward(self, x):                                                          # (B, L, C)
        H, W = self.input_resolution
        B, L, C = x.shape
        res_x = x
        ws = self.window_size
        x = x.view(B, H, W, C)
        nH, nW = H // ws, W // ws
        x = x.view(B, nH, ws, nW, ws, C).transpose(2, 3).reshape(B * nH * nW, ws * ws, C)
        x = self.attn(x)
        x = x.view(B, nH, nW, ws, ws, C)
        if self.bug != "window-reverse-without-transpose":
            x = x.transpose(2, 3)
        x = x.reshape(B, L, C)
        return res_x + x


BUGS = ("window-reverse-without-transpose", "split-before-heads")
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=4 Wp=6",)
EQUAL = {"B=2 D=32 H=4 Hp=4 Wp=6": "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=4, Wp=6):
    torch.manual_seed(0)
    return TinyViTBlock(D, (Hp, Wp), H, 2, bug).eval(), (torch.randn(B, Hp * Wp, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
