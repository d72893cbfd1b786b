"""cheerss/CrossFormer, models/crossformer.py (``CrossFormerBlock``, ``Attention`` without the dynamic position
bias): tokens ``(B, Hg*Wg, C)`` viewed ``(B, Hg, Wg, C)`` and grouped in ``G x G`` groups; short-distance
attention (SDA, ``lsda_flag == 0``): ``x.reshape(B, H // G, G, W // G, G, C).permute(0, 1, 3, 2, 4, 5)``
(neighbouring tokens a group), long-distance attention (LDA, ``lsda_flag == 1``): ``Ip, Iq = H // G, W // G``,
``x.reshape(B, G, Ip, G, Iq, C).permute(0, 2, 4, 1, 3, 5)`` (tokens every ``Ip`` rows and ``Iq`` columns a
group); ``reshape(B * nG, G * G, C)``; attention: ``qkv(x).reshape(B_, N, 3, h, C // h).permute(2, 0, 3, 1, 4)``,
``q * scale``, ``q @ k.transpose(-2, -1)``, softmax, ``(attn @ v).transpose(1, 2).reshape(B_, N, C)``, ``proj``;
ungrouped: SDA ``reshape(B, H // G, W // G, G, G, C).permute(0, 1, 3, 2, 4, 5)``, LDA ``reshape(B, Ip, Iq, G, G,
C).permute(0, 3, 1, 4, 2, 5)``. Block 0 SDA, block 1 LDA. Here the grid is ``Hp x Wp`` tokens, ``G = 2``.

Bugs (argument): ``lda-ungrouped-as-sda``: the long-distance groups put back with the short-distance permute
``(0, 1, 3, 2, 4, 5)`` (the slip of copying the SDA branch: every token lands at another grid cell);
``sda-grouped-without-permute``: the SDA grouping ``reshape(B * nG, G * G, C)`` straight after the
``reshape(B, H // G, G, W // G, G, C)`` (each "group" a strip of two rows' halves)."""

import sys

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B_, N, C = x.shape
        qkv = self.qkv(x).reshape(B_, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        q = q * self.scale
        attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(B_, N, C))


class CrossFormerBlock(nn.Module):
    def __init__(self, dim, heads, grid, group_size=2, lsda_flag=0, bug=""):
        super().__init__()
        self.H, self.W = grid
        self.G, self.lsda_flag, self.bug = group_size, lsda_flag, bug
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)

    def forward(self, x):                                                          # (B, L, C)
        H, W, G = self.H, self.W, self.G
        B, L, C = x.shape
        shortcut = x
        x = self.norm1(x).view(B, H, W, C)
        if self.lsda_flag == 0:
            x = x.reshape(B, H // G, G, W // G, G, C)
            if self.bug != "sda-grouped-without-permute":
                x = x.permute(0, 1, 3, 2, 4, 5)
        else:
            Ip, Iq = H // G, W // G
            x = x.reshape(B, G, Ip, G, Iq, C).permute(0, 2, 4, 1, 3, 5)
        x = x.reshape(B * H * W // G**2, G**2, C)
        x = self.attn(x)
        if self.lsda_flag == 0 or self.bug == "lda-ungrouped-as-sda":
            x = x.reshape(B, H // G, W // G, G, G, C).permute(0, 1, 3, 2, 4, 5)
        else:
            x = x.reshape(B, H // G, W // G, G, G, C).permute(0, 3, 1, 4, 2, 5)
        x = x.reshape(B, H * W, C)
        return shortcut + x


class CrossFormerStage(nn.Module):
    def __init__(self, dim, heads, grid, bug=""):
        super().__init__()
        self.blocks = nn.Sequential(CrossFormerBlock(dim, heads, grid, lsda_flag=0, bug=bug),
                                    CrossFormerBlock(dim, heads, grid, lsda_flag=1, bug=bug))

    def forward(self, x):
        return self.blocks(x)


BUGS = ("lda-ungrouped-as-sda", "sda-grouped-without-permute")
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=4 Wp=6",)
EQUAL = {"B=2 D=32 H=4 Hp=4 Wp=6": "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=4, Wp=6):
    torch.manual_seed(0)
    return CrossFormerStage(D, H, (Hp, Wp), bug).eval(), (torch.randn(B, Hp * Wp, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
