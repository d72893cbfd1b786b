"""huggingface/pytorch-image-models, timm/models/levit.py (v0.9, ``Attention``): keys narrower than values
(``key_dim`` per head, ``val_dim = attn_ratio * key_dim``); ``qkv(x).view(B, N, H, -1).split([key_dim,
key_dim, val_dim], dim=3)``; ``q.permute(0, 2, 1, 3)``, ``k.permute(0, 2, 3, 1)`` (keys laid out already
transposed), ``v.permute(0, 2, 1, 3)``; ``q @ k * scale + self.attention_biases[:, self.attention_bias_idxs]``
(a learned ``(H, res * res)`` table read through ``(N, N)`` indices of the absolute row and column offsets
between patches); ``softmax(dim=-1)``; ``(attn @ v).transpose(1, 2).reshape(B, N, val_attn_dim)``.

Bug (argument): ``merge-no-transpose``: ``(attn @ v).reshape(B, N, val_attn_dim)`` (the heads merged without
moving them after the tokens: rows of different heads' tokens run together; the classic merge slip)."""

import sys

import torch
from torch import nn

BUGS = ("merge-no-transpose",)
TWINS = ()
DIMS = ("B=2 T=9 D=64 H=4",)


class Attention(nn.Module):
    def __init__(self, dim, key_dim, num_heads, attn_ratio=2, resolution=3, bug=""):
        super().__init__()
        self.num_heads, self.key_dim, self.bug = num_heads, key_dim, bug
        self.scale = key_dim**-0.5
        self.val_dim = int(attn_ratio * key_dim)
        self.val_attn_dim = self.val_dim * num_heads
        self.qkv = nn.Linear(dim, self.val_attn_dim + key_dim * num_heads * 2)
        self.proj = nn.Linear(self.val_attn_dim, dim)
        pos = torch.stack(torch.meshgrid(torch.arange(resolution), torch.arange(resolution), indexing="ij")).flatten(1)
        rel_pos = (pos[..., :, None] - pos[..., None, :]).abs()
        rel_pos = (rel_pos[0] * resolution) + rel_pos[1]  # (N, N)
        self.attention_biases = nn.Parameter(torch.randn(num_heads, resolution**2) * 0.02)
        self.register_buffer("attention_bias_idxs", rel_pos, persistent=False)

    def forward(self, x):  # (B, N, C)
        B, N, C = x.shape
        q, k, v = self.qkv(x).view(B, N, self.num_heads, -1).split([self.key_dim, self.key_dim, self.val_dim], dim=3)
        q = q.permute(0, 2, 1, 3)
        k = k.permute(0, 2, 3, 1)
        v = v.permute(0, 2, 1, 3)
        attn = q @ k * self.scale + self.attention_biases[:, self.attention_bias_idxs]  # (B, H, N, N)
        attn = attn.softmax(dim=-1)
        if self.bug == "merge-no-transpose":
            x = (attn @ v).reshape(B, N, self.val_attn_dim)
        else:
            x = (attn @ v).transpose(1, 2).reshape(B, N, self.val_attn_dim)
        return self.proj(x)


def build(bug="", B=2, T=9, D=64, H=4):
    torch.manual_seed(0)
    return Attention(D, 16, H, resolution=int(T**0.5), bug=bug), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    model(*inputs)
