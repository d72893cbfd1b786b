"""huggingface/pytorch-image-models, timm/models/beit.py (v0.9, ``Attention`` and
``gen_relative_position_index``): ``F.linear(x, self.qkv.weight, cat((q_bias, zeros_like(v_bias),
v_bias)))``, ``reshape(B, N, 3, H, -1).permute(2, 0, 3, 1, 4)``, ``unbind(0)``, ``q * scale @
k.transpose(-2, -1)``; a relative position bias read from a learned table ``((2Wh-1)(2Ww-1) + 3, H)``
through a ``(1 + Wh*Ww, 1 + Wh*Ww)`` index (three extra entries for the class token: class-to-patch,
patch-to-class, class-to-class), ``table[index.view(-1)].view(N, N, -1).permute(2, 0, 1)`` and
``attn + bias.unsqueeze(0)``; ``softmax(dim=-1)``; ``(attn @ v).transpose(1, 2).reshape(B, N, C)``.

Bug (argument): ``bias-view-heads-first``: ``table[index.view(-1)].view(-1, N, N)`` with no permute (the
gathered ``(N*N, H)`` rows read as if heads came first: each head's "bias" mixes all heads' values of
neighbouring pairs; a natural slip of the gather)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("bias-view-heads-first",)
TWINS = ()
DIMS = ("B=2 T=9 D=64 H=4",)


def gen_relative_position_index(window_size):
    num_relative_distance = (2 * window_size[0] - 1) * (2 * window_size[1] - 1) + 3
    window_area = window_size[0] * window_size[1]
    coords = torch.stack(torch.meshgrid(torch.arange(window_size[0]), torch.arange(window_size[1]),
                                        indexing="ij")).flatten(1)  # (2, Wh*Ww)
    relative_coords = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0).contiguous()
    relative_coords[:, :, 0] += window_size[0] - 1
    relative_coords[:, :, 1] += window_size[1] - 1
    relative_coords[:, :, 0] *= 2 * window_size[1] - 1
    index = torch.zeros(size=(window_area + 1,) * 2, dtype=relative_coords.dtype)
    index[1:, 1:] = relative_coords.sum(-1)
    index[0, 0:] = num_relative_distance - 3
    index[0:, 0] = num_relative_distance - 2
    index[0, 0] = num_relative_distance - 1
    return index


class Attention(nn.Module):
    def __init__(self, dim, num_heads, window_size, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=False)
        self.q_bias, self.v_bias = nn.Parameter(torch.zeros(dim)), nn.Parameter(torch.zeros(dim))
        self.register_buffer("k_bias", torch.zeros(dim), persistent=False)
        n_rel = (2 * window_size[0] - 1) * (2 * window_size[1] - 1) + 3
        self.relative_position_bias_table = nn.Parameter(torch.randn(n_rel, num_heads) * 0.02)
        self.register_buffer("relative_position_index", gen_relative_position_index(window_size), persistent=False)
        self.proj = nn.Linear(dim, dim)

    def _get_rel_pos_bias(self):
        n = self.relative_position_index.shape[0]
        gathered = self.relative_position_bias_table[self.relative_position_index.view(-1)]
        if self.bug == "bias-view-heads-first":
            return gathered.view(-1, n, n).unsqueeze(0)
        return gathered.view(n, n, -1).permute(2, 0, 1).contiguous().unsqueeze(0)  # (1, H, N, N)

    def forward(self, x):
        B, N, C = x.shape
        qkv_bias = torch.cat((self.q_bias, self.k_bias, self.v_bias))
        qkv = F.linear(x, weight=self.qkv.weight, bias=qkv_bias)
        q, k, v = qkv.reshape(B, N, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
        attn = (q * self.scale) @ k.transpose(-2, -1)
        attn = (attn + self._get_rel_pos_bias()).softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj(x)


class Beit(nn.Module):
    def __init__(self, dim, heads, grid, bug=""):
        super().__init__()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.attn = Attention(dim, heads, (grid, grid), bug)

    def forward(self, patches):  # (B, N, D)
        x = torch.cat((self.cls_token.expand(patches.shape[0], -1, -1), patches), dim=1)
        return x + self.attn(x)


def build(bug="", B=2, T=9, D=64, H=4):
    torch.manual_seed(0)
    grid = int(T**0.5)
    return Beit(D, H, grid, bug), (torch.randn(B, grid * grid, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    model(*inputs)
