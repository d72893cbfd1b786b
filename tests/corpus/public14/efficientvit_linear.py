"""mit-han-lab/efficientvit, efficientvit/models/nn/ops.py (v1.0, ``LiteMLA.relu_linear_att``): a 1x1 conv
makes ``qkv`` ``[B, 3 h d, H, W]``, reshaped ``(B, -1, 3 * d, H * W)`` and cut into q, k, v along the channels;
``relu`` feature maps; ``v`` padded with a row of ones (``F.pad(v, (0, 0, 0, 1), value=1)``) so that
``vk = v @ k^T`` then ``out = vk @ q`` carries the normaliser in its last row; ``out[:, :, :-1] / (out[:, :, -1:]
+ eps)``; reshaped back to ``[B, h d, H, W]`` and projected.

Bugs (argument): ``ones-row-first``: the ones padded before the value rows (``F.pad(v, (0, 0, 1, 0))``, the
pad's (before, after) order read backwards) while the normaliser is still read from the last row: the output
divides by one value channel's sum and keeps the true normaliser as a feature."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


class LiteMLA(nn.Module):
    def __init__(self, dim, heads, bug="", eps=1e-15):
        super().__init__()
        self.heads, self.head_dim, self.bug, self.eps = heads, dim // heads, bug, eps
        self.qkv = nn.Conv2d(dim, 3 * dim, 1, bias=False)
        self.proj = nn.Conv2d(dim, dim, 1)

    def relu_linear_att(self, qkv):                                              # (B, 3 h d, H, W)
        B, _, H, W = qkv.shape
        qkv = qkv.reshape(B, -1, 3 * self.head_dim, H * W)                       # (B, h, 3 d, N)
        q, k, v = (qkv[:, :, 0:self.head_dim], qkv[:, :, self.head_dim:2 * self.head_dim],
                   qkv[:, :, 2 * self.head_dim:])
        q, k = F.relu(q), F.relu(k)
        trans_k = k.transpose(-1, -2)                                            # (B, h, N, d)
        pad = (0, 0, 1, 0) if self.bug == "ones-row-first" else (0, 0, 0, 1)
        v = F.pad(v, pad, mode="constant", value=1)                              # (B, h, d+1, N)
        vk = torch.matmul(v, trans_k)                                            # (B, h, d+1, d)
        out = torch.matmul(vk, q)                                                # (B, h, d+1, N)
        out = out[:, :, :-1] / (out[:, :, -1:] + self.eps)
        return out.reshape(B, -1, H, W)

    def forward(self, x):                                                        # (B, C, H, W)
        return x + self.proj(self.relu_linear_att(self.qkv(x)))


BUGS = ("ones-row-first",)
TWINS = ()
DIMS = ("B=2 D=32 H=4",)
EQUAL = {"B=2 D=32 H=4": "B=4 D=32 H=4"}


def build(bug="", B=2, D=32, H=4):
    torch.manual_seed(0)
    return LiteMLA(D, H, bug).eval(), (torch.randn(B, D, 3, 5),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
