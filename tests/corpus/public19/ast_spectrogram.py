"""YuanGongND/ast, src/models/ast_models.py (``ASTModel``, ``PatchEmbed`` from timm, commit of 2021): a log-mel
spectrogram ``(B, T_frames, F)`` ``unsqueeze(1).transpose(2, 3)`` to ``(B, 1, F, T_frames)``; overlapping patches
``Conv2d(1, D, kernel_size=(16, 16), stride=(fstride, tstride))`` with ``stride < kernel`` (here kernel 4, stride
2), ``flatten(2).transpose(1, 2)``; the class and distillation tokens prepended ``cat((cls_tokens, dist_token,
x), dim=1)``; a learnt position embedding of ``2 + f_dim·t_dim``; a ViT block (timm ``Attention``: ``qkv(x)
.reshape(B, N, 3, H, d).permute(2, 0, 3, 1, 4)``); the output ``(x[:, 0] + x[:, 1]) / 2``; ``mlp_head``.

Bugs (argument): ``freq-time-not-transposed``: ``x.unsqueeze(1)`` without ``transpose(2, 3)`` (the patch grid
laid out (time, freq) where the position embedding was learnt (freq, time): value-level only, a ``?`` is the
best a tracer can do); ``qkv-reshape-heads-first``: ``reshape(B, N, H, 3, d).permute(3, 0, 2, 1, 4)`` where
``qkv``'s features are ``(3, H, d)``."""

import sys

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):                                                          # (B, N, C)
        B, N, C = x.shape
        if self.bug == "qkv-reshape-heads-first":
            qkv = self.qkv(x).reshape(B, N, self.num_heads, 3, C // self.num_heads).permute(3, 0, 2, 1, 4)
        else:
            qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj(x)


class ASTModel(nn.Module):
    def __init__(self, dim, heads, f_dim, t_dim, bug=""):
        super().__init__()
        self.bug = bug
        self.proj = nn.Conv2d(1, dim, kernel_size=(4, 4), stride=(2, 2))
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.dist_token = nn.Parameter(torch.randn(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, f_dim * t_dim + 2, dim))
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, bug)
        self.norm = nn.LayerNorm(dim)
        self.mlp_head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 10))

    def forward(self, x):                                                          # (B, T_frames, F)
        x = x.unsqueeze(1)
        if self.bug != "freq-time-not-transposed":
            x = x.transpose(2, 3)                                                    # (B, 1, F, T_frames)
        B = x.shape[0]
        x = self.proj(x).flatten(2).transpose(1, 2)                                  # (B, Hp*Wp, D)
        cls_tokens = self.cls_token.expand(B, -1, -1)
        dist_token = self.dist_token.expand(B, -1, -1)
        x = torch.cat((cls_tokens, dist_token, x), dim=1)
        x = x + self.pos_embed
        x = x + self.attn(self.norm1(x))
        x = self.norm(x)
        x = (x[:, 0] + x[:, 1]) / 2
        return self.mlp_head(x)


BUGS = ("freq-time-not-transposed", "qkv-reshape-heads-first")
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=3 Wp=5",)
EQUAL = {"B=2 D=32 H=4 Hp=3 Wp=5": "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=3, Wp=5):
    torch.manual_seed(0)
    # the frequency patches Hp from F = 2·Hp + 2 bins, the time patches Wp from 2·Wp + 2 frames
    return ASTModel(D, H, Hp, Wp, bug).eval(), (torch.randn(B, 2 * Wp + 2, 2 * Hp + 2),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
