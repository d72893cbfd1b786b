"""OliverRensu/Shunted-Transformer, SSA.py (``Attention``, the ``sr_ratio > 1`` branch; ``Block``), 999e268:
shunted self-attention (CVPR 2022). Queries ``q(x).reshape(B, N, num_heads, C // num_heads).permute(0, 2, 1, 3)``;
the tokens folded to an image ``x.permute(0, 2, 1).reshape(B, C, H, W)`` and reduced twice, by ``sr1`` (a conv
of kernel and stride ``sr_ratio``) and ``sr2`` (``sr_ratio / 2``), each ``reshape(B, C, -1).permute(0, 2, 1)``,
``LayerNorm`` and ``GELU``; each reduction gives half the heads their keys and values, ``kv1(x_1).reshape(B, -1,
2, num_heads // 2, C // num_heads).permute(2, 0, 3, 1, 4)``; ``q[:, :num_heads // 2] @ k1.transpose(-2, -1)``,
``softmax(dim=-1)``; a depthwise ``local_conv1`` over v1 as an image (``v1.transpose(1, 2).reshape(B, -1, C //
2).transpose(1, 2).view(B, C // 2, H // sr, W // sr)``, back by ``view(B, num_heads // 2, C // num_heads,
-1).transpose(-1, -2)``) added to v1; ``(attn1 @ v1).transpose(1, 2).reshape(B, N, C // 2)``; the same for the
other half with ``sr2``; ``torch.cat([x1, x2], dim=-1)`` and ``proj``. Here ``sr_ratio = 2`` (``sr1`` stride 2,
``sr2`` a 1x1 conv), as in the third stage of ``shunted_t``.

Bugs: ``kv-heads-interleaved``: ``kv1`` cut ``reshape(B, -1, 2, C // num_heads, num_heads // 2).permute(2, 0,
4, 1, 3)`` (heads as the inner factor of the channels) while q takes them as the outer one: each query head
meets another head's keys; ``local-conv-no-transpose``: ``v1.reshape(B, -1, C // 2)`` without the
``transpose(1, 2)`` first (the heads-first ``(B, h, N', d)`` read as tokens-first: heads and tokens mixed before
the depthwise conv)."""

import sys

import torch
from torch import nn


class ShuntedAttention(nn.Module):
    def __init__(self, dim, num_heads=4, sr_ratio=2, bug=""):
        super().__init__()
        self.bug = bug
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.sr_ratio = sr_ratio
        self.q = nn.Linear(dim, dim, bias=False)
        self.act = nn.GELU()
        self.sr1 = nn.Conv2d(dim, dim, kernel_size=sr_ratio, stride=sr_ratio)
        self.norm1 = nn.LayerNorm(dim)
        self.sr2 = nn.Conv2d(dim, dim, kernel_size=sr_ratio // 2, stride=sr_ratio // 2)
        self.norm2 = nn.LayerNorm(dim)
        self.kv1 = nn.Linear(dim, dim, bias=False)
        self.kv2 = nn.Linear(dim, dim, bias=False)
        self.local_conv1 = nn.Conv2d(dim // 2, dim // 2, kernel_size=3, padding=1, stride=1, groups=dim // 2)
        self.local_conv2 = nn.Conv2d(dim // 2, dim // 2, kernel_size=3, padding=1, stride=1, groups=dim // 2)
        self.proj = nn.Linear(dim, dim)

    def local(self, conv, v, B, C, h, w):
        if self.bug == "local-conv-no-transpose" and conv is self.local_conv1:
            img = v.reshape(B, -1, C // 2).transpose(1, 2).view(B, C // 2, h, w)  # (B, C/2, h, w)
        else:
            img = v.transpose(1, 2).reshape(B, -1, C // 2).transpose(1, 2).view(B, C // 2, h, w)  #
        out = conv(img).view(B, C // 2, -1).view(B, self.num_heads // 2, C // self.num_heads, -1)  # (B, H/2, d_k, N')
        return v + out.transpose(-1, -2)  # (B, H/2, N', d_k)

    def forward(self, x, H, W):
        B, N, C = x.shape
        nh = self.num_heads
        q = self.q(x).reshape(B, N, nh, C // nh).permute(0, 2, 1, 3)  # (B, H, N, d_k)
        x_ = x.permute(0, 2, 1).reshape(B, C, H, W)  # (B, C, Hp, Wp)
        x_1 = self.act(self.norm1(self.sr1(x_).reshape(B, C, -1).permute(0, 2, 1)))  # (B, N/4, C)
        x_2 = self.act(self.norm2(self.sr2(x_).reshape(B, C, -1).permute(0, 2, 1)))  # (B, N, C)
        if self.bug == "kv-heads-interleaved":
            kv1 = self.kv1(x_1).reshape(B, -1, 2, C // nh, nh // 2).permute(2, 0, 4, 1, 3)  # (2, B, H/2, N/4, d_k)
        else:
            kv1 = self.kv1(x_1).reshape(B, -1, 2, nh // 2, C // nh).permute(2, 0, 3, 1, 4)  # (2, B, H/2, N/4, d_k)
        kv2 = self.kv2(x_2).reshape(B, -1, 2, nh // 2, C // nh).permute(2, 0, 3, 1, 4)  # (2, B, H/2, N, d_k)
        k1, v1 = kv1[0], kv1[1]
        k2, v2 = kv2[0], kv2[1]
        attn1 = (q[:, :nh // 2] @ k1.transpose(-2, -1)) * self.scale  # (B, H/2, N, N/4)
        attn1 = attn1.softmax(dim=-1)
        v1 = self.local(self.local_conv1, v1, B, C, H // self.sr_ratio, W // self.sr_ratio)
        x1 = (attn1 @ v1).transpose(1, 2).reshape(B, N, C // 2)  # (B, N, C/2)
        attn2 = (q[:, nh // 2:] @ k2.transpose(-2, -1)) * self.scale  # (B, H/2, N, N)
        attn2 = attn2.softmax(dim=-1)
        v2 = self.local(self.local_conv2, v2, B, C, H * 2 // self.sr_ratio, W * 2 // self.sr_ratio)
        x2 = (attn2 @ v2).transpose(1, 2).reshape(B, N, C // 2)  # (B, N, C/2)
        return self.proj(torch.cat([x1, x2], dim=-1))  # (B, N, C)


class Block(nn.Module):
    def __init__(self, dim, num_heads, bug=""):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = ShuntedAttention(dim, num_heads=num_heads, sr_ratio=2, bug=bug)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x, H, W):
        x = x + self.attn(self.norm1(x), H, W)
        return x + self.mlp(self.norm2(x))


class Stage(nn.Module):
    """An ``OverlapPatchEmbed``-style 1x1 conv embedding (``flatten(2).transpose(1, 2)``) and one block."""

    def __init__(self, dim, num_heads, bug=""):
        super().__init__()
        self.embed = nn.Conv2d(dim, dim, kernel_size=1)
        self.block = Block(dim, num_heads, bug)

    def forward(self, img):
        x = self.embed(img)
        _, _, H, W = x.shape
        x = x.flatten(2).transpose(1, 2)  # (B, N, C)
        return self.block(x, H, W)


BUGS = ("kv-heads-interleaved", "local-conv-no-transpose")
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=6 Wp=8",)
EQUAL = {"B=2 D=32 H=4 Hp=6 Wp=8": "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=6, Wp=8):
    torch.manual_seed(0)
    model = Stage(D, H, bug).eval()
    return model, (torch.randn(B, D, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
