"""microsoft/Swin-Transformer, models/swin_transformer_v2.py (``WindowAttention``): the qkv bias made
by ``torch.cat((q_bias, zeros_like(v_bias), v_bias))`` and passed to ``F.linear``, scaled cosine
attention (``F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)`` times
``clamp(logit_scale, max=log(1/0.01)).exp()``, a ``[H, 1, 1]`` parameter), and the continuous
relative position bias: ``cpb_mlp(relative_coords_table).view(-1, H)`` indexed by
``relative_position_index``, ``permute(2, 0, 1)``, ``16 * sigmoid``. Windows of 2 × 3 tokens arrive
batched ``[B*nW, N, C]``.

Bugs (argument): ``normalize-tokens``: ``F.normalize(q, dim=-2)``: each feature normalised over the
window's tokens instead of each token over its features (the cosine is no longer a cosine; the
dim=-2/-1 slip of the normalize calls); ``bias-unpermuted``: the bias table left ``[N, N, H]`` and
``view``-ed to ``[H, N, N]`` without ``permute(2, 0, 1)`` (heads and keys mixed)."""

import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class WindowAttention(nn.Module):
    def __init__(self, dim, window_size, num_heads, bug=""):
        super().__init__()
        self.dim, self.window_size, self.num_heads, self.bug = dim, window_size, num_heads, bug
        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones((num_heads, 1, 1))))
        self.cpb_mlp = nn.Sequential(nn.Linear(2, 16, bias=True), nn.ReLU(inplace=True),
                                     nn.Linear(16, num_heads, bias=False))
        wh, ww = window_size
        coords_h = torch.arange(-(wh - 1), wh, dtype=torch.float32)
        coords_w = torch.arange(-(ww - 1), ww, dtype=torch.float32)
        table = torch.stack(torch.meshgrid([coords_h, coords_w], indexing="ij")).permute(1, 2, 0).contiguous()
        table = table.unsqueeze(0)  # (1, 2*Wh-1, 2*Ww-1, 2)
        table = torch.sign(table) * torch.log2(torch.abs(table) + 1.0) / np.log2(8)
        self.register_buffer("relative_coords_table", table)
        coords = torch.stack(torch.meshgrid([torch.arange(wh), torch.arange(ww)], indexing="ij"))  # (2, Wh, Ww)
        coords_flatten = torch.flatten(coords, 1)  # (2, N)
        relative_coords = coords_flatten[:, :, None] - coords_flatten[:, None, :]  # (2, N, N)
        relative_coords = relative_coords.permute(1, 2, 0).contiguous()  # (N, N, 2)
        relative_coords[:, :, 0] += wh - 1
        relative_coords[:, :, 1] += ww - 1
        relative_coords[:, :, 0] *= 2 * ww - 1
        self.register_buffer("relative_position_index", relative_coords.sum(-1))  # (N, N)
        self.qkv = nn.Linear(dim, dim * 3, bias=False)
        self.q_bias = nn.Parameter(torch.zeros(dim))
        self.v_bias = nn.Parameter(torch.zeros(dim))
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B_, N, C = x.shape
        qkv_bias = torch.cat((self.q_bias, torch.zeros_like(self.v_bias, requires_grad=False), self.v_bias))
        qkv = F.linear(input=x, weight=self.qkv.weight, bias=qkv_bias)  # (B*nW, N, 3*C)
        qkv = qkv.reshape(B_, N, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)  # (3, B*nW, H, N, d)
        q, k, v = qkv[0], qkv[1], qkv[2]
        q_dim = -2 if self.bug == "normalize-tokens" else -1
        attn = F.normalize(q, dim=q_dim) @ F.normalize(k, dim=-1).transpose(-2, -1)  # (B*nW, H, N, N)
        logit_scale = torch.clamp(self.logit_scale, max=torch.log(torch.tensor(1.0 / 0.01))).exp()
        attn = attn * logit_scale
        table = self.cpb_mlp(self.relative_coords_table).view(-1, self.num_heads)  # (L, H)
        bias = table[self.relative_position_index.view(-1)].view(N, N, -1)  # (N, N, H)
        if self.bug == "bias-unpermuted":
            bias = bias.contiguous().view(-1, N, N)  # bug: (H?, N?, N?)
        else:
            bias = bias.permute(2, 0, 1).contiguous()  # (H, N, N)
        attn = attn + 16 * torch.sigmoid(bias).unsqueeze(0)
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B_, N, C)  # (B*nW, N, C)
        return self.proj(x)


def build(bug="", B=2, T=6, D=32, H=4):
    """--dims B=2,T=6,D=32,H=4: windows of 2 × 3 tokens (T = 6), B windows."""
    torch.manual_seed(0)
    return WindowAttention(D, (2, T // 2), H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
