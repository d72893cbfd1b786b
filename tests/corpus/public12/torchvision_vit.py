"""pytorch/vision, torchvision/models/vision_transformer.py (v0.16, ``VisionTransformer._process_input``,
``Encoder``, ``EncoderBlock``): a ``conv_proj`` (kernel = stride = patch size) to ``(n, hidden_dim, n_h,
n_w)``, ``x.reshape(n, hidden_dim, n_h * n_w)`` then ``x.permute(0, 2, 1)``; the class token
``expand(n, -1, -1)`` joined by ``torch.cat`` on dim 1; a learned ``pos_embedding``; each block
``ln_1`` then ``nn.MultiheadAttention(hidden_dim, num_heads, batch_first=True)`` called as
``self_attention(x, x, x, need_weights=False)``; the head reads ``x[:, 0]``.

Bug (argument): ``patches-no-permute``: ``x.reshape(n, n_h * n_w, hidden_dim)`` in place of the reshape and
permute (the channel-first map read as channel-last: each "token" is a run of one channel's
pixels; a natural slip of from-scratch ViT ports)."""

import sys

import torch
from torch import nn

BUGS = ("patches-no-permute",)
TWINS = ()
DIMS = ("B=2 T=9 D=64 H=4",)


class EncoderBlock(nn.Module):
    def __init__(self, hidden_dim, num_heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden_dim)
        self.self_attention = nn.MultiheadAttention(hidden_dim, num_heads, dropout=0.0, batch_first=True)
        self.ln_2 = nn.LayerNorm(hidden_dim)
        self.mlp = nn.Sequential(nn.Linear(hidden_dim, 2 * hidden_dim), nn.GELU(),
                                 nn.Linear(2 * hidden_dim, hidden_dim))

    def forward(self, input):
        x = self.ln_1(input)
        x, _ = self.self_attention(x, x, x, need_weights=False)
        x = x + input
        return x + self.mlp(self.ln_2(x))


class VisionTransformer(nn.Module):
    def __init__(self, image_size, patch_size, hidden_dim, num_heads, bug=""):
        super().__init__()
        self.patch_size, self.hidden_dim, self.bug = patch_size, hidden_dim, bug
        self.conv_proj = nn.Conv2d(3, hidden_dim, kernel_size=patch_size, stride=patch_size)
        seq_length = (image_size // patch_size) ** 2 + 1
        self.class_token = nn.Parameter(torch.zeros(1, 1, hidden_dim))
        self.pos_embedding = nn.Parameter(torch.empty(1, seq_length, hidden_dim).normal_(std=0.02))
        self.layer = EncoderBlock(hidden_dim, num_heads)
        self.ln = nn.LayerNorm(hidden_dim)

    def _process_input(self, x):
        n, c, h, w = x.shape
        n_h, n_w = h // self.patch_size, w // self.patch_size
        x = self.conv_proj(x)  # (n, hidden_dim, n_h, n_w)
        if self.bug == "patches-no-permute":
            return x.reshape(n, n_h * n_w, self.hidden_dim)
        x = x.reshape(n, self.hidden_dim, n_h * n_w)
        return x.permute(0, 2, 1)  # (n, N, hidden_dim)

    def forward(self, x):
        x = self._process_input(x)
        batch_class_token = self.class_token.expand(x.shape[0], -1, -1)
        x = torch.cat([batch_class_token, x], dim=1)
        x = self.ln(self.layer(x + self.pos_embedding))
        return x[:, 0]


def build(bug="", B=2, T=9, D=64, H=4):
    torch.manual_seed(0)
    grid, patch = int(T**0.5), 4
    return VisionTransformer(grid * patch, patch, D, H, bug), (torch.randn(B, 3, grid * patch, grid * patch),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    model(*inputs)
