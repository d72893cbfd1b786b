"""huggingface/pytorch-image-models, timm/models/tnt.py (v0.9.16, ``PixelEmbed``, ``Attention``, ``Block``,
``TNT``): Transformer in Transformer. ``PixelEmbed``: a ``Conv2d`` (kernel 7, stride 4), ``nn.Unfold`` into the
patches' pixel blocks, ``transpose(1, 2).reshape(B N, c, p, p)`` plus a pixel position table, ``reshape(B N, c,
-1).transpose(1, 2)``: ``(B N, P, c)`` pixel tokens; the patch tokens from ``proj(norm(pixel.reshape(B, N, -1)))``
with a class token and a position table. Each ``Block``: an inner attention over the ``P`` pixels of each patch
(``c = D / 4`` wide, 2 heads), the pixels folded back onto their patch (``norm1_proj(pixel).reshape(B, N, -1)``,
``proj``) and added to the patch tokens after the class token (``cat``), then the outer attention over the ``1 +
N`` tokens. timm's ``Attention``: ``qk(x).reshape(B, N, 2, H, d).permute(2, 0, 3, 1, 4)``, ``unbind(0)``, ``v(x)
.reshape(B, N, H, -1).permute(0, 2, 1, 3)``, ``(q @ k.transpose(-2, -1)) * scale``, ``softmax(dim=-1)``, ``(attn
@ v).transpose(1, 2).reshape(B, N, -1)``, ``proj``.

Bugs: ``unfold-without-transpose``: ``PixelEmbed`` reshapes the ``(B, c p p, N)`` unfold output to ``(B N, c, p,
p)`` without the ``transpose(1, 2)`` (the natural slip with ``nn.Unfold``, whose blocks are its last axis: each
"patch" is then a mix of channels and patches); ``inner-merge-without-transpose``: the inner attention's output
``(attn @ v).reshape(B N, P, -1)`` without the ``transpose(1, 2)`` (heads read as pixels)."""

import sys

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, hidden_dim, num_heads, bug=""):
        super().__init__()
        self.hidden_dim, self.num_heads, self.bug = hidden_dim, num_heads, bug
        self.head_dim = hidden_dim // num_heads
        self.scale = self.head_dim**-0.5
        self.qk = nn.Linear(dim, hidden_dim * 2, bias=False)
        self.v = nn.Linear(dim, dim, bias=False)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qk = self.qk(x).reshape(B, N, 2, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = qk.unbind(0)
        v = self.v(x).reshape(B, N, self.num_heads, -1).permute(0, 2, 1, 3)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        x = attn @ v
        if self.bug != "inner-merge-without-transpose":
            x = x.transpose(1, 2)
        return self.proj(x.reshape(B, N, -1))


class Block(nn.Module):
    def __init__(self, dim, dim_out, num_pixel, num_heads_in, num_heads, bug=""):
        super().__init__()
        self.norm_in = nn.LayerNorm(dim)
        self.attn_in = Attention(dim, dim, num_heads_in, bug)
        self.norm_mlp_in = nn.LayerNorm(dim)
        self.mlp_in = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.norm1_proj = nn.LayerNorm(dim)
        self.proj = nn.Linear(dim * num_pixel, dim_out, bias=True)
        self.norm_out = nn.LayerNorm(dim_out)
        self.attn_out = Attention(dim_out, dim_out, num_heads)
        self.norm_mlp = nn.LayerNorm(dim_out)
        self.mlp = nn.Sequential(nn.Linear(dim_out, 4 * dim_out), nn.GELU(), nn.Linear(4 * dim_out, dim_out))

    def forward(self, pixel_embed, patch_embed):
        pixel_embed = pixel_embed + self.attn_in(self.norm_in(pixel_embed))
        pixel_embed = pixel_embed + self.mlp_in(self.norm_mlp_in(pixel_embed))
        B, N, C = patch_embed.size()
        patch_embed = torch.cat(
            [patch_embed[:, 0:1], patch_embed[:, 1:] + self.proj(self.norm1_proj(pixel_embed).reshape(B, N - 1, -1))],
            dim=1)
        patch_embed = patch_embed + self.attn_out(self.norm_out(patch_embed))
        patch_embed = patch_embed + self.mlp(self.norm_mlp(patch_embed))
        return pixel_embed, patch_embed


class PixelEmbed(nn.Module):
    def __init__(self, img_size, patch_size, in_dim, stride=4, bug=""):
        super().__init__()
        self.grid = img_size // patch_size
        self.num_patches = self.grid * self.grid
        self.in_dim, self.bug = in_dim, bug
        self.new_patch_size = -(-patch_size // stride)
        self.proj = nn.Conv2d(3, in_dim, kernel_size=7, padding=3, stride=stride)
        self.unfold = nn.Unfold(kernel_size=self.new_patch_size, stride=self.new_patch_size)

    def forward(self, x, pixel_pos):
        B = x.shape[0]
        x = self.proj(x)
        x = self.unfold(x)
        if self.bug != "unfold-without-transpose":
            x = x.transpose(1, 2)
        x = x.reshape(B * self.num_patches, self.in_dim, self.new_patch_size, self.new_patch_size)
        x = x + pixel_pos
        return x.reshape(B * self.num_patches, self.in_dim, -1).transpose(1, 2)


class TNT(nn.Module):
    def __init__(self, dim, heads, img_size=16, patch_size=8, bug=""):
        super().__init__()
        inner_dim = dim // 4
        self.pixel_embed = PixelEmbed(img_size, patch_size, inner_dim, bug=bug)
        num_patches, new_patch_size = self.pixel_embed.num_patches, self.pixel_embed.new_patch_size
        num_pixel = new_patch_size**2
        self.norm1_proj = nn.LayerNorm(num_pixel * inner_dim)
        self.proj = nn.Linear(num_pixel * inner_dim, dim)
        self.norm2_proj = nn.LayerNorm(dim)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.patch_pos = nn.Parameter(torch.randn(1, num_patches + 1, dim) * 0.02)
        self.pixel_pos = nn.Parameter(torch.randn(1, inner_dim, new_patch_size, new_patch_size) * 0.02)
        self.block = Block(inner_dim, dim, num_pixel, 2, heads, bug)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        B = x.shape[0]
        pixel_embed = self.pixel_embed(x, self.pixel_pos)
        patch_embed = self.norm2_proj(self.proj(self.norm1_proj(
            pixel_embed.reshape(B, self.pixel_embed.num_patches, -1))))
        patch_embed = torch.cat((self.cls_token.expand(B, -1, -1), patch_embed), dim=1)
        patch_embed = patch_embed + self.patch_pos
        pixel_embed, patch_embed = self.block(pixel_embed, patch_embed)
        return self.norm(patch_embed)[:, 0]


BUGS = ("unfold-without-transpose", "inner-merge-without-transpose")
TWINS = ()
DIMS = ("B=2 D=32 H=4",)


def build(bug="", B=2, D=32, H=4):
    torch.manual_seed(0)
    return TNT(D, H, bug=bug).eval(), (torch.randn(B, 3, 16, 16),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
