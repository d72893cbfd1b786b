"""huggingface/pytorch-image-models, timm/models/xcit.py (v0.9, ``XCA``: cross-covariance attention): the
attention runs over each head's channels, not over the tokens, by design: ``qkv.reshape(B, N, 3, H, C //
H).permute(2, 0, 3, 4, 1)`` (``(3, B, H, d, N)``), ``unbind(0)``, ``F.normalize(q, dim=-1)`` and the same for
``k`` (each channel's row normalised over the tokens), ``(q @ k.transpose(-2, -1)) * self.temperature``
(a learned ``(H, 1, 1)``), ``softmax(dim=-1)`` over the ``d x d`` channel map, ``(attn @ v).permute(0, 3, 1,
2).reshape(B, N, C)``.

Bug (argument): ``normalize-channels``: ``F.normalize(q, dim=-2)`` and ``F.normalize(k, dim=-2)`` (each
token's vector normalised over the head's channels, the habit of cosine attention over tokens, e.g. Swin-v2,
carried into XCA, where the paper normalises over tokens; a natural slip)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("normalize-channels",)
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)


class XCA(nn.Module):
    def __init__(self, dim, num_heads=8, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        self.temperature = nn.Parameter(torch.ones(num_heads, 1, 1))
        self.qkv, self.proj = nn.Linear(dim, dim * 3), nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 4, 1)
        q, k, v = qkv.unbind(0)  # (B, H, d, N)
        axis = -2 if self.bug == "normalize-channels" else -1
        q = F.normalize(q, dim=axis)
        k = F.normalize(k, dim=axis)
        attn = (q @ k.transpose(-2, -1)) * self.temperature  # (B, H, d, d)
        attn = attn.softmax(dim=-1)
        x = (attn @ v).permute(0, 3, 1, 2).reshape(B, N, C)  # (B, N, C)
        return self.proj(x)


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    return XCA(D, H, bug), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    model(*inputs)
