"""OpenGVLab/InternVL, internvl_chat/internvl/model/internvit/modeling_intern_vit.py (``InternAttention._naive_attn``:
``qkv(x).reshape(B, N, 3, num_heads, C // num_heads).permute(2, 0, 3, 1, 4)``, ``(q * scale) @ k.transpose(-2, -1)``,
``softmax(dim=-1)``, ``(attn @ v).transpose(1, 2).reshape(B, N, C)``, ``proj``) and
internvl_chat/internvl/model/internvl_chat/modeling_internvl_chat.py (``InternVLChatModel.extract_feature``,
``pixel_shuffle``, ``mlp1``): the ViT's last hidden state drops its class token (``vit_embeds[:, 1:, :]``), is laid out
on its square grid (``h = w = int(vit_embeds.shape[1] ** 0.5)``, ``reshape(B, h, w, -1)``), pixel-shuffled by
``downsample_ratio = 0.5`` (``view(n, w, h * s, c / s)``, ``permute(0, 2, 1, 3)``, ``view(n, h * s, w * s, c / s²)``,
and with ``ps_version == 'v2'`` a ``permute(0, 2, 1, 3)`` back): each 2×2 block of patches becomes one token of
``4·C`` features, flattened ``reshape(B, -1, C·4)`` and projected by ``mlp1`` (LayerNorm, Linear, GELU, Linear) into
the language model's width.

Bugs: ``ps-version-v1``: the last ``permute(0, 2, 1, 3)`` skipped, as ``ps_version='v1'`` checkpoints do (InternVL
warns "the height and width have not been swapped back, which results in a transposed image"): the merged tokens come
out column-major, the image transposed; ``shuffle-view-only``: the first ``permute`` dropped (``view`` straight from
``(n, w, h·s, c/s)`` to ``(n, h·s, w·s, c/s²)``): each merged token takes 4 patches of one row (a 1×4 strip), not a
2×2 block; ``cls-cut-from-end``: ``vit_embeds[:, :-1, :]``: the class token kept as the first patch and the last patch
dropped (each grid row shifted by one patch)."""

import sys

import torch
from torch import nn


class InternAttention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads, self.scale = num_heads, (embed_dim // num_heads) ** -0.5
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads)    # (B, N, 3, H, d)
        qkv = qkv.permute(2, 0, 3, 1, 4)                                             # (3, B, H, N, d)
        q, k, v = qkv.unbind(0)
        attn = (q * self.scale) @ k.transpose(-2, -1)                                # (B, H, N, N)
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)                              # (B, N, C)
        return self.proj(x)


class InternVLChatModel(nn.Module):
    def __init__(self, vit_hidden_size, llm_hidden_size, heads, bug="", downsample_ratio=0.5):
        super().__init__()
        self.bug, self.downsample_ratio = bug, downsample_ratio
        self.ps_version = "v1" if bug == "ps-version-v1" else "v2"
        self.norm1, self.attn = nn.LayerNorm(vit_hidden_size), InternAttention(vit_hidden_size, heads)
        scale = int(1 / downsample_ratio) ** 2
        self.mlp1 = nn.Sequential(nn.LayerNorm(vit_hidden_size * scale),
                                  nn.Linear(vit_hidden_size * scale, llm_hidden_size), nn.GELU(),
                                  nn.Linear(llm_hidden_size, llm_hidden_size))

    def pixel_shuffle(self, x, scale_factor=0.5):
        n, w, h, c = x.size()
        x = x.view(n, w, int(h * scale_factor), int(c / scale_factor))               # (n, w, h/2, 2c)
        if self.bug != "shuffle-view-only":
            x = x.permute(0, 2, 1, 3).contiguous()                                   # (n, h/2, w, 2c)
        x = x.view(n, int(h * scale_factor), int(w * scale_factor),
                   int(c / (scale_factor * scale_factor)))                           # (n, h/2, w/2, 4c)
        if self.ps_version != "v1":
            x = x.permute(0, 2, 1, 3).contiguous()                                   # (n, w/2, h/2, 4c)
        return x

    def extract_feature(self, vit_embeds):                                           # (B, 1 + h·w, C)
        vit_embeds = vit_embeds + self.attn(self.norm1(vit_embeds))
        if self.bug == "cls-cut-from-end":
            vit_embeds = vit_embeds[:, :-1, :]
        else:
            vit_embeds = vit_embeds[:, 1:, :]                                        # (B, h·w, C)
        h = w = int(vit_embeds.shape[1] ** 0.5)
        vit_embeds = vit_embeds.reshape(vit_embeds.shape[0], h, w, -1)               # (B, h, w, C)
        vit_embeds = self.pixel_shuffle(vit_embeds, scale_factor=self.downsample_ratio)   # (B, h/2, w/2, 4C)
        vit_embeds = vit_embeds.reshape(vit_embeds.shape[0], -1, vit_embeds.shape[-1])    # (B, h·w/4, 4C)
        return self.mlp1(vit_embeds)                                                 # (B, h·w/4, D_llm)

    def forward(self, vit_embeds):
        return self.extract_feature(vit_embeds)


BUGS = ("ps-version-v1", "shuffle-view-only", "cls-cut-from-end")
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=6 Wp=6",)   # (InternViT's grid is square: 448 / 14 = 32 patches a side)
EQUAL = {DIMS[0]: "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=6, Wp=6, T=None):  # noqa: N803
    """The ViT's hidden state before its last block: the class token then ``Hp × Wp`` patches at width ``D`` (or,
    where the sizes declare the tokens instead, ``T`` of them: the class token and a square grid of ``T - 1``); the
    language model's width is ``48``."""
    torch.manual_seed(0)
    tokens = 1 + Hp * Wp if T is None else T
    return InternVLChatModel(D, 48, H, bug).eval(), (torch.randn(B, tokens, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
