"""snap-research/EfficientFormer, models/efficientformer_v2.py (``Attention4D``, stride ``None``; in timm as
``efficientformer_v2.Attention2d``): EfficientFormerV2's attention on a ``(B, C, H, W)`` map, all projections 1x1
convolutions with batch norm: ``q``/``k`` to ``num_heads * key_dim``, ``v`` to ``num_heads * d`` (``d = attn_ratio
* key_dim``); ``q = self.q(x).flatten(2).reshape(B, self.num_heads, -1, self.N).permute(0, 1, 3, 2)``, ``k`` the
same without the transpose (``permute(0, 1, 2, 3)``: ``(B, nh, kd, N)``), ``v`` as ``q``; a depthwise 3x3 conv on
the value map (``v_local``) added back at the end; scores ``(q @ k) * self.scale +
self.attention_biases[:, self.attention_bias_idxs]`` (LeViT's table: one row per head, one column per ``(|dy|,
|dx|)`` offset of the ``resolution x resolution`` grid, ``attention_bias_idxs`` an ``(N, N)`` buffer); talking heads
around the softmax (``talking_head1``/``talking_head2``: 1x1 ``Conv2d(num_heads, num_heads)``, mixing the heads'
score maps), ``attn.softmax(dim=-1)``; ``x = attn @ v``, ``x.transpose(2, 3).reshape(B, self.dh, self.resolution,
self.resolution) + v_local``, ``proj`` (ReLU, 1x1 conv, BN). The eval-time cache ``self.ab`` (``train(mode=False)``
indexes the table once) is left out: the table is indexed on every call, as in training.

Bugs: ``bias-swin-layout``: the table read with Swin's idiom for a ``(offsets, nH)`` table,
``attention_biases[:, idxs.view(-1)].view(N, N, -1).permute(2, 0, 1)`` (its ``(nH, N·N)`` rows cut as if offsets
were outer: each head's "bias" is a shuffle of all heads' biases); ``merge-without-transpose``: ``x.reshape(B, dh,
resolution, resolution)`` without the ``transpose(2, 3)`` (each output channel reads a run of one head's ``(N,
d)`` rows); ``softmax-over-heads``: ``attn.softmax(dim=1)`` (the conv habit of the channel axis: the talking heads
read the heads as channels, and the softmax followed)."""

import itertools
import sys

import torch
from torch import nn


class Attention4D(nn.Module):
    def __init__(self, dim, key_dim, num_heads, attn_ratio, resolution, bug=""):
        super().__init__()
        self.num_heads, self.key_dim, self.resolution, self.bug = num_heads, key_dim, resolution, bug
        self.scale = key_dim ** -0.5
        self.N = resolution ** 2
        self.d = int(attn_ratio * key_dim)
        self.dh = self.d * num_heads
        nh_kd = key_dim * num_heads
        self.q = nn.Sequential(nn.Conv2d(dim, nh_kd, 1), nn.BatchNorm2d(nh_kd))
        self.k = nn.Sequential(nn.Conv2d(dim, nh_kd, 1), nn.BatchNorm2d(nh_kd))
        self.v = nn.Sequential(nn.Conv2d(dim, self.dh, 1), nn.BatchNorm2d(self.dh))
        self.v_local = nn.Sequential(nn.Conv2d(self.dh, self.dh, kernel_size=3, padding=1, groups=self.dh),
                                     nn.BatchNorm2d(self.dh))
        self.talking_head1 = nn.Conv2d(num_heads, num_heads, kernel_size=1)
        self.talking_head2 = nn.Conv2d(num_heads, num_heads, kernel_size=1)
        self.proj = nn.Sequential(nn.ReLU(), nn.Conv2d(self.dh, dim, 1), nn.BatchNorm2d(dim))
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
        self.register_buffer("attention_bias_idxs", torch.LongTensor(idxs).view(N, N))   # (N, N)

    def forward(self, x):                                                            # (B, C, H, W)
        B, C, H, W = x.shape
        q = self.q(x).flatten(2).reshape(B, self.num_heads, -1, self.N).permute(0, 1, 3, 2)   # (B, nh, N, kd)
        k = self.k(x).flatten(2).reshape(B, self.num_heads, -1, self.N).permute(0, 1, 2, 3)   # (B, nh, kd, N)
        v = self.v(x)
        v_local = self.v_local(v)                                                    # (B, dh, H, W)
        v = v.flatten(2).reshape(B, self.num_heads, -1, self.N).permute(0, 1, 3, 2)   # (B, nh, N, d)
        if self.bug == "bias-swin-layout":
            ab = self.attention_biases[:, self.attention_bias_idxs.view(-1)].view(self.N, self.N, -1)
            ab = ab.permute(2, 0, 1)                                                 # (nh, N, N)
        else:
            ab = self.attention_biases[:, self.attention_bias_idxs]                  # (nh, N, N)
        attn = (q @ k) * self.scale + ab                                             # (B, nh, N, N)
        attn = self.talking_head1(attn)
        attn = attn.softmax(dim=1 if self.bug == "softmax-over-heads" else -1)
        attn = self.talking_head2(attn)
        x = attn @ v                                                                 # (B, nh, N, d)
        if self.bug == "merge-without-transpose":
            out = x.reshape(B, self.dh, self.resolution, self.resolution) + v_local  # (B, dh, H, W)
        else:
            out = x.transpose(2, 3).reshape(B, self.dh, self.resolution, self.resolution) + v_local   # (B, dh, H, W)
        return self.proj(out)                                                        # (B, C, H, W)


BUGS = ("bias-swin-layout", "merge-without-transpose", "softmax-over-heads")
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=3 Wp=3",)   # (the resolution is one number: the grid is square)
EQUAL = {DIMS[0]: "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=3):  # noqa: N803
    torch.manual_seed(0)
    model = Attention4D(D, key_dim=4, num_heads=H, attn_ratio=2, resolution=Hp, bug=bug).eval()
    return model, (torch.randn(B, D, Hp, Hp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
