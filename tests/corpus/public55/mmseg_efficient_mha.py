"""open-mmlab/mmsegmentation, mmseg/models/backbones/mit.py (``EfficientMultiheadAttention``, ``MixFFN``,
``TransformerEncoderLayer``, ``MixVisionTransformer.forward``) with mmseg/models/utils/embed.py (``PatchEmbed``)
and mmseg/models/utils/shape_convert.py (``nlc_to_nchw``, ``nchw_to_nlc``): the first stage of SegFormer's MiT
encoder as MMSegmentation writes it. ``PatchEmbed`` (a 7 x 7 conv of stride 4, ``out_size = (x.shape[2],
x.shape[3])``, ``flatten(2).transpose(1, 2)``, LayerNorm) returns the tokens and ``hw_shape``; spatial reduction of
the keys and values with the shared helpers (``nlc_to_nchw``: ``x.transpose(1, 2).reshape(B, C, H, W)``; a strided
``Conv2d`` ``sr``; ``nchw_to_nlc``: ``x.flatten(2).transpose(1, 2)``; LayerNorm); attention by a seq-first
``nn.MultiheadAttention`` (mmcv >= 1.3.17), so with ``batch_first`` the wrapper transposes ``x_q`` and ``x_kv`` to
``(N, B, C)`` and the output back; ``identity + out``; ``MixFFN`` (1 x 1 conv, depthwise 3 x 3 conv, GELU, 1 x 1
conv) on ``nlc_to_nchw(x, hw_shape)``; the stage's output ``nlc_to_nchw(x, hw_shape)``.

Bugs: ``hw-shape-swapped``: ``out_size = (x.shape[3], x.shape[2])`` (width first: every ``nlc_to_nchw`` reads
the row-major tokens as a ``W x H`` map, so the reduction conv and the depthwise conv pool and mix tokens that are
not neighbours, and the stage returns a ``(B, C, W, H)`` map); ``nlc-to-nchw-no-transpose``: the shared helper
written ``x.reshape(B, C, H, W)`` without ``transpose(1, 2)`` (tokens and channels mixed before every conv).
Twin: ``mha-batch-first``: ``nn.MultiheadAttention(..., batch_first=True)`` given the batch-first tensors with no
transposes (the layout the legacy ``forward`` relied on before mmcv 1.3.17)."""

import sys

import torch
from torch import nn


def nlc_to_nchw(x, hw_shape, bug=""):
    H, W = hw_shape
    B, L, C = x.shape
    assert L == H * W, "The seq_len does not match H, W"
    if bug == "nlc-to-nchw-no-transpose":
        return x.reshape(B, C, H, W)                                                 # bug: no transpose(1, 2)
    return x.transpose(1, 2).reshape(B, C, H, W)                                     # (B, C, H, W)


def nchw_to_nlc(x):
    return x.flatten(2).transpose(1, 2).contiguous()                                 # (B, H*W, C)


class PatchEmbed(nn.Module):
    def __init__(self, in_channels=3, embed_dims=32, kernel_size=7, stride=4, bug=""):
        super().__init__()
        self.projection = nn.Conv2d(in_channels, embed_dims, kernel_size, stride, padding=kernel_size // 2)
        self.norm = nn.LayerNorm(embed_dims)
        self.bug = bug

    def forward(self, x):
        x = self.projection(x)                                                       # (B, C, H, W)
        out_size = (x.shape[3], x.shape[2]) if self.bug == "hw-shape-swapped" else (x.shape[2], x.shape[3])
        x = x.flatten(2).transpose(1, 2)                                             # (B, H*W, C)
        return self.norm(x), out_size


class EfficientMultiheadAttention(nn.Module):
    def __init__(self, embed_dims, num_heads, sr_ratio=2, bug=""):
        super().__init__()
        self.batch_first = bug != "mha-batch-first"
        self.attn = nn.MultiheadAttention(embed_dims, num_heads, batch_first=not self.batch_first)
        self.sr = nn.Conv2d(embed_dims, embed_dims, kernel_size=sr_ratio, stride=sr_ratio)
        self.norm = nn.LayerNorm(embed_dims)
        self.bug = bug

    def forward(self, x, hw_shape, identity=None):
        x_q = x
        x_kv = nlc_to_nchw(x, hw_shape, self.bug)                                    # (B, C, H, W)
        x_kv = self.sr(x_kv)                                                         # (B, C, H/sr, W/sr)
        x_kv = nchw_to_nlc(x_kv)                                                     # (B, N/sr², C)
        x_kv = self.norm(x_kv)
        if identity is None:
            identity = x_q
        if self.batch_first:
            x_q = x_q.transpose(0, 1)                                                # (N, B, C)
            x_kv = x_kv.transpose(0, 1)                                              # (N/sr², B, C)
        out = self.attn(query=x_q, key=x_kv, value=x_kv)[0]
        if self.batch_first:
            out = out.transpose(0, 1)                                                # (B, N, C)
        return identity + out


class MixFFN(nn.Module):
    def __init__(self, embed_dims, feedforward_channels, bug=""):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(embed_dims, feedforward_channels, 1),
            nn.Conv2d(feedforward_channels, feedforward_channels, 3, padding=1, groups=feedforward_channels),
            nn.GELU(),
            nn.Conv2d(feedforward_channels, embed_dims, 1))
        self.bug = bug

    def forward(self, x, hw_shape, identity=None):
        out = nlc_to_nchw(x, hw_shape, self.bug)                                     # (B, C, H, W)
        out = self.layers(out)
        out = nchw_to_nlc(out)                                                       # (B, H*W, C)
        return (x if identity is None else identity) + out


class MiTStage(nn.Module):
    def __init__(self, embed_dims=32, num_heads=4, sr_ratio=2, mlp_ratio=4, bug=""):
        super().__init__()
        self.patch_embed = PatchEmbed(3, embed_dims, bug=bug)
        self.norm1, self.norm2 = nn.LayerNorm(embed_dims), nn.LayerNorm(embed_dims)
        self.attn = EfficientMultiheadAttention(embed_dims, num_heads, sr_ratio, bug)
        self.ffn = MixFFN(embed_dims, mlp_ratio * embed_dims, bug)
        self.norm = nn.LayerNorm(embed_dims)
        self.bug = bug

    def forward(self, x):
        x, hw_shape = self.patch_embed(x)
        x = self.attn(self.norm1(x), hw_shape, identity=x)
        x = self.ffn(self.norm2(x), hw_shape, identity=x)
        x = self.norm(x)
        return nlc_to_nchw(x, hw_shape, self.bug)                                    # (B, C, H, W)


BUGS = ("hw-shape-swapped", "nlc-to-nchw-no-transpose")
TWINS = ("mha-batch-first",)
DIMS = ("B=2 D=32 H=4 Hp=6 Wp=10",)
EQUAL = {DIMS[0]: "B=4 D=32 H=4 Hp=4 Wp=6"}


def build(bug="", B=2, D=32, H=4, Hp=6, Wp=10):  # noqa: N803
    torch.manual_seed(0)
    return MiTStage(D, H, bug=bug).eval(), (torch.randn(B, 3, 4 * Hp, 4 * Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
