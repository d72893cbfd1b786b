"""microsoft/Cream, EfficientViT/classification/model/efficientvit.py (``CascadedGroupAttention``), de2d467:
EfficientViT (MSRA, CVPR 2023). A feature map ``(B, C, H, W)`` is cut into ``num_heads`` channel groups by
``x.chunk(len(self.qkvs), dim=1)``; each head's group (plus the previous head's output: the cascade) goes through
its own 1x1 ``qkv`` conv, ``feat.view(B, -1, H, W).split([key_dim, key_dim, d], dim=1)``, a depthwise conv on q,
``flatten(2)`` to ``(B, C/h, N)``, scores ``(q.transpose(-2, -1) @ k) * scale`` plus the head's row of the
relative-offset bias table ``attention_biases[:, attention_bias_idxs]`` (an ``N x N`` index of ``|dy|, |dx|``
offsets), ``softmax(dim=-1)`` (``# BNN``), ``(v @ attn.transpose(-2, -1)).view(B, d, H, W)``; the heads' outputs
are joined by ``torch.cat(feats_out, 1)`` and projected by ``ReLU`` + a 1x1 conv. ``Conv2d_BN`` is a plain
``nn.Conv2d`` here (the batch norm folded, as at inference); the window partition of ``LocalWindowAttention`` is
not needed at one window (resolution = window).

Bugs: ``v-attn-untransposed``: ``v @ attn`` without the ``transpose(-2, -1)`` (each output pixel sums the values
weighted by the column of the scores: over the queries, the rows the softmax did not normalise);
``softmax-over-queries``: ``attn.softmax(dim=1)`` on the 3-d ``(B, N, N)`` scores (dim 1 is the queries; the slip
of writing the 4-d habit ``dim=-2``/``1`` for a 3-d tensor). Twin: ``bias-transposed``: the bias row read
``ab[i].transpose(0, 1)``: the offset table is symmetric (``|p1 - p2|``), so the transpose changes nothing."""

import itertools
import sys

import torch
from torch import nn


class CascadedGroupAttention(nn.Module):
    def __init__(self, dim, key_dim, num_heads=4, attn_ratio=2, resolution=4, kernels=(3, 3, 3, 3), bug=""):
        super().__init__()
        self.bug = bug
        self.num_heads = num_heads
        self.scale = key_dim ** -0.5
        self.key_dim = key_dim
        self.d = int(attn_ratio * key_dim)
        self.qkvs = nn.ModuleList(nn.Conv2d(dim // num_heads, key_dim * 2 + self.d, 1) for _ in range(num_heads))
        self.dws = nn.ModuleList(nn.Conv2d(key_dim, key_dim, kernels[i], 1, kernels[i] // 2, groups=key_dim)
                                 for i in range(num_heads))
        self.proj = nn.Sequential(nn.ReLU(), nn.Conv2d(self.d * num_heads, dim, 1))
        points = list(itertools.product(range(resolution), range(resolution)))
        N = len(points)
        attention_offsets, idxs = {}, []
        for p1 in points:
            for p2 in points:
                offset = (abs(p1[0] - p2[0]), abs(p1[1] - p2[1]))
                if offset not in attention_offsets:
                    attention_offsets[offset] = len(attention_offsets)
                idxs.append(attention_offsets[offset])
        self.attention_biases = nn.Parameter(torch.randn(num_heads, len(attention_offsets)) * 0.1)
        self.register_buffer("attention_bias_idxs", torch.LongTensor(idxs).view(N, N))  # (N, N)

    def forward(self, x):  # x (B, C, H, W)
        B, C, H, W = x.shape
        ab = self.attention_biases[:, self.attention_bias_idxs]  # (h, N, N)
        feats_in = x.chunk(len(self.qkvs), dim=1)  # h x (B, C/h, H, W)
        feats_out = []
        feat = feats_in[0]
        for i, qkv in enumerate(self.qkvs):
            if i > 0:
                feat = feat + feats_in[i]
            feat = qkv(feat)
            q, k, v = feat.view(B, -1, H, W).split([self.key_dim, self.key_dim, self.d], dim=1)  # (B, kd, H, W)
            q = self.dws[i](q)
            q, k, v = q.flatten(2), k.flatten(2), v.flatten(2)  # (B, kd, N)
            bias = ab[i].transpose(0, 1) if self.bug == "bias-transposed" else ab[i]  # (N, N)
            attn = (q.transpose(-2, -1) @ k) * self.scale + bias  # (B, N, N)
            attn = attn.softmax(dim=1 if self.bug == "softmax-over-queries" else -1)  # (B, N, N)
            if self.bug == "v-attn-untransposed":
                feat = (v @ attn).view(B, self.d, H, W)  # (B, d, H, W)
            else:
                feat = (v @ attn.transpose(-2, -1)).view(B, self.d, H, W)  # (B, d, H, W)
            feats_out.append(feat)
        return self.proj(torch.cat(feats_out, 1))  # (B, C, H, W)


BUGS = ("v-attn-untransposed", "softmax-over-queries")
TWINS = ("bias-transposed",)
DIMS = ("B=2 D=32 H=4 Hp=3 Wp=3",)
EQUAL = {"B=2 D=32 H=4 Hp=3 Wp=3": "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=3):
    torch.manual_seed(0)
    model = CascadedGroupAttention(D, key_dim=4, num_heads=H, attn_ratio=2, resolution=Hp, bug=bug).eval()
    return model, (torch.randn(B, D, Hp, Hp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
