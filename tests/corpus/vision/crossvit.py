"""IBM/CrossViT, models/crossvit.py (https://github.com/IBM/CrossViT/blob/main/models/crossvit.py):
``CrossAttention`` (the query is the class token alone, ``x[:, 0:1, ...]``; keys and values from every
token: scores ``(B, H, 1, N)``) and ``CrossAttentionBlock`` (``x[:, 0:1, ...] + attn(norm(x))``), fed
the small branch's class token projected to the large branch's width and joined to the large branch's
patches (``torch.cat((proj_cls, x_large[:, 1:, ...]), dim=1)``), as ``MultiScaleBlock`` does.

Bug (argument): ``no-permute``: the keys reshaped ``(B, H, N, d)`` straight from ``(B, N, C)``, the
reshape-for-permute slip."""

import sys

import torch
from torch import nn


class CrossAttention(nn.Module):
    def __init__(self, dim, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        head_dim = dim // num_heads
        self.scale = head_dim ** -0.5
        self.wq = nn.Linear(dim, dim)
        self.wk = nn.Linear(dim, dim)
        self.wv = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        q = self.wq(x[:, 0:1, ...]).reshape(B, 1, self.num_heads, C // self.num_heads)  # (B, 1, H, d)
        q = q.permute(0, 2, 1, 3)  # (B, H, 1, d)
        if self.bug == "no-permute":
            k = self.wk(x).reshape(B, self.num_heads, N, C // self.num_heads)  # bug
        else:
            k = self.wk(x).reshape(B, N, self.num_heads, C // self.num_heads).permute(0, 2, 1, 3)  # (B, H, N, d)
        v = self.wv(x).reshape(B, N, self.num_heads, C // self.num_heads).permute(0, 2, 1, 3)  # (B, H, N, d)
        attn = (q @ k.transpose(-2, -1)) * self.scale  # (B, H, 1, N)
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, 1, C)  # (B, 1, C)
        return self.proj(x)


class CrossBranch(nn.Module):
    def __init__(self, small_dim=24, large_dim=36, num_heads=3, bug=""):
        super().__init__()
        self.proj_cls = nn.Linear(small_dim, large_dim)
        self.norm1 = nn.LayerNorm(large_dim)
        self.attn = CrossAttention(large_dim, num_heads, bug=bug)
        self.revert = nn.Linear(large_dim, small_dim)

    def forward(self, x_small, x_large):
        proj_cls = self.proj_cls(x_small[:, 0:1, ...])  # (B, 1, C_large)
        tmp = torch.cat((proj_cls, x_large[:, 1:, ...]), dim=1)  # (B, 1+N_large, C_large)
        tmp = tmp[:, 0:1, ...] + self.attn(self.norm1(tmp))  # (B, 1, C_large)
        reverted = self.revert(tmp)  # (B, 1, C_small)
        return torch.cat((reverted, x_small[:, 1:, ...]), dim=1)  # (B, 1+N_small, C_small)


def build(bug=""):
    """--dims B=2,T=5,S=9,D=24 (small branch 1+4 tokens of 24; large branch 1+8 tokens of 36, 3 heads)."""
    torch.manual_seed(0)
    model = CrossBranch(bug=bug).eval()
    return model, (torch.randn(2, 5, 24), torch.randn(2, 9, 36))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
