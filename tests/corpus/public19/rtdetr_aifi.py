"""lyuwenyu/RT-DETR, rtdetr_pytorch/src/zoo/rtdetr/hybrid_encoder.py (``HybridEncoder.build_2d_sincos_position_
embedding``, ``TransformerEncoderLayer``, commit of 2023): the last feature map ``(B, C, h, w)`` flattened
``flatten(2).permute(0, 2, 1)`` to ``(B, h·w, C)``; a 2-D sin-cos embedding built for it: ``grid_w, grid_h =
meshgrid(arange(w), arange(h), indexing='ij')``, ``omega = 1 / 10000 ** (arange(C // 4) / (C // 4))``, ``out_w =
grid_w.flatten()[..., None] @ omega[None]`` (the same for h), ``cat([out_w.sin(), out_w.cos(), out_h.sin(),
out_h.cos()], dim=1)[None]``; the encoder layer's self-attention with ``q = k = src + pos_embed``; back to the map
by ``permute(0, 2, 1).reshape(B, C, h, w)``.

Bugs (argument): ``flatten-without-permute``: ``flatten(2).reshape(B, h·w, C)`` (the map's channels read as
tokens: the classic slip); ``back-reshape-without-permute``: the output ``reshape(B, C, h, w)`` straight from
``(B, h·w, C)``."""

import sys

import torch
from torch import nn


def build_2d_sincos_position_embedding(w, h, embed_dim=256, temperature=10000.0):
    grid_w = torch.arange(int(w), dtype=torch.float32)
    grid_h = torch.arange(int(h), dtype=torch.float32)
    grid_w, grid_h = torch.meshgrid(grid_w, grid_h, indexing="ij")
    pos_dim = embed_dim // 4
    omega = torch.arange(pos_dim, dtype=torch.float32) / pos_dim
    omega = 1.0 / (temperature**omega)
    out_w = grid_w.flatten()[..., None] @ omega[None]
    out_h = grid_h.flatten()[..., None] @ omega[None]
    return torch.concat([out_w.sin(), out_w.cos(), out_h.sin(), out_h.cos()], dim=1)[None, :, :]


class TransformerEncoderLayer(nn.Module):
    def __init__(self, d_model, nhead):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, batch_first=True)
        self.linear1 = nn.Linear(d_model, 2 * d_model)
        self.linear2 = nn.Linear(2 * d_model, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, src, pos_embed):
        q = k = src + pos_embed
        src2, _ = self.self_attn(q, k, value=src)
        src = self.norm1(src + src2)
        return self.norm2(src + self.linear2(torch.relu(self.linear1(src))))


class AIFI(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.dim, self.bug = dim, bug
        self.input_proj = nn.Conv2d(dim, dim, 1)
        self.encoder = TransformerEncoderLayer(dim, heads)

    def forward(self, feat):                                                       # (B, C, h, w)
        feat = self.input_proj(feat)
        B, C, h, w = feat.shape
        if self.bug == "flatten-without-permute":
            src = feat.flatten(2).reshape(B, h * w, C)
        else:
            src = feat.flatten(2).permute(0, 2, 1)                                   # (B, h*w, C)
        pos_embed = build_2d_sincos_position_embedding(w, h, self.dim)
        memory = self.encoder(src, pos_embed)
        if self.bug == "back-reshape-without-permute":
            return memory.reshape(B, C, h, w)
        return memory.permute(0, 2, 1).reshape(B, C, h, w).contiguous()


BUGS = ("flatten-without-permute", "back-reshape-without-permute")
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=3 Wp=5",)
EQUAL = {"B=2 D=32 H=4 Hp=3 Wp=5": "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=3, Wp=5):
    torch.manual_seed(0)
    return AIFI(D, H, bug).eval(), (torch.randn(B, D, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
