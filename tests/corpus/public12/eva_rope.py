"""huggingface/pytorch-image-models, timm/models/eva.py (v1.0, ``EvaAttention``) with
timm/layers/pos_embed_sincos.py (``build_rotary_pos_embed``, ``RotaryEmbeddingCat``, ``apply_rot_embed_cat``):
a fused ``qkv`` reshaped ``(B, N, 3, H, d).permute(2, 0, 3, 1, 4)`` and ``unbind(0)``; a 2-D rotary on the
patch tokens only (``npt = num_prefix_tokens``: the class token kept out and joined back by ``torch.cat`` on
the token axis); the table ``cat([sin, cos], -1)`` of per-axis bands ``repeat_interleave(2)``, split by
``tensor_split(2, -1)``, pairs interleaved (``rot``: ``stack([-x[..., 1::2], x[..., ::2]], -1)``);
``F.scaled_dot_product_attention``; the merge ``transpose(1, 2).reshape(B, N, C)``.

Bugs (argument): ``rotate-half``: ``rope_rotate_half`` (``cat([-x2, x1])``) applied with the interleaved
table (timm keeps both, chosen by ``rotate_half=``; a natural slip: the rotation of one layout with the
other's table); ``class-token-last``: the rotated patches
joined before the class token (``cat([rot, q[:, :, :npt]])``), for q and k alike: the token order changes
under the keys and queries but not under the values."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("rotate-half", "class-token-last")
TWINS = ()
DIMS = ("B=2 T=9 D=64 H=4",)


def rot(x):
    return torch.stack([-x[..., 1::2], x[..., ::2]], -1).reshape(x.shape)


def rope_rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def build_rotary_pos_embed(dim, grid):
    bands = 1.0 / (10000 ** (torch.arange(0, dim // 4).float() / (dim // 4)))  # (d/4,)
    t = torch.stack(torch.meshgrid(torch.arange(grid), torch.arange(grid), indexing="ij"), dim=-1)  # (g, g, 2)
    pos = (t.unsqueeze(-1) * bands).flatten(0, 1).flatten(1)  # (N, d/2)
    sin_emb = pos.sin().repeat_interleave(2, -1)  # (N, d)
    cos_emb = pos.cos().repeat_interleave(2, -1)  # (N, d)
    return torch.cat([sin_emb, cos_emb], -1)  # (N, 2d)


class EvaAttention(nn.Module):
    def __init__(self, dim, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.head_dim, self.bug = num_heads, dim // num_heads, bug
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def apply_rot_embed_cat(self, x, emb):
        sin_emb, cos_emb = emb.tensor_split(2, -1)
        rotate = rope_rotate_half if self.bug == "rotate-half" else rot
        return x * cos_emb + rotate(x) * sin_emb

    def forward(self, x, rope, npt=1):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)  # (3, B, H, N, d)
        q, k, v = qkv.unbind(0)
        if self.bug == "class-token-last":
            q = torch.cat([self.apply_rot_embed_cat(q[:, :, npt:, :], rope), q[:, :, :npt, :]], dim=2).type_as(v)
            k = torch.cat([self.apply_rot_embed_cat(k[:, :, npt:, :], rope), k[:, :, :npt, :]], dim=2).type_as(v)
        else:
            q = torch.cat([q[:, :, :npt, :], self.apply_rot_embed_cat(q[:, :, npt:, :], rope)], dim=2).type_as(v)
            k = torch.cat([k[:, :, :npt, :], self.apply_rot_embed_cat(k[:, :, npt:, :], rope)], dim=2).type_as(v)
        x = F.scaled_dot_product_attention(q, k, v)  # (B, H, N, d)
        x = x.transpose(1, 2).reshape(B, N, C)
        return self.proj(x)


class Eva(nn.Module):
    def __init__(self, dim, heads, grid, bug=""):
        super().__init__()
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, grid * grid + 1, dim) * 0.02)
        self.attn, self.norm = EvaAttention(dim, heads, bug), nn.LayerNorm(dim)
        self.register_buffer("rope", build_rotary_pos_embed(dim // heads, grid), persistent=False)

    def forward(self, patches):  # (B, N, D): patch embeddings
        x = torch.cat([self.cls_token.expand(patches.shape[0], -1, -1), patches], dim=1) + self.pos_embed
        x = x + self.attn(self.norm(x), self.rope)
        return x[:, 0]  # (B, D): the class token's feature


def build(bug="", B=2, T=9, D=64, H=4):
    torch.manual_seed(0)
    grid = int(T**0.5)
    return Eva(D, H, grid, bug), (torch.randn(B, grid * grid, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    model(*inputs)
