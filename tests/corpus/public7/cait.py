"""facebookresearch/deit, cait_models.py (``Class_Attention``, ``LayerScale_Block_CA``;
https://github.com/facebookresearch/deit): only the class token queries: ``q =
self.q(x[:, 0]).unsqueeze(1).reshape(B, 1, self.num_heads, C // self.num_heads).permute(0, 2, 1, 3)``;
keys and values from every token ``self.k(x).reshape(B, N, self.num_heads, C // self.num_heads)
.permute(0, 2, 1, 3)``; ``q = q * self.scale``; ``attn = (q @ k.transpose(-2, -1))``; ``softmax(dim=-1)``;
``x_cls = (attn @ v).transpose(1, 2).reshape(B, 1, C)``; the block runs it on ``u = torch.cat((x_cls,
x), dim=1)`` and adds it to the class token only.

Bug (argument): ``k-view-no-permute``: ``self.k(x).reshape(B, self.num_heads, N, C // self.num_heads)``
without the permute (the FuxiCTR #30 mistake on CaiT's keys). Twin (correct): ``merge-no-transpose``:
``(attn @ v).reshape(B, 1, C)`` without ``transpose(1, 2)``: the query axis has one entry, so ``(B, h, 1,
d_k)`` and ``(B, 1, h, d_k)`` hold their elements in the same order; names must not call it a bug."""

import sys

import torch
from torch import nn

BUGS = ("k-view-no-permute",)
TWINS = ("merge-no-transpose",)
DIMS = ("B=2 T=6 D=32 H=4",)


class ClassAttention(nn.Module):
    def __init__(self, dim=32, num_heads=4, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        head_dim = dim // num_heads
        self.scale = head_dim**-0.5
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        q = self.q(x[:, 0]).unsqueeze(1).reshape(B, 1, self.num_heads, C // self.num_heads).permute(0, 2, 1, 3)
        if self.bug == "k-view-no-permute":
            k = self.k(x).reshape(B, self.num_heads, N, C // self.num_heads)  # bug: no permute
        else:
            k = self.k(x).reshape(B, N, self.num_heads, C // self.num_heads).permute(0, 2, 1, 3)  # (B, h, N, d_k)
        q = q * self.scale  # (B, h, 1, d_k)
        v = self.v(x).reshape(B, N, self.num_heads, C // self.num_heads).permute(0, 2, 1, 3)  # (B, h, N, d_k)
        attn = q @ k.transpose(-2, -1)  # (B, h, 1, N)
        attn = attn.softmax(dim=-1)
        if self.bug == "merge-no-transpose":
            x_cls = (attn @ v).reshape(B, 1, C)  # (B, 1, C): one query, same order
        else:
            x_cls = (attn @ v).transpose(1, 2).reshape(B, 1, C)  # (B, 1, C)
        return self.proj(x_cls)


class LayerScaleBlockCA(nn.Module):
    def __init__(self, dim=32, num_heads=4, bug=""):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = ClassAttention(dim, num_heads, bug)
        self.gamma_1 = nn.Parameter(1e-4 * torch.ones(dim))

    def forward(self, x, x_cls):
        u = torch.cat((x_cls, x), dim=1)  # (B, 1+T, D)
        return x_cls + self.gamma_1 * self.attn(self.norm1(u))


def build(bug="", B=2, T=6, D=32, H=4):
    """--dims 'B=2 T=6 D=32 H=4': patch tokens (B, T, D) and the class token (B, 1, D)."""
    torch.manual_seed(0)
    cls_token = torch.randn(1, 1, D)
    return LayerScaleBlockCA(D, H, bug).eval(), (torch.randn(B, T, D), cls_token.expand(B, -1, -1))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
