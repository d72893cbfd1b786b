"""microsoft/CvT, lib/models/cls_cvt.py (``Attention``: ``_build_projection``, ``forward_conv``, ``forward``):
the tokens ``(B, 1 + h*w, C)`` with the class token kept apart (``cls_token, x = torch.split(x, [1, h*w], 1)``),
the map ``rearrange(x, 'b (h w) c -> b c h w', h=h, w=w)``, each of q, k, v projected by a depthwise
``nn.Conv2d(dim, dim, 3, padding=1, stride=s, groups=dim)`` + ``BatchNorm2d`` + ``Rearrange('b c h w -> b (h w)
c')`` with ``stride_q = 1`` and ``stride_kv = 2`` (keys and values over a coarser grid), the class token cat back
in front of each; then ``proj_q``/``proj_k``/``proj_v`` linears and ``rearrange(..., 'b t (h d) -> b h t d',
h=self.num_heads)``; ``attn_score = torch.einsum('bhlk,bhtk->bhlt', [q, k]) * self.scale``, softmax over the
last axis, ``torch.einsum('bhlt,bhtv->bhlv', [attn, v])``, ``rearrange(x, 'b h t d -> b t (h d)')``, ``proj``.
The grid here is 3 x 5 (``Hp x Wp``): not square.

Bugs (argument): ``grid-h-w-swapped``: ``self.forward_conv(x, w, h)`` (the grid's sides passed in the other
order: on a non-square map the conv runs over the tokens folded 5 x 3, so neighbours in the conv are not
neighbours in the image; at equal sides it is the same fold). Twin ``merge-heads-d-h``: ``'b h t d -> b t (d
h)'`` (the merged features reordered before the learnt ``proj``)."""

import sys

import torch
from einops import rearrange
from einops.layers.torch import Rearrange
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, num_heads, stride_kv=2, stride_q=1, bug=""):
        super().__init__()
        self.num_heads, self.scale, self.bug = num_heads, dim**-0.5, bug
        self.conv_proj_q = self._build_projection(dim, stride_q)
        self.conv_proj_k = self._build_projection(dim, stride_kv)
        self.conv_proj_v = self._build_projection(dim, stride_kv)
        self.proj_q, self.proj_k, self.proj_v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)

    def _build_projection(self, dim, stride):
        return nn.Sequential(
            nn.Conv2d(dim, dim, kernel_size=3, padding=1, stride=stride, bias=False, groups=dim),
            nn.BatchNorm2d(dim),
            Rearrange("b c h w -> b (h w) c"),
        )

    def forward_conv(self, x, h, w):                                               # (B, 1+h*w, C)
        cls_token, x = torch.split(x, [1, h * w], 1)
        x = rearrange(x, "b (h w) c -> b c h w", h=h, w=w)                         # (B, C, h, w)
        q, k, v = self.conv_proj_q(x), self.conv_proj_k(x), self.conv_proj_v(x)
        q = torch.cat((cls_token, q), dim=1)                                       # (B, 1+h*w, C)
        k = torch.cat((cls_token, k), dim=1)                                       # (B, 1+h'*w', C)
        v = torch.cat((cls_token, v), dim=1)
        return q, k, v

    def forward(self, x, h, w):
        if self.bug == "grid-h-w-swapped":
            q, k, v = self.forward_conv(x, w, h)
        else:
            q, k, v = self.forward_conv(x, h, w)
        q = rearrange(self.proj_q(q), "b t (h d) -> b h t d", h=self.num_heads)
        k = rearrange(self.proj_k(k), "b t (h d) -> b h t d", h=self.num_heads)
        v = rearrange(self.proj_v(v), "b t (h d) -> b h t d", h=self.num_heads)
        attn_score = torch.einsum("bhlk,bhtk->bhlt", [q, k]) * self.scale          # (B, H, 1+hw, 1+h'w')
        attn = nn.functional.softmax(attn_score, dim=-1)
        x = torch.einsum("bhlt,bhtv->bhlv", [attn, v])                             # (B, H, 1+hw, d)
        if self.bug == "merge-heads-d-h":
            x = rearrange(x, "b h t d -> b t (d h)")
        else:
            x = rearrange(x, "b h t d -> b t (h d)")
        return self.proj(x)


class VisionTransformer(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, kernel_size=4, stride=4)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, bug=bug)

    def forward(self, x):                                                          # (B, 3, 4h, 4w)
        x = self.patch_embed(x)                                                    # (B, C, h, w)
        B, C, H, W = x.size()
        x = rearrange(x, "b c h w -> b (h w) c")
        x = torch.cat((self.cls_token.expand(B, -1, -1), x), dim=1)                # (B, 1+hw, C)
        return x + self.attn(self.norm1(x), H, W)


BUGS = ("grid-h-w-swapped",)
TWINS = ("merge-heads-d-h",)
DIMS = ("B=2 D=32 H=4 Hp=3 Wp=5",)
EQUAL = {"B=2 D=32 H=4 Hp=3 Wp=5": "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=3, Wp=5):
    torch.manual_seed(0)
    return VisionTransformer(D, H, bug).eval(), (torch.randn(B, 3, 4 * Hp, 4 * Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
