"""huggingface/pytorch-image-models, timm/models/vision_transformer.py (``Attention``, 2023-2024, with
``qk_norm`` and ``fused_attn``): ``qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim)
.permute(2, 0, 3, 1, 4)``; ``q, k, v = qkv.unbind(0)``; ``q, k = self.q_norm(q), self.k_norm(k)`` (LayerNorm over
``head_dim``); ``F.scaled_dot_product_attention(q, k, v)``; ``x.transpose(1, 2).reshape(B, N, C)``; ``proj``.
Run on a ViT's tokens: a class token and ``N - 1`` patches.

Bugs: ``qkv-permute-tokens-as-heads``: ``permute(2, 0, 1, 3, 4)`` (the tokens left before the heads: ``q, k, v``
are ``[B, N, heads, head_dim]`` and SDPA attends across the heads of each token, not across tokens);
``qkv-three-innermost``: ``reshape(B, N, self.num_heads, self.head_dim, 3).permute(4, 0, 2, 1, 3)`` (the
``3 * dim`` output split with q/k/v innermost, while the linear lays it out ``(3, heads, head_dim)``: every q, k
and v takes interleaved features of all three)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, num_heads=8, qkv_bias=False, qk_norm=True, bug=""):
        super().__init__()
        assert dim % num_heads == 0, "dim should be divisible by num_heads"
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.q_norm = nn.LayerNorm(self.head_dim) if qk_norm else nn.Identity()
        self.k_norm = nn.LayerNorm(self.head_dim) if qk_norm else nn.Identity()
        self.proj = nn.Linear(dim, dim)
        self.bug = bug

    def forward(self, x):
        B, N, C = x.shape
        if self.bug == "qkv-permute-tokens-as-heads":
            qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 1, 3, 4)   # (3, B, N, h, d)
        elif self.bug == "qkv-three-innermost":
            qkv = self.qkv(x).reshape(B, N, self.num_heads, self.head_dim, 3).permute(4, 0, 2, 1, 3)   # (3, B, h, N, d)
        else:
            qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)   # (3, B, h, N, d)
        q, k, v = qkv.unbind(0)                                                      # (B, h, N, d)
        q, k = self.q_norm(q), self.k_norm(k)
        x = F.scaled_dot_product_attention(q, k, v)                                  # (B, h, N, d)
        x = x.transpose(1, 2).reshape(B, N, C)                                       # (B, N, C)
        return self.proj(x)


BUGS = ("qkv-permute-tokens-as-heads", "qkv-three-innermost")
TWINS = ()
DIMS = ("B=2 N=7 D=32 H=4",)
EQUAL = {"B=2 N=7 D=32 H=4": "B=4 N=4 D=32 H=4"}


def build(bug="", B=2, N=7, D=32, H=4):
    torch.manual_seed(0)
    return Attention(D, num_heads=H, bug=bug).eval(), (torch.randn(B, N, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
