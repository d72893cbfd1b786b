"""transformers, src/transformers/models/efficientformer/modeling_efficientformer.py (v4.46,
``EfficientFormerPatchEmbeddings``, ``EfficientFormerFlat``, ``EfficientFormerSelfAttention``,
``EfficientFormerMeta3D``): EfficientFormer's last stage, a convolutional stem whose ``(B, C, Hp, Wp)`` map is
``flatten(2).transpose(1, 2)``ed to tokens, then a Meta3D block. Its attention: one ``qkv`` ``Linear`` to ``2·H·k
+ H·r·k`` (``key_dim`` k, ``attention_ratio`` r), ``reshape(B, N, H, -1).split([k, k, r·k], dim=3)``, each
``permute(0, 2, 1, 3)``; ``matmul(q, kᵀ) * scale`` plus ``attention_biases[:, attention_bias_idxs]`` (one bias per
head and per ``(|dy|, |dx|)`` offset of the ``Hp x Wp`` grid, indexed by an ``(N, N)`` buffer), ``softmax(-1)``,
``matmul`` with v, ``transpose(1, 2).reshape(B, N, H·r·k)``, ``projection``.

Bugs: ``context-without-transpose``: ``matmul(probs, v).reshape(B, N, H·r·k)`` with the ``transpose(1, 2)``
dropped (heads read as tokens); ``softmax-dim-2``: ``softmax(dim=2)`` (the slip of counting the scores' axes as
``(B, N, N)``: normalised over the queries).

Twin: ``split-then-reshape``: ``qkv.split([H·k, H·k, H·r·k], dim=-1)`` first and each part ``reshape(B, N, H,
-1)`` (LeViT's order in timm): another channel layout of the same random ``Linear``, no bug."""

import itertools
import sys

import torch
from torch import nn


class EfficientFormerSelfAttention(nn.Module):
    def __init__(self, dim, key_dim, num_heads, attention_ratio, resolution, bug=""):
        super().__init__()
        self.num_heads, self.key_dim, self.attention_ratio, self.bug = num_heads, key_dim, attention_ratio, bug
        self.scale = key_dim ** -0.5
        self.total_key_dim = key_dim * num_heads
        self.expanded_key_dim = int(attention_ratio * key_dim)
        self.total_expanded_key_dim = self.expanded_key_dim * num_heads
        self.qkv = nn.Linear(dim, self.total_expanded_key_dim + self.total_key_dim * 2)
        self.projection = nn.Linear(self.total_expanded_key_dim, dim)
        points = list(itertools.product(range(resolution[0]), range(resolution[1])))
        attention_offsets, idxs = {}, []
        for point_1 in points:
            for point_2 in points:
                offset = (abs(point_1[0] - point_2[0]), abs(point_1[1] - point_2[1]))
                if offset not in attention_offsets:
                    attention_offsets[offset] = len(attention_offsets)
                idxs.append(attention_offsets[offset])
        self.attention_biases = nn.Parameter(torch.randn(num_heads, len(attention_offsets)) * 0.1)
        self.register_buffer("attention_bias_idxs", torch.LongTensor(idxs).view(len(points), len(points)))

    def forward(self, hidden_states):
        batch_size, sequence_length, num_channels = hidden_states.shape
        qkv = self.qkv(hidden_states)
        sizes = [self.key_dim, self.key_dim, self.expanded_key_dim]
        if self.bug == "split-then-reshape":
            parts = qkv.split([s * self.num_heads for s in sizes], dim=-1)
            query_layer, key_layer, value_layer = (p.reshape(batch_size, sequence_length, self.num_heads, -1)
                                                   for p in parts)
        else:
            query_layer, key_layer, value_layer = qkv.reshape(
                batch_size, sequence_length, self.num_heads, -1).split(sizes, dim=3)
        query_layer = query_layer.permute(0, 2, 1, 3)
        key_layer = key_layer.permute(0, 2, 1, 3)
        value_layer = value_layer.permute(0, 2, 1, 3)
        attention_probs = torch.matmul(query_layer, key_layer.transpose(-2, -1)) * self.scale
        attention_probs = attention_probs + self.attention_biases[:, self.attention_bias_idxs]
        attention_probs = attention_probs.softmax(dim=2 if self.bug == "softmax-dim-2" else -1)
        context_layer = torch.matmul(attention_probs, value_layer)
        if self.bug != "context-without-transpose":
            context_layer = context_layer.transpose(1, 2)
        context_layer = context_layer.reshape(batch_size, sequence_length, self.total_expanded_key_dim)
        return self.projection(context_layer)


class EfficientFormerMeta3D(nn.Module):
    def __init__(self, dim, heads, resolution, bug=""):
        super().__init__()
        self.token_mixer = EfficientFormerSelfAttention(dim, dim // heads, heads, 2, resolution, bug)
        self.layernorm1, self.layernorm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.fc1, self.fc2 = nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim)
        self.layer_scale_1 = nn.Parameter(1e-1 * torch.ones(dim))
        self.layer_scale_2 = nn.Parameter(1e-1 * torch.ones(dim))

    def forward(self, hidden_states):
        attention_output = self.token_mixer(self.layernorm1(hidden_states))
        layer_output = hidden_states + self.layer_scale_1.unsqueeze(0).unsqueeze(0) * attention_output
        mlp = self.fc2(nn.functional.gelu(self.fc1(self.layernorm2(layer_output))))
        return layer_output + self.layer_scale_2.unsqueeze(0).unsqueeze(0) * mlp


class EfficientFormerLastStage(nn.Module):
    def __init__(self, dim, heads, resolution, bug=""):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, dim // 2, 3, 2, 1), nn.BatchNorm2d(dim // 2), nn.ReLU(),
                                  nn.Conv2d(dim // 2, dim, 3, 2, 1), nn.BatchNorm2d(dim), nn.ReLU())
        self.meta3D = EfficientFormerMeta3D(dim, heads, resolution, bug)
        self.norm = nn.LayerNorm(dim)

    def forward(self, pixel_values):
        hidden_states = self.stem(pixel_values)                            # (B, C, Hp, Wp)
        hidden_states = hidden_states.flatten(2).transpose(1, 2)           # EfficientFormerFlat: (B, N, C)
        return self.norm(self.meta3D(hidden_states))


BUGS = ("context-without-transpose", "softmax-dim-2")
TWINS = ("split-then-reshape",)
DIMS = ("B=2 D=32 H=4 Hp=3 Wp=5",)
EQUAL = {"B=2 D=32 H=4 Hp=3 Wp=5": "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=3, Wp=5):
    torch.manual_seed(0)
    return EfficientFormerLastStage(D, H, (Hp, Wp), bug).eval(), (torch.randn(B, 3, 4 * Hp, 4 * Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
