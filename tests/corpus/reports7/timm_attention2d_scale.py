"""huggingface/pytorch-image-models issue #2385 ("[BUG] Wrong scale in ``Attention2d`` in ``fused_attn``
mode", labelled bug; rwightman: "it's wrong but backwards from that, the .scale attr is wrong … should be
``self.scale = dim_head ** -0.5``"): ``timm/layers/attention2d.py``'s ``Attention2d`` set ``self.scale =
num_heads ** -0.5``, so its unfused path scaled the scores by the head count, not by the head's width, and
disagreed with the fused path (SDPA's default ``dim_head ** -0.5``).

The repository's idiom: a ``1x1`` conv ``qkv`` on an NCHW map, ``view(B, num_heads, dim_head * 3,
-1).chunk(3, dim=2)`` (channels-first heads, ``(B, heads, d, N)``), ``q.transpose(-2, -1) @ k``,
``softmax(dim=-1)``, ``v @ attn.transpose(-2, -1)``, ``view(B, -1, H, W)``, a ``1x1`` conv ``proj``; the fused
path ``F.scaled_dot_product_attention(q.transpose(-1, -2), …).transpose(-1, -2)``. A 2x3 map (Hp = 2, Wp =
3), D = 32 channels, 4 heads (d = 8: ``num_heads ** -0.5`` = 0.5, ``dim_head ** -0.5`` ≈ 0.354).

Bug (argument): ``scale-by-heads``: the unfused path with ``num_heads ** -0.5``. Twin: ``fused`` (the fused
path, correct)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("scale-by-heads",)
TWINS = ("fused",)
DIMS = ("B=2 Hp=2 Wp=3 D=32 H=4",)
EQUAL = {"B=2 Hp=2 Wp=3 D=32 H=4": "B=4 Hp=4 Wp=4 D=32 H=4"}


class Attention2d(nn.Module):
    def __init__(self, dim, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.dim_head, self.bug = num_heads, dim // num_heads, bug
        self.scale = num_heads ** -0.5 if bug == "scale-by-heads" else self.dim_head ** -0.5   # [scale]
        self.fused_attn = bug == "fused"
        self.qkv = nn.Conv2d(dim, dim * 3, 1)
        self.proj = nn.Conv2d(dim, dim, 1)

    def forward(self, x):
        B, C, H, W = x.shape
        q, k, v = self.qkv(x).view(B, self.num_heads, self.dim_head * 3, -1).chunk(3, dim=2)   # (B, h, d, N)
        if self.fused_attn:
            x = F.scaled_dot_product_attention(
                q.transpose(-1, -2).contiguous(), k.transpose(-1, -2).contiguous(),
                v.transpose(-1, -2).contiguous()).transpose(-1, -2).reshape(B, -1, H, W)
        else:
            attn = (q.transpose(-2, -1) @ k) * self.scale                                        # [scores]
            attn = attn.softmax(dim=-1)
            x = (v @ attn.transpose(-2, -1)).view(B, -1, H, W)
        return self.proj(x)


def build(bug="", B=2, Hp=2, Wp=3, D=32, H=4):
    torch.manual_seed(0)
    return Attention2d(D, H, bug).eval(), (torch.randn(B, D, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
