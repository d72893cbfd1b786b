"""facebookresearch/deit, models.py (``DistilledVisionTransformer``, on timm's ``VisionTransformer``, timm 0.3.2
``Attention``): a conv patch embedding (``proj(x).flatten(2).transpose(1, 2)``), a class token and a
distillation token expanded over the batch and concatenated in front (``torch.cat((cls_tokens, dist_token, x),
dim=1)``), ``pos_embed`` of ``num_patches + 2`` added; blocks with ``qkv(x).reshape(B, N, 3, H, C //
H).permute(2, 0, 3, 1, 4)``, ``(q @ k.transpose(-2, -1)) * scale``, softmax, ``(attn @ v).transpose(1,
2).reshape(B, N, C)``; ``norm``; ``forward_features`` returns ``x[:, 0], x[:, 1]``, and in eval ``(head(x) +
head_dist(x_dist)) / 2``. The image is not square (24 x 40 pixels, 8-pixel patches: a 3 x 5 grid).

Bugs (argument): ``attn-out-not-transposed``: ``(attn @ v).reshape(B, N, C)`` (the ``transpose(1, 2)``
dropped). A known miss, ``dist-head-reads-cls``: ``return x[:, 0], x[:, 0]`` (the distillation head fed the class
token: the slip of a port that copies the class-token line; the distillation token is still attended to, but no
head reads it out): every layout is right, and which learnt token a head should read is no fact torch records
(``KNOWN_MISSES``: its ``✓`` is a false one, tested as such)."""

import sys

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.scale, self.bug = num_heads, (dim // num_heads) ** -0.5, bug
        self.qkv, self.proj = nn.Linear(dim, dim * 3), nn.Linear(dim, dim)

    def forward(self, x):                                                          # (B, N, C)
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]                                           # (B, H, N, d)
        attn = (q @ k.transpose(-2, -1)) * self.scale                              # (B, H, N, N)
        attn = attn.softmax(dim=-1)
        if self.bug == "attn-out-not-transposed":
            x = (attn @ v).reshape(B, N, C)
        else:
            x = (attn @ v).transpose(1, 2).reshape(B, N, C)                        # (B, N, C)
        return self.proj(x)


class Block(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads, bug)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class DistilledVisionTransformer(nn.Module):
    def __init__(self, dim, heads, img_size=(24, 40), patch_size=8, num_classes=10, bug=""):
        super().__init__()
        self.bug = bug
        num_patches = (img_size[0] // patch_size) * (img_size[1] // patch_size)
        self.patch_embed = nn.Conv2d(3, dim, kernel_size=patch_size, stride=patch_size)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.dist_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, num_patches + 2, dim) * 0.02)
        self.blocks = nn.ModuleList([Block(dim, heads, bug), Block(dim, heads, bug)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head, self.head_dist = nn.Linear(dim, num_classes), nn.Linear(dim, num_classes)

    def forward_features(self, x):                                                 # (B, 3, h, w)
        B = x.shape[0]
        x = self.patch_embed(x).flatten(2).transpose(1, 2)                         # (B, N, C)
        cls_tokens = self.cls_token.expand(B, -1, -1)
        dist_token = self.dist_token.expand(B, -1, -1)
        x = torch.cat((cls_tokens, dist_token, x), dim=1)                          # (B, 2+N, C)
        x = x + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        x = self.norm(x)
        if self.bug == "dist-head-reads-cls":
            return x[:, 0], x[:, 0]
        return x[:, 0], x[:, 1]

    def forward(self, x):
        x, x_dist = self.forward_features(x)
        x, x_dist = self.head(x), self.head_dist(x_dist)
        return (x + x_dist) / 2


BUGS = ("attn-out-not-transposed",)
TWINS = ()
KNOWN_MISSES = ("dist-head-reads-cls",)
DIMS = ("B=2 D=32 H=4 Hp=3 Wp=5",)
EQUAL = {"B=2 D=32 H=4 Hp=3 Wp=5": "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=3, Wp=5):
    torch.manual_seed(0)
    return DistilledVisionTransformer(D, H, img_size=(8 * Hp, 8 * Wp), bug=bug).eval(), \
        (torch.randn(B, 3, 8 * Hp, 8 * Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
