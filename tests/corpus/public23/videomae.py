"""MCG-NJU/VideoMAE, ``modeling_finetune.py`` (2022, ``PatchEmbed``, ``Attention``, ``VisionTransformer``):
tubelets cut by a ``Conv3d`` with kernel ``(tubelet_size, patch, patch)``, ``self.proj(x).flatten(2).transpose(1,
2)``; a fixed sinusoid position table; the attention with a query and a value bias and no key bias
(``qkv_bias = torch.cat((self.q_bias, torch.zeros_like(self.v_bias, requires_grad=False), self.v_bias))``,
``F.linear(input=x, weight=self.qkv.weight, bias=qkv_bias)``), ``reshape(B, N, 3, num_heads, -1).permute(2, 0, 3,
1, 4)``, ``q * scale``, ``q @ k.transpose(-2, -1)``, ``softmax(dim=-1)``, ``(attn @ v).transpose(1, 2).reshape(B,
N, -1)``; mean pooling over tokens, ``fc_norm``, the head.

Bugs: ``tubelets-flatten-without-transpose``: the patch embedding written ``self.proj(x).flatten(2).reshape(B, -1,
C)`` (the ``transpose(1, 2)`` replaced by a reshape: channels and tubelets interleave); ``pool-over-channels``:
the mean pooling written ``x.mean(-1)`` before ``fc_norm`` (the slip of a ``(B, C, N)`` habit), here followed by
a head sized for it."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


def sinusoid_table(n_position, d_hid):
    pos = torch.arange(n_position, dtype=torch.float32)[:, None]
    div = torch.pow(10000, 2 * (torch.arange(d_hid) // 2) / d_hid)
    table = pos / div
    table[:, 0::2], table[:, 1::2] = torch.sin(table[:, 0::2]), torch.cos(table[:, 1::2])
    return table[None]


class Attention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=False)
        self.q_bias = nn.Parameter(torch.randn(dim) * 0.02)
        self.v_bias = nn.Parameter(torch.randn(dim) * 0.02)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv_bias = torch.cat((self.q_bias, torch.zeros_like(self.v_bias, requires_grad=False), self.v_bias))
        qkv = F.linear(input=x, weight=self.qkv.weight, bias=qkv_bias)
        qkv = qkv.reshape(B, N, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        q = q * self.scale
        attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, -1)
        return self.proj(x)


class VideoMAE(nn.Module):
    def __init__(self, frames, size, dim, heads, classes, bug=""):
        super().__init__()
        self.bug = bug
        self.proj = nn.Conv3d(3, dim, kernel_size=(2, 4, 4), stride=(2, 4, 4))
        n = (frames // 2) * (size // 4) ** 2
        self.register_buffer("pos_embed", sinusoid_table(n, dim))
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        pooled = n if bug == "pool-over-channels" else dim
        self.fc_norm = nn.LayerNorm(pooled)
        self.head = nn.Linear(pooled, classes)

    def forward(self, video):
        B = video.shape[0]
        x = self.proj(video).flatten(2)
        if self.bug == "tubelets-flatten-without-transpose":
            x = x.reshape(B, -1, x.shape[1])
        else:
            x = x.transpose(1, 2)
        x = x + self.pos_embed.type_as(x)
        x = x + self.attn(self.norm1(x))
        x = x + self.mlp(self.norm2(x))
        x = x.mean(-1) if self.bug == "pool-over-channels" else x.mean(1)
        return self.head(self.fc_norm(x))


BUGS = ("tubelets-flatten-without-transpose", "pool-over-channels")
TWINS = ()
#: F: frames (tubelets of 2), P: pixels a side (patches of 4): (F / 2) (P / 4)^2 tokens
DIMS = ("B=2 F=4 P=12 D=32 H=4",)


def build(bug="", B=2, F=4, P=12, D=32, H=4):
    torch.manual_seed(0)
    return VideoMAE(F, P, D, H, 5, bug).eval(), (torch.randn(B, 3, F, P, P),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
