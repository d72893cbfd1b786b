"""facebookresearch/dinov2, dinov2/models/vision_transformer.py and dinov2/layers/attention.py (v1.0, with
registers: ``DinoVisionTransformer.prepare_tokens_with_masks`` and ``forward_features``, ``Attention``; Darcet et
al. 2023, "Vision Transformers Need Registers"): the class token joined before the patches, the positional
embedding added, then ``register_tokens.expand(B, -1, -1)`` put between them (``cat((x[:, :1], registers,
x[:, 1:]), dim=1)``); attention ``qkv(x).reshape(B, N, 3, H, C // H).permute(2, 0, 3, 1, 4)``, ``q * scale``,
``q @ k.transpose(-2, -1)``, ``softmax(-1)``, ``(attn @ v).transpose(1, 2).reshape(B, N, C)``, ``LayerScale``;
the outputs ``x_norm_clstoken = x[:, 0]``, ``x_norm_regtokens = x[:, 1 : R + 1]``, ``x_norm_patchtokens =
x[:, R + 1 :]``.

Bugs (argument): ``qkv-permute``: ``permute(2, 0, 1, 3, 4)`` (``(3, B, N, H, d)``: the head axis left where the
tokens should be, so ``q @ k.transpose(-2, -1)`` scores heads against heads within each token, the permute slip
of hand-ported fused-qkv code); ``registers-as-patches``: ``x_norm_patchtokens = x_norm[:, 1:]`` (the
pre-register slice kept after registers were added: the first R "patch tokens" are registers)."""

import sys

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        self.scale = (dim // num_heads) ** -0.5
        self.qkv, self.proj = nn.Linear(dim, dim * 3), nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads)      # (B, N, 3, H, d)
        order = (2, 0, 1, 3, 4) if self.bug == "qkv-permute" else (2, 0, 3, 1, 4)
        qkv = qkv.permute(*order)                                                      # (3, B, H, N, d)
        q, k, v = qkv[0] * self.scale, qkv[1], qkv[2]
        attn = q @ k.transpose(-2, -1)                                                 # (B, H, N, N)
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj(x)


class LayerScale(nn.Module):
    def __init__(self, dim, init_values=1e-5):
        super().__init__()
        self.gamma = nn.Parameter(init_values * torch.ones(dim))

    def forward(self, x):
        return x * self.gamma


class DinoVisionTransformer(nn.Module):
    def __init__(self, dim, heads, num_patches, bug="", num_register_tokens=4):
        super().__init__()
        self.bug, self.num_register_tokens = bug, num_register_tokens
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, num_patches + 1, dim) * 0.02)
        self.register_tokens = nn.Parameter(torch.randn(1, num_register_tokens, dim))
        self.norm1, self.attn, self.ls1 = nn.LayerNorm(dim), Attention(dim, heads, bug), LayerScale(dim)
        self.norm = nn.LayerNorm(dim)

    def prepare_tokens_with_masks(self, x):                                          # (B, N, D) patches
        B = x.shape[0]
        x = torch.cat((self.cls_token.expand(B, -1, -1), x), dim=1)                  # (B, 1+N, D)
        x = x + self.pos_embed
        return torch.cat((x[:, :1], self.register_tokens.expand(B, -1, -1), x[:, 1:]), dim=1)  # (B, 1+R+N, D)

    def forward(self, x):
        x = self.prepare_tokens_with_masks(x)
        x = x + self.ls1(self.attn(self.norm1(x)))
        x_norm = self.norm(x)
        start = 1 if self.bug == "registers-as-patches" else self.num_register_tokens + 1
        return {"x_norm_clstoken": x_norm[:, 0], "x_norm_regtokens": x_norm[:, 1 : self.num_register_tokens + 1],
                "x_norm_patchtokens": x_norm[:, start:]}


BUGS = ("qkv-permute", "registers-as-patches")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    return DinoVisionTransformer(D, H, T, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
